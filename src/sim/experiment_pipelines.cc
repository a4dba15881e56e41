// The experiment YAML's `pipelines` section (docs/pipelines.md, "Pipelines
// in the simulator"): each pipeline's stages over profiled models, its edges with
// their branch probabilities, and optionally the plan `maitre plan --json`
// printed for it, into SimPipeline (sim/simulator.h). Each stage gets an app
// of its own, "<pipeline>/<vertex>", which the parser adds after the
// declared ones: selection routes the stage's queries under it.
#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "core/file_util.h"
#include "core/status_macros.h"
#include "pipeline/applied_plan.h"
#include "sim/experiment_yaml.h"

namespace maitre::sim::experiment_yaml {
namespace {

// pipelines[i].plan: the applied plan's stages and tuner, in the order of
// the pipeline's stages.
absl::Status ApplyPlan(const YAML::Node& n, const std::string& ip, const std::string& base_dir,
                       const SimulationSetup& setup, SimPipeline& p) {
  const std::string pp = Key(ip, "plan");
  std::string file;
  MAITRE_RETURN_IF_ERROR(ReadString(n, ip, "plan", &file));
  auto text = ReadFileToString(Resolve(base_dir, file));
  if (!text.ok()) return Bad(pp, text.status().message());
  auto applied = pipeline::ParseAppliedPlanJson(*text);
  if (!applied.ok()) return Bad(pp, applied.status().message());
  if (applied->stages.size() != p.stages.size()) {
    return Bad(pp, absl::StrCat("plans ", applied->stages.size(), " stages; the pipeline has ",
                                p.stages.size()));
  }
  pipeline::TunerPlan tuner = applied->tuner;
  tuner.stages.clear();
  for (SimPipelineStage& stage : p.stages) {
    auto it = std::find_if(
        applied->stages.begin(), applied->stages.end(),
        [&](const pipeline::AppliedStage& a) { return a.vertex == stage.vertex; });
    if (it == applied->stages.end()) return Bad(pp, absl::StrCat("no stage ", stage.vertex));
    stage.worker_type = WorkerTypeIndex(setup, it->hardware);
    if (stage.worker_type < 0) {
      return Bad(pp, absl::StrCat("stage ", stage.vertex, ": no worker type ", it->hardware));
    }
    stage.variant = it->variant;
    stage.batch = it->batch;
    tuner.stages.push_back(applied->tuner.stages[it - applied->stages.begin()]);
  }
  p.plan = std::move(tuner);
  return absl::OkStatus();
}

absl::Status ParseStages(const YAML::Node& list, const std::string& sp, SimulationSetup& setup,
                         SimPipeline& p) {
  if (!Present(list) || !list.IsSequence() || list.size() == 0) {
    return Bad(sp, "expected a non-empty list of {vertex, model, from}");
  }
  std::map<std::string, int32_t> index;
  for (size_t s = 0; s < list.size(); ++s) {
    const std::string ip = Item(sp, s);
    MAITRE_RETURN_IF_ERROR(CheckMap(list[s], ip, {"vertex", "model", "from"}));
    SimPipelineStage stage;
    MAITRE_RETURN_IF_ERROR(ReadString(list[s], ip, "vertex", &stage.vertex, true));
    MAITRE_RETURN_IF_ERROR(ReadString(list[s], ip, "model", &stage.model, true));
    if (!index.emplace(stage.vertex, static_cast<int32_t>(s)).second) {
      return Bad(Key(ip, "vertex"), "duplicate vertex");
    }
    if (std::none_of(setup.variants.begin(), setup.variants.end(),
                     [&](const SimVariant& v) { return v.key.model == stage.model; })) {
      return Bad(Key(ip, "model"), absl::StrCat("no profile for model ", stage.model));
    }
    if (YAML::Node from = list[s]["from"]; Present(from)) {
      const std::string fp = Key(ip, "from");
      if (!from.IsSequence()) return Bad(fp, "expected a list of {vertex, probability}");
      for (size_t e = 0; e < from.size(); ++e) {
        const std::string ep = Item(fp, e);
        MAITRE_RETURN_IF_ERROR(CheckMap(from[e], ep, {"vertex", "probability"}));
        std::string source;
        pipeline::StageEdge edge;
        MAITRE_RETURN_IF_ERROR(ReadString(from[e], ep, "vertex", &source, true));
        MAITRE_RETURN_IF_ERROR(ReadNumber(from[e], ep, "probability", &edge.probability));
        auto it = index.find(source);
        if (it == index.end() || it->second == static_cast<int32_t>(s)) {
          return Bad(Key(ep, "vertex"), absl::StrCat("no stage ", source, " before this one"));
        }
        if (!(edge.probability >= 0 && edge.probability <= 1)) {
          return Bad(Key(ep, "probability"), "must be in [0, 1]");
        }
        edge.from = it->second;
        stage.in.push_back(edge);
      }
    }
    stage.worker_type = -1;  // unplanned unless a plan says
    p.stages.push_back(std::move(stage));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ParsePipelines(const YAML::Node& list, const std::string& base_dir,
                            SimulationSetup& setup) {
  const std::string path = "pipelines";
  if (!Present(list)) return absl::OkStatus();
  if (!list.IsSequence()) return Bad(path, "expected a list of {name, app, stages, plan}");
  if (setup.routing != "selection") return Bad(path, "needs policies.routing: selection");
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string ip = Item(path, i);
    const YAML::Node& n = list[i];
    MAITRE_RETURN_IF_ERROR(CheckMap(n, ip, {"name", "app", "stages", "plan"}));
    SimPipeline p;
    std::string app;
    MAITRE_RETURN_IF_ERROR(ReadString(n, ip, "name", &p.name, true));
    MAITRE_RETURN_IF_ERROR(ReadString(n, ip, "app", &app, true));
    p.app = AppIndex(setup, app);
    if (p.app < 0) return Bad(Key(ip, "app"), absl::StrCat("no app named ", app));
    if (!setup.apps[p.app].models.empty()) {
      return Bad(Key(ip, "app"), absl::StrCat("app ", app, " must name no models: its queries "
                                              "are the pipeline's"));
    }
    MAITRE_RETURN_IF_ERROR(ParseStages(n["stages"], Key(ip, "stages"), setup, p));
    if (Present(n["plan"])) MAITRE_RETURN_IF_ERROR(ApplyPlan(n, ip, base_dir, setup, p));
    // Each stage's own app: the pipeline's objective, its model, and the
    // planned variant alone when the plan names one.
    for (SimPipelineStage& stage : p.stages) {
      SimApp stage_app;
      stage_app.name = absl::StrCat(p.name, "/", stage.vertex);
      if (AppIndex(setup, stage_app.name) >= 0) {
        return Bad(Key(ip, "stages"), absl::StrCat("an app is already named ", stage_app.name));
      }
      stage_app.latency = setup.apps[p.app].latency;
      stage_app.models = {stage.model};
      if (!stage.variant.empty()) stage_app.variants = {stage.model + ":" + stage.variant};
      stage.app = static_cast<int32_t>(setup.apps.size());
      setup.apps.push_back(std::move(stage_app));
    }
    setup.pipelines.push_back(std::move(p));
  }
  return absl::OkStatus();
}

}  // namespace maitre::sim::experiment_yaml
