// InferLine's Estimator (Crankshaw et al., SoCC '20, §4.2; docs/pipelines.md,
// "The estimator"): the latency of every query of a sample arrival trace
// through a pipeline configuration, by discrete-event simulation.
//
// It is the simulator's data path, per stage: the same event queue
// (sim/event_queue.h), and one centralized queue per stage whose batches the
// real batching policy decides (policy::DecideForInstance, the rule the
// worker and the simulator apply) and run on the stage's first idle replica
// for the profile's p50 at the batch's size. What it adds is the routing a
// pipeline needs: a query enters the stages with no incoming edge on
// arrival, and a stage once every stage before it that the query visits has
// finished it; it leaves the pipeline when its last stage finishes.
//
// Which stages a query visits is drawn once per query and edge from the
// branch probabilities (the measured scale factors), from a stream keyed by
// the seed and the query's index alone, so every configuration the planner
// compares sees the same paths (common random numbers).
//
// Queues never drop: InferLine measures the tail of every query's latency,
// so every query is served and counted (deadlines are left infinite; the
// policy still decides batch by batch).
//
// Thread-safety: a pure function; callers may run several at once.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/time.h"
#include "pipeline/planner.h"
#include "pipeline/problem.h"
#include "policy/batching.h"

namespace maitre::sim {

// From `at` on, a stage runs `replicas` replicas (the tuner's decisions,
// replayed). Added replicas serve at once (the caller adds any activation
// delay to `at`); removed ones are idle ones first, and a busy one leaves
// when its batch ends.
struct ReplicaChange {
  Nanos at = 0;
  int32_t stage = 0;
  int32_t replicas = 1;
};

struct PipelineEstimatorOptions {
  // Each stage's policy; its max_batch is replaced by the stage's batch. The
  // default, a timeout of 0, is InferLine's work-conserving queue: an idle
  // replica takes up to a full batch of what is waiting (§3).
  policy::BatchingOptions batching = WorkConservingBatching();
  uint64_t seed = 1;
  std::vector<ReplicaChange> changes;
  // When > 0, the run stops as soon as the P99 is known to exceed this
  // (more than 1% of the queries finished later than it), and the estimate
  // says so (`stopped_above`) with an infinite P99: what a planner asking
  // "feasible?" needs, without simulating an overloaded queue to its end.
  double stop_above_p99_ms = 0;
  // The serving path around each stage's batch, which no profile sees: the
  // front-end, the dispatch and the worker round trip, per stage a query
  // visits (docs/pipelines.md, "The estimator"). A delay the same for every
  // query shifts each stage's arrivals alike, so it leaves the queues as
  // they are; the server runs stages on separate branches at once, so it
  // adds to a query's latency once per stage on its longest chain of
  // visited stages (exact for a chain; for branches of unequal batch times
  // the chain with the most stages is taken as the one that ends last).
  double stage_overhead_ms = 0;

  static policy::BatchingOptions WorkConservingBatching() {
    policy::BatchingOptions b;
    b.policy = "timeout";
    b.max_queue_delay = 0;
    return b;
  }
};

struct PipelineEstimate {
  std::vector<double> latency_ms;    // per query, in arrival order
  std::vector<double> scale_factor;  // per stage: the share of queries that visited it
  double p99_ms = 0;
  double mean_ms = 0;
  bool stopped_above = false;  // see stop_above_p99_ms; latency_ms is then partial
  // The nearest-rank percentile of latency_ms, p in (0, 1].
  double Percentile(double p) const;
};

// `arrivals` in non-decreasing order. Errors: an invalid problem or
// configuration, a policy that cannot be created, or one that breaks its
// contract.
absl::StatusOr<PipelineEstimate> EstimatePipeline(const pipeline::PlanningProblem& problem,
                                                  const pipeline::PipelineConfig& config,
                                                  absl::Span<const Nanos> arrivals,
                                                  const PipelineEstimatorOptions& options);

// The estimator as the planner's oracle over `arrivals` (kept by reference:
// they must outlive it). With `stop_above_p99_ms` > 0 an estimate above it
// ends early and reads as an infinite P99 (enough for "feasible?"; the
// planner's final plan is feasible, so its P99 is exact).
pipeline::LatencyOracle EstimatorOracle(const pipeline::PlanningProblem& problem,
                                        absl::Span<const Nanos> arrivals,
                                        double stop_above_p99_ms = 0,
                                        double stage_overhead_ms = 0);

}  // namespace maitre::sim
