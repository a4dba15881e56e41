// The coarse-grained baselines of InferLine §6 (docs/pipelines.md,
// "Baselines"): the pipeline profiled as one black box and replicated as a
// unit, as a serving system without pipeline support would provision it.
//
//  - Every stage runs on its fastest hardware at one shared batch size: the
//    largest power of two up to `max_batch` whose service time (the longest
//    path at that batch) is at most half the objective. Half, as we read
//    §6's single largest batch size that meets the objective: a query can
//    wait for the batch in progress and then ride a full one (the rule
//    Profile::SaturationQps applies to one model, after Nexus).
//  - A unit (one replica of every stage) serves the least of its stages'
//    throughputs at that batch, each divided by the stage's scale factor.
//  - Units = ceil(rate / unit throughput), for the trace's mean rate
//    (CG-Mean) or its peak over a sliding window as wide as the objective
//    (CG-Peak).
//
// Thread-safety: pure functions.
#pragma once

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/time.h"
#include "pipeline/planner.h"

namespace maitre::pipeline {

enum class CoarseGrainedRate { kMean, kPeak };
const char* CoarseGrainedName(CoarseGrainedRate rate);  // "CG-Mean" | "CG-Peak"

// One unit as the baseline sizes it: the shared batch, one unit's
// throughput and its service time (the longest path at that batch), with
// every stage on its fastest hardware (config, one replica each).
struct CoarseGrainedUnit {
  PipelineConfig config;
  int32_t batch = 0;
  double qps = 0;
  double service_ms = 0;
  // Queries one unit holds and still answers within `slo_ms`: what it
  // serves in the time the objective leaves after one batch's service
  // (AutoScale's packing factor, for the coarse-grained tuning).
  double PackingFactor(double slo_ms) const { return qps * (slo_ms - service_ms) / 1000; }
};
// FailedPrecondition when even batch 1 does not fit half the objective.
absl::StatusOr<CoarseGrainedUnit> SizeCoarseGrainedUnit(const PlanningProblem& problem,
                                                         const PlannerOptions& options,
                                                         const LatencyOracle& oracle,
                                                         CoarseGrainedRate rate);

// The rate CG provisions for, in queries per second.
double CoarseGrainedRateQps(CoarseGrainedRate rate, absl::Span<const Nanos> arrivals,
                            double slo_ms);

// The configuration and its estimated P99 (by `oracle`, which may report a
// P99 above the objective: the baseline does not check). FailedPrecondition
// when even batch 1 does not fit half the objective.
absl::StatusOr<Plan> PlanCoarseGrained(const PlanningProblem& problem,
                                       absl::Span<const Nanos> arrivals,
                                       const PlannerOptions& options, CoarseGrainedRate rate,
                                       const LatencyOracle& oracle);

}  // namespace maitre::pipeline
