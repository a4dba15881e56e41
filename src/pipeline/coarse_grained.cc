#include "pipeline/coarse_grained.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_format.h"
#include "pipeline/envelope.h"

namespace maitre::pipeline {

const char* CoarseGrainedName(CoarseGrainedRate rate) {
  return rate == CoarseGrainedRate::kMean ? "CG-Mean" : "CG-Peak";
}

double CoarseGrainedRateQps(CoarseGrainedRate rate, absl::Span<const Nanos> arrivals,
                            double slo_ms) {
  if (arrivals.size() < 2) return 0;
  if (rate == CoarseGrainedRate::kMean) {
    return (arrivals.size() - 1) / ToSeconds(arrivals.back() - arrivals.front());
  }
  const Nanos window = FromMillis(slo_ms);
  return TrafficEnvelope(arrivals, absl::MakeConstSpan(&window, 1)).front();
}

absl::StatusOr<CoarseGrainedUnit> SizeCoarseGrainedUnit(const PlanningProblem& problem,
                                                         const PlannerOptions& options,
                                                         const LatencyOracle& oracle,
                                                         CoarseGrainedRate rate) {
  if (auto s = CheckProblem(problem); !s.ok()) return s;
  if (!(options.slo_ms > 0) || options.max_batch < 1 || options.max_replicas < 1) {
    return absl::InvalidArgumentError("planning needs slo_ms > 0, max_batch and max_replicas >= 1");
  }
  // The fastest hardware per stage, as Algorithm 1 picks it.
  Planner fastest(problem, oracle, options);
  CoarseGrainedUnit unit;
  unit.config.resize(problem.stages.size());
  for (size_t i = 0; i < unit.config.size(); ++i) {
    unit.config[i] = {fastest.FastestOption(static_cast<int32_t>(i)), 1, 1};
  }
  for (int32_t b = 1; b <= options.max_batch; b *= 2) {
    for (StageConfig& c : unit.config) c.batch = b;
    const double service_ms = ServiceTimeMs(problem, unit.config);
    if (service_ms > options.slo_ms / 2) break;
    unit.batch = b;
    unit.service_ms = service_ms;
  }
  if (unit.batch == 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: even batch 1 takes more than half the %.1f ms objective", CoarseGrainedName(rate),
        options.slo_ms));
  }
  const std::vector<double> scale = ScaleFactors(problem);
  unit.qps = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < unit.config.size(); ++i) {
    unit.config[i].batch = unit.batch;
    if (scale[i] <= 0) continue;
    const Profile& p = problem.stages[i].options[unit.config[i].option].profile;
    unit.qps = std::min(unit.qps, p.ThroughputAt(unit.batch) / scale[i]);
  }
  return unit;
}

absl::StatusOr<Plan> PlanCoarseGrained(const PlanningProblem& problem,
                                       absl::Span<const Nanos> arrivals,
                                       const PlannerOptions& options, CoarseGrainedRate rate,
                                       const LatencyOracle& oracle) {
  absl::StatusOr<CoarseGrainedUnit> unit = SizeCoarseGrainedUnit(problem, options, oracle, rate);
  if (!unit.ok()) return unit.status();
  const double qps = CoarseGrainedRateQps(rate, arrivals, options.slo_ms);
  const int32_t units = std::max<int32_t>(1, static_cast<int32_t>(std::ceil(qps / unit->qps)));
  if (units > options.max_replicas) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "%s needs %d units for %.1f qps, more than %d", CoarseGrainedName(rate), units, qps,
        options.max_replicas));
  }
  PipelineConfig config = unit->config;
  for (StageConfig& c : config) c.replicas = units;
  Plan plan;
  absl::StatusOr<double> p99 = oracle(config);
  if (!p99.ok()) return p99.status();
  plan.p99_ms = *p99;
  plan.cost_per_hour = CostPerHour(problem, config);
  plan.config = std::move(config);
  plan.estimates = 1;
  plan.steps.push_back(absl::StrFormat("%s: batch %d, %.1f qps / %.1f qps per unit -> %d units",
                                       CoarseGrainedName(rate), unit->batch, qps, unit->qps,
                                       units));
  return plan;
}

}  // namespace maitre::pipeline
