// A plan as a running server is asked to provision it (docs/api.md,
// "Pipelines", PUT .../plan; docs/pipelines.md, "Applying a plan"): the
// JSON `maitre plan --json` prints, read back. Per stage (a vertex of the
// pipeline): the worker type it runs on, its batch and replicas; and what
// the tuner starts from (InferLine §5, "Initialization": each stage's µ,
// scale factor and ρ, the envelope's windows and the planning trace's
// rates).
//
// The JSON (extra keys, such as the plan's cost, steps or baselines, are
// ignored):
//   {"plan": {"stages": [{"stage": "fast", "variant": "torch", "hardware": "cpu-1",
//                         "batch": 4, "replicas": 1}, ...]},
//    "tuner": {"windows_s": [0.05, ...], "planned_rates_qps": [120, ...],
//              "planned_count_deviations": [1.2, ...],   (optional)
//              "stages": [{"stage": "fast", "mu_qps": 400, "scale_factor": 1,
//                          "rho": 0.3}, ...]}}
//
// Thread-safety: value types and pure functions.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "pipeline/spec.h"
#include "pipeline/tuner.h"

namespace maitre::pipeline {

struct AppliedStage {
  std::string vertex;
  std::string model;     // the vertex's, filled in by CheckAppliedPlan
  // The variant the stage was planned on (optional in the JSON): its
  // queries go to it and only it is loaded for the stage. Empty: the
  // model's first variant profiled on `hardware`, and selection routes.
  std::string variant;
  std::string hardware;  // a worker type
  int32_t batch = 1;
};

struct AppliedPlan {
  std::vector<AppliedStage> stages;
  // The same stages in the same order; its replicas are the plan's.
  TunerPlan tuner;
};

// InvalidArgument naming the field at fault for a body that is not the
// shape above, or whose numbers the tuner cannot start from (replicas and
// batch below one, µ or ρ not positive, a scale factor outside [0,1], no
// windows, not one rate per window, or deviations given but not one per
// window or negative).
absl::StatusOr<AppliedPlan> ParseAppliedPlanJson(absl::string_view json);

// Against the pipeline it is applied to and the server's worker types:
// every vertex exactly once, no stage naming another, every hardware a
// known type. Fills in each stage's model. InvalidArgument naming the stage.
absl::Status CheckAppliedPlan(AppliedPlan& plan, const ValidatedPipeline& pipeline,
                              const std::vector<std::string>& worker_types);

}  // namespace maitre::pipeline
