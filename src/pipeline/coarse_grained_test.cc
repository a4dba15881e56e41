#include "pipeline/coarse_grained.h"

#include <gtest/gtest.h>

#include "pipeline/testing/problems.h"

namespace maitre::pipeline {
namespace {

using testing::Cascade;
using testing::GammaArrivals;

LatencyOracle Fixed(double p99) {
  return [p99](const PipelineConfig&) -> absl::StatusOr<double> { return p99; };
}

PlannerOptions Options(double slo_ms) {
  PlannerOptions o;
  o.slo_ms = slo_ms;
  o.max_batch = 64;
  o.max_replicas = 1000;
  return o;
}

TEST(CoarseGrainedTest, PeakIsTheBusiestObjectiveWideWindowAndMeanTheAverage) {
  // Ten queries in 50 ms, then one a second up to 10 s.
  std::vector<Nanos> arrivals;
  for (int i = 0; i < 10; ++i) arrivals.push_back(i * 5 * kMillisecond);
  for (int i = 1; i <= 10; ++i) arrivals.push_back(i * kSecond);
  EXPECT_DOUBLE_EQ(CoarseGrainedRateQps(CoarseGrainedRate::kPeak, arrivals, 100), 100);
  EXPECT_DOUBLE_EQ(CoarseGrainedRateQps(CoarseGrainedRate::kMean, arrivals, 100), 19.0 / 10);
}

TEST(CoarseGrainedTest, OneBatchForAllStagesOnTheFastestHardwareReplicatedAsAUnit) {
  const PlanningProblem problem = Cascade(0.5);
  const std::vector<Nanos> arrivals = GammaArrivals(1500, 4, 30 * kSecond);
  // Objective 60 ms: half is 30; on the GPU fast + slow = 2 + 0.1b + 10 + 0.5b
  // fits at b = 16 (21.6 ms), not 32 (31.2 ms).
  auto mean = PlanCoarseGrained(problem, arrivals, Options(60), CoarseGrainedRate::kMean,
                                Fixed(1));
  auto peak = PlanCoarseGrained(problem, arrivals, Options(60), CoarseGrainedRate::kPeak,
                                Fixed(1));
  ASSERT_TRUE(mean.ok()) << mean.status();
  ASSERT_TRUE(peak.ok()) << peak.status();
  for (const Plan* p : {&*mean, &*peak}) {
    for (const StageConfig& c : p->config) {
      EXPECT_EQ(c.option, 0);  // the GPU
      EXPECT_EQ(c.batch, 16);
      EXPECT_EQ(c.replicas, p->config[0].replicas);
    }
  }
  // The unit: the slow stage bounds it, 16 / 18 ms at half the queries.
  const double unit = 16 / 0.018 / 0.5;
  const double mean_qps = CoarseGrainedRateQps(CoarseGrainedRate::kMean, arrivals, 60);
  const double peak_qps = CoarseGrainedRateQps(CoarseGrainedRate::kPeak, arrivals, 60);
  EXPECT_EQ(mean->config[0].replicas, static_cast<int32_t>(std::ceil(mean_qps / unit)));
  EXPECT_EQ(peak->config[0].replicas, static_cast<int32_t>(std::ceil(peak_qps / unit)));
  EXPECT_GT(peak->config[0].replicas, mean->config[0].replicas);  // CV 4 bursts
  EXPECT_DOUBLE_EQ(peak->cost_per_hour, peak->config[0].replicas * 2 * 0.9);
}

TEST(CoarseGrainedTest, TheUnitsPackingFactorIsWhatItServesInTheObjectiveLeftAfterABatch) {
  auto unit = SizeCoarseGrainedUnit(Cascade(0.5), Options(60), Fixed(1), CoarseGrainedRate::kPeak);
  ASSERT_TRUE(unit.ok()) << unit.status();
  EXPECT_EQ(unit->batch, 16);
  EXPECT_DOUBLE_EQ(unit->service_ms, 2 + 0.1 * 16 + 10 + 0.5 * 16);
  EXPECT_DOUBLE_EQ(unit->qps, 16 / 0.018 / 0.5);
  // 1777.8 qps for the 60 - 21.6 ms the objective leaves: 68.3 queries.
  EXPECT_NEAR(unit->PackingFactor(60), 16 / 0.018 / 0.5 * 0.0384, 1e-9);
}

TEST(CoarseGrainedTest, AnObjectiveTooShortForBatchOneIsRefused) {
  auto plan = PlanCoarseGrained(Cascade(0.5), GammaArrivals(10, 1, 10 * kSecond), Options(20),
                                CoarseGrainedRate::kPeak, Fixed(1));
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace maitre::pipeline
