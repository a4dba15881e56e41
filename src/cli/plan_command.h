// `maitre plan` (docs/api.md, "Command line"; docs/pipelines.md, "maitre
// plan"): plans a pipeline offline from its spec, the models' registration
// meta, their profiles, a sample trace and a P99 objective, with InferLine's
// planner and estimator, and prints each stage's hardware, batch and
// replicas, the cost and the estimated P99; optionally beside the CG-Mean
// and CG-Peak baselines, and with a brute-force check that no single action
// lowers the plan's cost. With --apply, it then asks a running server to
// provision the plan and tune it (PUT /v2/apps/{app}/pipelines/{p}/plan).
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/status/statusor.h"

namespace maitre::cli {

inline constexpr double kDefaultStageOverheadMs = 0.62;

struct PlanArgs {
  std::string pipeline;  // the spec (JSON file); with `from`, the pipeline's name
  std::string models;    // {"model": registration meta, ...} (JSON file)
  std::string profiles;  // profile CSV: one variant per model
  // A running server's URL to read the spec, the models, their profiles
  // and the measured branch probabilities from, instead of files
  // (cli/plan_inputs.h); needs `app`.
  std::string from;
  std::vector<std::string> variants;  // with `from`: "model=variant" to plan with
  std::string trace;     // trace CSV (arrival_ms; other columns ignored)
  double slo_ms = 0;
  std::string worker_types;           // "name:cores:memory_mb:price,..."; empty: the default
  std::vector<std::string> branches;  // "from->to=probability"
  int max_batch = 64;
  int max_replicas = 64;
  // The serving path around each stage's batch (sim/pipeline_estimator.h);
  // the default is what the real run measured (docs/pipelines.md, "The
  // estimator").
  double stage_overhead_ms = kDefaultStageOverheadMs;
  // Whether --stage-overhead-ms was given: without it, --from plans with
  // the figure the server measured, when it has one.
  bool stage_overhead_given = false;
  bool baselines = false;
  bool check = false;
  bool json = false;
  // A running server's URL: the plan is sent there for the pipeline the
  // spec names, of `app`.
  std::string apply;
  std::string app;  // the pipeline's app, for `from` and `apply`
};

// The report `maitre plan` prints (a table, or JSON with args.json).
absl::StatusOr<std::string> RunPlan(const PlanArgs& args);

void AddPlanCommand(CLI::App& app, int* exit_code);

}  // namespace maitre::cli
