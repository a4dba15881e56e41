// Pipelines in the simulator's data path (SimPipeline in sim/simulator.h):
// a pipeline query runs its stages in order, each through selection,
// branches by the drawn probabilities, fails once when a stage fails, and a
// planned pipeline is tuned and provisioned by the pipeline allocator the
// controller runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "absl/strings/match.h"
#include "core/arrivals.h"
#include "core/file_util.h"
#include "core/rng.h"
#include "pipeline/tuner.h"
#include "policy/testing/test_profiles.h"
#include "sim/experiment.h"
#include "sim/simulator.h"

namespace maitre::sim {
namespace {

using policy::testing::LinearProfile;

constexpr int32_t kCascade = 0, kFastStage = 1, kSlowStage = 2;

// A cascade "fast" (p50 = 2 + b ms) -> "slow" (p50 = 10 + 5b ms), taken
// with `branch`, on one-core workers, one instance of each stage loaded.
SimulationSetup Cascade(double branch, Nanos slo = 200 * kMillisecond) {
  SimulationSetup s;
  SimWorkerType cpu;
  cpu.type = {"cpu", 1, 4096, 0.036};
  cpu.count = 2;
  cpu.launch_delay = 5 * kSecond;
  cpu.max_workers = 8;
  s.worker_types.push_back(cpu);
  s.variants.push_back({{"fast", "v"}, 0, 0.7, LinearProfile(2, 1)});
  s.variants.push_back({{"slow", "v"}, 0, 0.9, LinearProfile(10, 5)});
  s.apps.push_back({"cascade", slo, 0});
  s.apps.push_back({"fast-stage", slo, 0});
  s.apps.back().models = {"fast"};
  s.apps.push_back({"slow-stage", slo, 0});
  s.apps.back().models = {"slow"};
  s.instances = {{kFastStage, 0}, {kSlowStage, 1}};
  SimPipeline p;
  p.name = "cascade";
  p.app = kCascade;
  p.stages.push_back({"fast", kFastStage, "fast", {}, 0, "v", 1});
  p.stages.push_back({"slow", kSlowStage, "slow", {{0, branch}}, 0, "v", 1});
  s.pipelines.push_back(p);
  s.routing = "selection";
  s.batching.policy = "timeout";
  s.batching.max_queue_delay = 0;
  s.batching.max_batch = 8;
  s.seed = 3;
  return s;
}

std::unique_ptr<ArrivalSource> Poisson(double qps, Nanos duration, uint64_t seed = 1) {
  GeneratorSpec g;
  g.kind = GeneratorKind::kPoisson;
  g.rate_qps = qps;
  g.duration = duration;
  g.seed = seed;
  return *CreateGenerator(g);
}

TEST(PipelineServingTest, AChainAnswersEachQueryAfterBothStagesAndCountsOnlyThePipeline) {
  SimulationSetup s = Cascade(1);
  s.horizon = 20 * kSecond;
  auto sim = Simulator::Create(s, Poisson(20, s.horizon));
  ASSERT_TRUE(sim.ok()) << sim.status();
  ASSERT_TRUE((*sim)->Run().ok());
  const SimMetrics& m = (*sim)->metrics();
  const Counters& cascade = m.per_app[kCascade];
  EXPECT_GT(cascade.arrived, 300);
  EXPECT_EQ(cascade.on_time, cascade.arrived);
  // The stages are parts of the pipeline's queries, not queries of their own.
  EXPECT_EQ(m.per_app[kFastStage].resolved(), 0);
  EXPECT_EQ(m.per_app[kSlowStage].resolved(), 0);
  EXPECT_EQ(m.total.completed, cascade.completed);
  // No faster than both stages one after the other: 3 ms + 15 ms.
  EXPECT_GE(ToMillis(m.latency_per_app[kCascade].Percentile(1)), 18 * 0.98);
  // The answer is the last stage's variant's.
  EXPECT_NEAR(cascade.accuracy_sum / cascade.completed, 0.9, 1e-9);
}

TEST(PipelineServingTest, ACascadeSendsItsBranchShareToTheSlowStage) {
  SimulationSetup s = Cascade(0.3);
  s.horizon = 60 * kSecond;
  auto sim = Simulator::Create(s, Poisson(40, s.horizon));
  ASSERT_TRUE(sim.ok()) << sim.status();
  ASSERT_TRUE((*sim)->Run().ok());
  const LatencyHistogram& latency = (*sim)->metrics().latency_per_app[kCascade];
  ASSERT_GT(latency.count(), 2000);
  // About 70% take the fast stage alone (3-4 ms); the rest take 18 ms or more.
  EXPECT_LT(ToMillis(latency.Percentile(66)), 10);
  EXPECT_GT(ToMillis(latency.Percentile(74)), 17);
  const double accuracy = (*sim)->metrics().per_app[kCascade].accuracy_sum / latency.count();
  EXPECT_NEAR(accuracy, 0.7 * 0.7 + 0.3 * 0.9, 0.015);
}

TEST(PipelineServingTest, AFailingStageFailsItsPipelineQueryOnce) {
  {  // No instance of the slow stage and no room for one: rejected.
    SimulationSetup s = Cascade(1);
    s.instances = {{kFastStage, 0}};
    s.worker_types[0].count = 1;
    s.control.selection_loads = false;
    s.horizon = 10 * kSecond;
    auto sim = Simulator::Create(s, Poisson(20, s.horizon));
    ASSERT_TRUE(sim.ok()) << sim.status();
    ASSERT_TRUE((*sim)->Run().ok());
    const SimMetrics& m = (*sim)->metrics();
    EXPECT_GT(m.per_app[kCascade].arrived, 100);
    EXPECT_EQ(m.per_app[kCascade].rejected, m.per_app[kCascade].arrived);
    EXPECT_EQ(m.total.rejected, m.total.arrived);
  }
  {  // A 12 ms objective the slow stage (15 ms) cannot meet: each query is
     // dropped or late, once.
    SimulationSetup s = Cascade(1, 12 * kMillisecond);
    s.control.selection_loads = false;
    s.horizon = 10 * kSecond;
    auto sim = Simulator::Create(s, Poisson(20, s.horizon));
    ASSERT_TRUE(sim.ok()) << sim.status();
    ASSERT_TRUE((*sim)->Run().ok());
    const Counters& c = (*sim)->metrics().per_app[kCascade];
    EXPECT_GT(c.arrived, 100);
    EXPECT_EQ(c.resolved(), c.arrived);
    EXPECT_EQ(c.on_time, 0);
    EXPECT_EQ((*sim)->metrics().total.resolved(), c.arrived);
  }
}

TEST(PipelineServingTest, ABadPipelineIsRefusedNamingWhatIsWrong) {
  struct Case {
    std::function<void(SimulationSetup&)> spoil;
    std::string says;
  };
  for (const Case& c : std::vector<Case>{
           {[](SimulationSetup& s) { s.routing = "least-queued"; }, "need routing: selection"},
           {[](SimulationSetup& s) { s.pipelines[0].stages[1].in = {{1, 1}}; },
            "stage slow takes rows from a stage not before it"},
           {[](SimulationSetup& s) { s.pipelines[0].stages[1].in = {{0, 1.5}}; },
            "outside [0, 1]"},
           {[](SimulationSetup& s) { s.pipelines[0].stages[1].model = "fast"; },
            "app slow-stage does not name model fast"},
           {[](SimulationSetup& s) { s.apps[kCascade].models = {"fast"}; },
            "must name no models"},
           {[](SimulationSetup& s) { s.pipelines[0].stages[0].variant = "gpu"; },
            "no variant of fast on cpu"},
           {[](SimulationSetup& s) { s.pipelines[0].plan = pipeline::TunerPlan{}; },
            "its plan has 0 stages, not 2"},
       }) {
    SimulationSetup s = Cascade(1);
    s.horizon = kSecond;
    c.spoil(s);
    auto sim = Simulator::Create(s, Poisson(10, s.horizon));
    ASSERT_FALSE(sim.ok()) << c.says;
    EXPECT_TRUE(absl::StrContains(sim.status().message(), c.says)) << sim.status();
  }
}

// The cascade planned at 50 qps, one replica a stage, then served 150 qps:
// the tuner (through the pipeline allocator, as in the controller) asks for
// more slow replicas, workers come up for them and they serve.
TEST(PipelineServingTest, APlannedPipelineIsTunedAndProvisionedThroughTheAllocator) {
  pipeline::PlanningProblem problem{{{"cpu", 0.036}}, {}};
  problem.stages.push_back({"fast", {}, {{0, LinearProfile(2, 1)}}});
  problem.stages.push_back({"slow", {{0, 1}}, {{0, LinearProfile(10, 5)}}});
  const pipeline::PipelineConfig config = {{0, 1, 1}, {0, 1, 1}};
  std::vector<Nanos> planning;
  Rng rng(9);
  for (double t = rng.Exponential(1.0 / 50); t < 60; t += rng.Exponential(1.0 / 50)) {
    planning.push_back(FromSeconds(t));
  }
  auto plan = pipeline::MakeTunerPlan(problem, config, planning);
  ASSERT_TRUE(plan.ok()) << plan.status();

  auto run = [&](bool planned) {
    SimulationSetup s = Cascade(1);
    if (planned) s.pipelines[0].plan = *plan;
    s.control.cluster_autoscaling = true;
    s.horizon = 80 * kSecond;
    GeneratorSpec g;
    g.kind = GeneratorKind::kPiecewise;
    g.schedule = {{0, 50}, {20 * kSecond, 150}};
    g.duration = s.horizon;
    g.seed = 4;
    auto sim = Simulator::Create(s, *CreateGenerator(g));
    EXPECT_TRUE(sim.ok()) << sim.status();
    EXPECT_TRUE((*sim)->Run().ok());
    return *std::move(sim);
  };
  auto tuned = run(true);
  auto count = [&](const Simulator& sim, const std::string& what) {
    return std::count_if(sim.control_log().begin(), sim.control_log().end(),
                         [&](const std::string& l) { return absl::StrContains(l, what); });
  };
  std::string log;
  for (const std::string& l : tuned->control_log()) log += l + "\n";
  EXPECT_GE(count(*tuned, "pipeline-up"), 1) << log;
  EXPECT_GE(count(*tuned, "pipeline-add-worker"), 1) << log;
  int slow_ready = 0;
  for (const Simulator::InstanceInfo& i : tuned->Instances()) {
    if (i.alive && i.app == kSlowStage) slow_ready += i.ready;
  }
  // 150 qps at 66 qps a replica (15 ms at batch 1) needs at least three.
  EXPECT_GE(slow_ready, 3) << log;

  // Without a plan nothing provisions it: the one slow replica falls behind.
  auto unplanned = run(false);
  EXPECT_EQ(count(*unplanned, "pipeline-"), 0);
  const Counters& with = tuned->metrics().per_app[kCascade];
  const Counters& without = unplanned->metrics().per_app[kCascade];
  EXPECT_GT(static_cast<double>(with.on_time) / with.arrived,
            static_cast<double>(without.on_time) / without.arrived + 0.05)
      << log;
}

// The cascade as an experiment file: two profiled models, an app for the
// pipeline's queries, the pipeline with its plan in a file beside it.
constexpr char kExperiment[] = R"(
cluster:
  worker_types:
    - {name: cpu, cores: 1, memory_mb: 4096, price_per_hour: 0.036, launch_s: 5, max_workers: 8}
  workers: {cpu: 2}
profiles:
  - {model: fast, variant: v, worker_type: cpu, accuracy: 0.7, points: [[1, 3, 3.3], [8, 10, 11]]}
  - {model: slow, variant: v, worker_type: cpu, accuracy: 0.9, points: [[1, 15, 16.5], [8, 50, 55]]}
apps:
  - {name: cascade, latency_ms: 200}
trace:
  generator: piecewise
  schedule: [{at_s: 0, rate_qps: 50}, {at_s: 30, rate_qps: 150}]
  duration_s: 90
  seed: 2
policies:
  batching: {name: timeout, max_batch: 8, max_queue_delay_ms: 0}
  routing: selection
  model_autoscaler: off
  cluster_autoscaler: on
pipelines:
  - name: cascade
    app: cascade
    stages:
      - {vertex: fast, model: fast}
      - {vertex: slow, model: slow, from: [{vertex: fast, probability: 1}]}
    PLAN
)";

// Planned at 50 qps: one replica a stage, the slow one at batch 1.
constexpr char kPlan[] = R"({
  "plan": {"stages": [
    {"stage": "slow", "variant": "v", "hardware": "cpu", "batch": 1, "replicas": 1},
    {"stage": "fast", "variant": "v", "hardware": "cpu", "batch": 4, "replicas": 1}]},
  "tuner": {"windows_s": [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 51.2, 60],
            "planned_rates_qps": [100, 90, 80, 70, 65, 60, 57, 55, 53, 52, 51],
            "stages": [{"stage": "slow", "mu_qps": 66, "scale_factor": 1, "rho": 0.77},
                       {"stage": "fast", "mu_qps": 570, "scale_factor": 1, "rho": 0.09}]}})";

absl::StatusOr<std::unique_ptr<Simulator>> FromYaml(const std::string& plan_line) {
  const std::string dir = ::testing::TempDir() + "/maitre_pipeline_serving_test";
  EXPECT_TRUE(MakeDirectories(dir).ok());
  EXPECT_TRUE(WriteFileAtomically(dir + "/plan.json", kPlan).ok());
  std::string yaml = kExperiment;
  yaml.replace(yaml.find("PLAN"), 4, plan_line);
  EXPECT_TRUE(WriteFileAtomically(dir + "/exp.yaml", yaml).ok());
  auto e = LoadExperimentFile(dir + "/exp.yaml");
  if (!e.ok()) return e.status();
  auto sim = BuildSimulator(*e);
  if (!sim.ok()) return sim.status();
  if (absl::Status run = (*sim)->Run(); !run.ok()) return run;
  return sim;
}

TEST(PipelineServingTest, AnExperimentFileServesItsPipelineAndTheAllocatorProvisionsItsPlan) {
  auto sim = FromYaml("plan: plan.json");
  ASSERT_TRUE(sim.ok()) << sim.status();
  const Simulator& s = **sim;
  // The pipeline's app, then an app per stage.
  ASSERT_EQ(s.setup().apps.size(), 3u);
  EXPECT_EQ(s.setup().apps[2].name, "cascade/slow");
  // The plan's stages, reordered to the pipeline's; its batch caps the stage.
  EXPECT_EQ(s.setup().pipelines[0].stages[1].batch, 1);
  EXPECT_EQ(s.setup().pipelines[0].plan->stages[1].name, "slow");
  std::string log;
  for (const std::string& l : s.control_log()) log += l + "\n";
  // Nothing is loaded at the start: the allocator loads the plan's replicas
  // (selection loads the first stage for the first query), then the tuner
  // scales the stages up with the rate.
  EXPECT_TRUE(absl::StrContains(log, "pipeline-load cpu-1 slow:v x1")) << log;
  EXPECT_TRUE(absl::StrContains(log, "pipeline-up")) << log;
  const Counters& c = s.metrics().per_app[0];
  EXPECT_GT(c.arrived, 8000);
  EXPECT_GT(static_cast<double>(c.on_time) / c.arrived, 0.85) << log;
}

TEST(PipelineServingTest, ABadPipelineInAnExperimentFileIsRefusedNamingTheKey) {
  struct Case {
    std::string plan_line, says;
  };
  for (const Case& c : std::vector<Case>{
           {"plan: missing.json", "pipelines[0].plan: "},
           {"plan: exp.yaml", "pipelines[0].plan: "},
           {"colour: red", "pipelines[0].colour: unknown key"},
       }) {
    auto sim = FromYaml(c.plan_line);
    ASSERT_FALSE(sim.ok()) << c.plan_line;
    EXPECT_TRUE(absl::StrContains(sim.status().message(), c.says)) << sim.status();
  }
}

}  // namespace
}  // namespace maitre::sim
