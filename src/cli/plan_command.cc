#include "cli/plan_command.h"

#include <iostream>
#include <map>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/api_client.h"
#include "cli/plan_inputs.h"
#include "core/arrivals.h"
#include "core/file_util.h"
#include "core/status_macros.h"
#include "core/text_table.h"
#include "core/worker_type.h"
#include "pipeline/coarse_grained.h"
#include "pipeline/planner.h"
#include "pipeline/tuner.h"
#include "sim/pipeline_estimator.h"

namespace maitre::cli {
namespace {

using nlohmann::json;
using pipeline::Plan;
using pipeline::PlanningProblem;

// --branch flags over `out` (measured ones, from a server): a flag wins.
absl::Status ParseBranches(const std::vector<std::string>& branches,
                           std::map<std::string, double>& out) {
  for (const std::string& b : branches) {
    const size_t eq = b.rfind('=');
    double p = 0;
    if (eq == std::string::npos || b.find("->") == std::string::npos ||
        !absl::SimpleAtod(b.substr(eq + 1), &p) || !(p >= 0 && p <= 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--branch \"", b, "\": expected from->to=probability in [0,1]"));
    }
    out[b.substr(0, eq)] = p;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::map<std::string, std::string>> ParseVariants(
    const std::vector<std::string>& variants) {
  std::map<std::string, std::string> out;
  for (const std::string& v : variants) {
    const size_t eq = v.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == v.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--variant \"", v, "\": expected model=variant"));
    }
    out[v.substr(0, eq)] = v.substr(eq + 1);
  }
  return out;
}

// The inputs from a server (--from) or from files.
absl::StatusOr<PlanInputs> ReadInputs(const PlanArgs& args) {
  if (args.from.empty()) {
    if (args.models.empty() || args.profiles.empty()) {
      return absl::InvalidArgumentError(
          "--models and --profiles are needed, unless --from names a server to read them from");
    }
    if (!args.variants.empty()) {
      return absl::InvalidArgumentError(
          "--variant goes with --from: a profile CSV names one variant per model");
    }
    return PlanInputsFromFiles(args.pipeline, args.models, args.profiles);
  }
  if (args.app.empty()) {
    return absl::InvalidArgumentError("--from needs --app, the app the pipeline belongs to");
  }
  if (!args.models.empty() || !args.profiles.empty()) {
    return absl::InvalidArgumentError(
        "--from reads the models and their profiles from the server; drop --models and "
        "--profiles");
  }
  MAITRE_ASSIGN_OR_RETURN(auto variants, ParseVariants(args.variants));
  return PlanInputsFromServer(args.from, args.app, args.pipeline, variants);
}

json PlanJson(const PlanningProblem& problem, const Plan& plan, const std::vector<double>& scale,
              const std::vector<std::string>& variants) {
  json stages = json::array();
  for (size_t i = 0; i < plan.config.size(); ++i) {
    const pipeline::StageOption& o = problem.stages[i].options[plan.config[i].option];
    stages.push_back({{"stage", problem.stages[i].name},
                      {"variant", variants[i]},
                      {"hardware", problem.hardware[o.hardware].name},
                      {"batch", plan.config[i].batch},
                      {"replicas", plan.config[i].replicas},
                      {"scale_factor", scale[i]}});
  }
  return {{"stages", stages}, {"cost_per_hour", plan.cost_per_hour},
          {"estimated_p99_ms", plan.p99_ms}, {"configurations_estimated", plan.estimates}};
}

std::string PlanTable(const PlanningProblem& problem, const Plan& plan,
                      const std::vector<double>& scale) {
  Table table({"STAGE", "HARDWARE", "BATCH", "REPLICAS", "SCALE", "$/H"});
  for (size_t i = 0; i < plan.config.size(); ++i) {
    const pipeline::StageOption& o = problem.stages[i].options[plan.config[i].option];
    const pipeline::Hardware& h = problem.hardware[o.hardware];
    table.Add({problem.stages[i].name, h.name, absl::StrCat(plan.config[i].batch),
               absl::StrCat(plan.config[i].replicas), absl::StrFormat("%.3f", scale[i]),
               absl::StrFormat("%.4f", plan.config[i].replicas * h.price_per_hour)});
  }
  return table.Render();
}

// Asks the server at `url` to provision `plan` (the --json report) for
// pipeline `name` of `app`; says what it answered.
absl::StatusOr<std::string> Apply(const std::string& url, const std::string& app,
                                  const std::string& name, const json& plan) {
  MAITRE_ASSIGN_OR_RETURN(ApiClient api, ApiClient::Connect(url));
  MAITRE_ASSIGN_OR_RETURN(http::Response put,
                          api.Send("PUT", absl::StrCat("/v2/apps/", app, "/pipelines/", name,
                                                       "/plan"),
                                   plan.dump(), "application/json"));
  json body = json::parse(put.body, nullptr, /*allow_exceptions=*/false);
  if (put.status != 200) {
    const std::string error = body.is_object() ? body.value("error", put.body) : put.body;
    return absl::FailedPreconditionError(
        absl::StrCat("the server refused the plan: HTTP ", put.status, ": ", error));
  }
  return absl::StrCat("applied to ", url, ": pipeline ", name, " of app ", app,
                      " is provisioned and tuned from this plan\n");
}

}  // namespace

absl::StatusOr<std::string> RunPlan(const PlanArgs& args) {
  if (!(args.slo_ms > 0)) return absl::InvalidArgumentError("--slo-ms must be positive");
  if (!args.apply.empty() && args.app.empty()) {
    return absl::InvalidArgumentError("--apply needs --app, the app the pipeline belongs to");
  }
  if (!(args.stage_overhead_ms >= 0)) {
    return absl::InvalidArgumentError("--stage-overhead-ms must not be negative");
  }
  MAITRE_ASSIGN_OR_RETURN(PlanInputs inputs, ReadInputs(args));
  MAITRE_ASSIGN_OR_RETURN(pipeline::PipelineSpec spec,
                          pipeline::ParsePipelineSpecJson(inputs.spec_json));
  MAITRE_ASSIGN_OR_RETURN(pipeline::ValidatedPipeline validated,
                          pipeline::ValidatePipeline(std::move(spec), inputs.models));
  std::map<std::string, double> branches = std::move(inputs.branches);
  MAITRE_RETURN_IF_ERROR(ParseBranches(args.branches, branches));
  // The flag wins; else what the server measured; else the flag's default.
  const bool overhead_measured = !args.stage_overhead_given && inputs.stage_overhead_ms.has_value();
  const double stage_overhead_ms =
      overhead_measured ? *inputs.stage_overhead_ms : args.stage_overhead_ms;
  WorkerTypeTable types = WorkerTypeTable::Default();
  if (!args.worker_types.empty()) {
    MAITRE_ASSIGN_OR_RETURN(types, WorkerTypeTable::Parse(args.worker_types));
  }
  std::vector<pipeline::Hardware> hardware;
  for (const WorkerType& t : types.types()) hardware.push_back({t.name, t.price_per_hour});
  MAITRE_ASSIGN_OR_RETURN(PlanningProblem problem,
                          pipeline::ProblemFromPipeline(validated, hardware, inputs.profiles,
                                                           branches));
  MAITRE_ASSIGN_OR_RETURN(std::string trace_text, ReadFileToString(args.trace));
  std::vector<std::string> apps;
  auto rows = ParseTraceCsvAnyApps(trace_text, &apps);
  if (!rows.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(args.trace, ": ", rows.status().message()));
  }
  std::vector<Nanos> arrivals;
  for (const Arrival& a : *rows) arrivals.push_back(a.time);
  if (arrivals.size() < 2 || arrivals.back() <= arrivals.front()) {
    return absl::InvalidArgumentError(
        absl::StrCat(args.trace, ": the trace needs arrivals spread over time"));
  }

  // The planner only asks "feasible?": its estimates stop once the P99 is
  // known to exceed the objective. The baselines' estimates run to the end.
  const pipeline::LatencyOracle oracle =
      sim::EstimatorOracle(problem, arrivals, args.slo_ms, stage_overhead_ms);
  const pipeline::LatencyOracle full =
      sim::EstimatorOracle(problem, arrivals, 0, stage_overhead_ms);
  pipeline::PlannerOptions options;
  options.slo_ms = args.slo_ms;
  options.max_batch = args.max_batch;
  options.max_replicas = args.max_replicas;
  pipeline::Planner planner(problem, oracle, options);
  MAITRE_ASSIGN_OR_RETURN(Plan plan, planner.MinimizeCost());
  const std::vector<double> scale = pipeline::ScaleFactors(problem);
  // The variant each stage was profiled as, in the problem's stage order.
  std::vector<std::string> variants;
  for (const pipeline::PlanningStage& st : problem.stages) {
    const pipeline::Vertex& v = validated.spec.vertices[validated.VertexIndex(st.name)];
    variants.push_back(inputs.variant_of[v.model]);
  }

  std::optional<int64_t> refuted;
  if (args.check) {
    refuted = 0;
    for (const pipeline::PipelineConfig& c : planner.CheaperSingleActions(plan.config)) {
      MAITRE_ASSIGN_OR_RETURN(bool feasible, planner.Feasible(c));
      if (feasible) {
        return absl::InternalError(absl::StrCat(
            "check failed: ", pipeline::DescribeConfig(problem, c),
            " costs less than the plan and meets the objective"));
      }
      ++*refuted;
    }
  }
  struct Baseline {
    const char* name;
    absl::StatusOr<Plan> plan;
  };
  std::vector<Baseline> baselines;
  if (args.baselines) {
    for (auto rate : {pipeline::CoarseGrainedRate::kMean, pipeline::CoarseGrainedRate::kPeak}) {
      baselines.push_back({pipeline::CoarseGrainedName(rate),
                           pipeline::PlanCoarseGrained(problem, arrivals, options, rate, full)});
    }
  }

  // What the tuner would start from (docs/pipelines.md, "The tuner").
  MAITRE_ASSIGN_OR_RETURN(pipeline::TunerPlan tuner,
                          pipeline::MakeTunerPlan(problem, plan.config, arrivals));
  const double seconds = ToSeconds(arrivals.back() - arrivals.front());
  std::string applied;
  if (args.json || !args.apply.empty()) {
    json tuner_json = {{"windows_s", json::array()},
                       {"planned_rates_qps", tuner.planned_rates},
                       {"planned_count_deviations", tuner.planned_deviations},
                       {"stages", json::array()}};
    for (Nanos w : tuner.windows) tuner_json["windows_s"].push_back(ToSeconds(w));
    for (const pipeline::TunerStage& t : tuner.stages) {
      tuner_json["stages"].push_back({{"stage", t.name}, {"mu_qps", t.mu_qps},
                                      {"scale_factor", t.scale}, {"rho", t.rho},
                                      {"replicas", t.replicas}});
    }
    json out = {{"pipeline", validated.spec.name},
                {"slo_ms", args.slo_ms},
                {"trace", {{"queries", arrivals.size()}, {"seconds", seconds}}},
                {"stage_overhead_ms", stage_overhead_ms},
                {"stage_overhead_measured", overhead_measured},
                {"branches", branches},
                {"plan", PlanJson(problem, plan, scale, variants)},
                {"steps", plan.steps},
                {"tuner", tuner_json}};
    if (refuted) out["check"] = {{"cheaper_single_actions_refuted", *refuted}};
    for (const Baseline& b : baselines) {
      out["baselines"][b.name] = b.plan.ok() ? PlanJson(problem, *b.plan, scale, variants)
                                             : json{{"error", b.plan.status().message()}};
    }
    if (args.apply.empty()) return out.dump(2) + "\n";
    if (validated.spec.name.empty()) {
      return absl::InvalidArgumentError("--apply needs the spec to name its pipeline (\"name\")");
    }
    MAITRE_ASSIGN_OR_RETURN(applied, Apply(args.apply, args.app, validated.spec.name, out));
    if (args.json) return out.dump(2) + "\n";
  }
  std::string text = absl::StrFormat(
      "pipeline %s: P99 objective %.1f ms; trace of %d queries over %.1f s (%.1f qps)\n\n",
      validated.spec.name.empty() ? "(unnamed)" : validated.spec.name, args.slo_ms,
      arrivals.size(), seconds, (arrivals.size() - 1) / seconds);
  if (!branches.empty()) {
    std::vector<std::string> shown;
    for (const auto& [edge, p] : branches) shown.push_back(absl::StrFormat("%s %.3f", edge, p));
    absl::StrAppend(&text, "branch probabilities: ", absl::StrJoin(shown, ", "), "\n");
  }
  absl::StrAppendFormat(&text, "stage overhead: %.3f ms%s\n\n", stage_overhead_ms,
                        overhead_measured
                            ? absl::StrCat(" (measured by the server over ",
                                           inputs.overhead_queries, " queries)")
                            : "");
  absl::StrAppend(&text, PlanTable(problem, plan, scale));
  absl::StrAppendFormat(&text, "\nInferLine: $%.4f/h, estimated P99 %.1f ms (%d configurations "
                        "estimated)\n", plan.cost_per_hour, plan.p99_ms, plan.estimates);
  if (refuted) {
    absl::StrAppendFormat(&text, "check: none of the %d cheaper single-action configurations "
                          "meets the objective\n", *refuted);
  }
  for (const Baseline& b : baselines) {
    if (!b.plan.ok()) {
      absl::StrAppendFormat(&text, "%s: %s\n", b.name, std::string(b.plan.status().message()));
      continue;
    }
    absl::StrAppendFormat(&text, "%s: $%.4f/h (%.2fx InferLine), estimated P99 %.1f ms%s; %s\n",
                          b.name, b.plan->cost_per_hour,
                          b.plan->cost_per_hour / plan.cost_per_hour, b.plan->p99_ms,
                          b.plan->p99_ms > args.slo_ms ? " (misses the objective)" : "",
                          pipeline::DescribeConfig(problem, b.plan->config));
  }
  return text + applied;
}

void AddPlanCommand(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<PlanArgs>();
  CLI::App* cmd = app.add_subcommand(
      "plan", "Plan a pipeline offline: hardware, batch and replicas per stage for a P99 "
              "objective on a sample trace (InferLine's planner)");
  cmd->add_option("--pipeline", args->pipeline,
                  "Pipeline spec (JSON file); with --from, the pipeline's name on the server")
      ->required();
  cmd->add_option("--models", args->models,
                  "JSON object of model name -> registration meta, for the spec's checks");
  cmd->add_option("--profiles", args->profiles, "Profile CSV (one variant per model)");
  cmd->add_option("--from", args->from,
                  "A running server's URL: read the spec, the models, their profiles and the "
                  "measured branch probabilities there (needs --app; replaces --models and "
                  "--profiles)");
  cmd->add_option("--variant", args->variants,
                  "With --from: model=variant to plan with (repeatable); else the variant the "
                  "applied plan names, or the model's only profiled one");
  cmd->add_option("--trace", args->trace, "Sample trace CSV (arrival_ms)")->required();
  cmd->add_option("--slo-ms", args->slo_ms, "End-to-end P99 latency objective")->required();
  cmd->add_option("--worker-types", args->worker_types,
                  "Hardware with prices, name:cores:memory_mb:price_per_hour[,...]");
  cmd->add_option("--branch", args->branches,
                  "Measured probability of a conditional edge, from->to=p (repeatable; over "
                  "what --from's server measured)");
  cmd->add_option("--max-batch", args->max_batch, "Largest batch IncreaseBatch may reach")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  cmd->add_option("--max-replicas", args->max_replicas, "Most replicas of one stage")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  CLI::Option* overhead =
      cmd->add_option("--stage-overhead-ms", args->stage_overhead_ms,
                      "The serving path around each stage's batch, added per stage a query "
                      "visits (with --from, the server's measured figure unless given)")
          ->capture_default_str();
  cmd->add_flag("--baselines", args->baselines, "Also plan CG-Mean and CG-Peak");
  cmd->add_flag("--check", args->check,
                "Confirm by brute force that no single action lowers the plan's cost");
  cmd->add_flag("--json", args->json, "Print JSON");
  cmd->add_option("--apply", args->apply,
                  "A running server's URL: provision the plan there and tune it (needs --app)");
  cmd->add_option("--app", args->app,
                  "With --from or --apply: the app the pipeline belongs to");
  cmd->callback([args, exit_code, overhead] {
    args->stage_overhead_given = overhead->count() > 0;
    absl::StatusOr<std::string> report = RunPlan(*args);
    if (!report.ok()) {
      std::cerr << "maitre: " << report.status().message() << "\n";
      *exit_code = 1;
      return;
    }
    std::cout << *report;
    *exit_code = 0;
  });
}

}  // namespace maitre::cli
