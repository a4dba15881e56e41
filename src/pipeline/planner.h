// InferLine's Planner (Crankshaw et al., SoCC '20, §4.3, Algorithms 1 and 2;
// docs/pipelines.md, "The planner"): the cheapest configuration it can find
// (per stage: hardware, maximum batch, replicas) whose estimated P99 latency
// over the sample trace meets the objective.
//
//  - Initialize (Algorithm 1): every stage at batch 1 on its lowest-latency
//    hardware with one replica. If the service time (the longest path's
//    batch-1 latencies) exceeds the objective, nothing can meet it; otherwise
//    the stage with the least throughput for its share of the traffic
//    (replicas · µ(batch) / s_m) gets a replica until the estimate is
//    feasible.
//  - MinimizeCost (Algorithm 2): from there, every round tries every action
//    on every stage: IncreaseBatch (doubles the batch), RemoveReplica, and
//    DowngradeHardware (the next cheaper hardware, with the stage re-planned
//    locally while the others stay frozen), keeps the feasible result of
//    least cost, and stops when no action is feasible. Among results of
//    equal cost (IncreaseBatch never changes it) the one with the lower
//    estimated P99 wins, our tie-break: it keeps the most slack for the
//    moves that save money, where taking the first stage's larger batch
//    spent the objective on a stage that did not need it.
//
// DowngradeHardware's local re-plan, as we read §4.3: on the cheaper
// hardware, for each batch 1, 2, 4, ... up to the limit, the fewest replicas
// that are feasible, searched upward from one and only while the stage
// would cost less than it does now; the cheapest of these wins (the smaller
// batch on a tie). Searching every batch makes the re-plan exact, so the
// second guarantee holds for all three actions and a brute force can check
// it.
//
// The guarantees at termination (§4.3): (1) if some configuration meets the
// objective, Initialize finds one (with enough replicas every query runs at
// batch 1 on the fastest hardware without waiting, taking at most the
// service time; `max_replicas` bounds the search); (2) no single action
// lowers the cost without breaking the objective: the loop ends only when
// no action is feasible at all.
//
// The planner is pure: its only view of latency is the oracle (the
// estimator, sim/pipeline_estimator.h, in `maitre plan`; fakes in tests).
//
// Thread-safety: not synchronised; one caller.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "pipeline/problem.h"

namespace maitre::pipeline {

// The estimated P99 latency of a configuration, in ms.
using LatencyOracle = std::function<absl::StatusOr<double>(const PipelineConfig&)>;

struct PlannerOptions {
  double slo_ms = 0;
  int32_t max_batch = 64;     // IncreaseBatch doubles up to this
  int32_t max_replicas = 64;  // per stage
};

struct Plan {
  PipelineConfig config;
  double cost_per_hour = 0;
  double p99_ms = 0;
  // One line per step taken, for logs and `maitre plan --verbose`.
  std::vector<std::string> steps;
  int64_t estimates = 0;  // distinct configurations the oracle was asked about
};

enum class PlanAction { kIncreaseBatch, kRemoveReplica, kDowngradeHardware };
const char* PlanActionName(PlanAction a);

class Planner {
 public:
  Planner(const PlanningProblem& problem, LatencyOracle oracle, const PlannerOptions& options);

  // Algorithm 1. FailedPrecondition when the service time exceeds the
  // objective (no configuration can meet it); ResourceExhausted when a stage
  // would need more than max_replicas.
  absl::StatusOr<Plan> Initialize();
  // Algorithm 2 (Initialize first).
  absl::StatusOr<Plan> MinimizeCost();

  // Whether a configuration meets the objective by the oracle (memoised).
  absl::StatusOr<bool> Feasible(const PipelineConfig& config);
  absl::StatusOr<double> P99Ms(const PipelineConfig& config);

  // The stage's option on the next cheaper hardware than `option`'s, or -1.
  int32_t NextCheaperOption(int32_t stage, int32_t option) const;
  // The lowest-latency option at batch 1 (the cheaper on a tie).
  int32_t FastestOption(int32_t stage) const;

  // Every configuration one action away from `config` that costs less: one
  // replica fewer on a stage, or a stage on its next cheaper hardware at any
  // batch (1, 2, 4, ... max_batch) and replica count. Guarantee (2) says none
  // of them is feasible once MinimizeCost is done; a brute force checks it.
  std::vector<PipelineConfig> CheaperSingleActions(const PipelineConfig& config) const;

  // One action on one stage, already checked feasible; nullopt when it does
  // not apply or no feasible result exists (for DowngradeHardware: none that
  // costs less).
  absl::StatusOr<std::optional<PipelineConfig>> Apply(PlanAction action, int32_t stage,
                                                      const PipelineConfig& config);

 private:
  absl::StatusOr<std::optional<PipelineConfig>> Downgrade(int32_t stage,
                                                          const PipelineConfig& config);
  double Price(int32_t stage, int32_t option) const;
  absl::StatusOr<Plan> Finish(PipelineConfig config, std::vector<std::string> steps);

  const PlanningProblem& problem_;
  LatencyOracle oracle_;
  PlannerOptions options_;
  std::map<std::vector<int32_t>, double> memo_;
};

}  // namespace maitre::pipeline
