// The reference integer program for the model autoscaler's scale-up (INFaaS
// §4.2.1), solved exactly with CBC. It optimises the same cost model and the
// same constraints as ModelAutoscaler::PlanScaleUp, over every combination of
// replica counts instead of one move per model, so the heuristic's cost gap
// to it is meaningful. The formulation (variables, objective, constraints) is
// written out in docs/policies.md, "Reference ILP".
//
// It is a reference, not the serving path: a solve takes milliseconds where
// the heuristic takes microseconds (autoscaling_bench measures both).
//
// Thread-safety: SolveScaleUpIlp is a pure function (each call builds its own
// solver); safe to call from several threads.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "policy/autoscaling_model.h"

namespace maitre::policy {

struct ScaleUpIlpOptions {
  double time_limit_s = 30;
};

struct ScaleUpIlpResult {
  bool feasible = false;  // false: no replica counts fit the worker
  bool optimal = false;   // proven optimal (false when the time limit hit first)
  // Σ_v C_v·(δ_v + λ·T_load,v·max(δ_v, 0)) of the best solution, $/s.
  double objective_per_s = 0;
  // Final replica counts (ready + loading), [model][variant] in snapshot order.
  std::vector<std::vector<int>> replicas;
  int64_t nodes = 0;
};

// Fails only on a malformed snapshot or options (as ModelAutoscaler does).
absl::StatusOr<ScaleUpIlpResult> SolveScaleUpIlp(const ModelScalingSnapshot& snapshot,
                                                 const ModelAutoscalerOptions& options,
                                                 const ScaleUpIlpOptions& ilp = {});

// The objective of a set of moves, in the same terms: Σ of their cost_per_s.
// kNeedsPlacement moves are not local and count nothing.
double ScaleActionsCost(const std::vector<ModelScaleAction>& actions);

// Σ_v C_v·(replicas + loading): the running cost of the snapshot's setup.
double SetupCostPerSecond(const ModelScalingSnapshot& snapshot);

}  // namespace maitre::policy
