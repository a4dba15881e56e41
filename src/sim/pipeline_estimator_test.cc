#include "sim/pipeline_estimator.h"

#include <cmath>

#include <gtest/gtest.h>

#include "pipeline/testing/problems.h"

namespace maitre::sim {
namespace {

using pipeline::PipelineConfig;
using pipeline::PlanningProblem;
using pipeline::testing::LinearProfile;

PlanningProblem OneStage(double base_ms, double per_row_ms) {
  PlanningProblem p;
  p.hardware = {{"cpu", 0.1}};
  p.stages.push_back({"only", {}, {{0, LinearProfile(base_ms, per_row_ms)}}});
  return p;
}

PipelineEstimate Estimate(const PlanningProblem& p, const PipelineConfig& c,
                          const std::vector<Nanos>& arrivals) {
  auto e = EstimatePipeline(p, c, arrivals, PipelineEstimatorOptions());
  EXPECT_TRUE(e.ok()) << e.status();
  return e.ok() ? *e : PipelineEstimate();
}

TEST(PipelineEstimatorTest, SpacedQueriesTakeTheServiceTime) {
  // 9 + 1 = 10 ms per query, a query every 20 ms: nobody waits.
  const PipelineEstimate e =
      Estimate(OneStage(9, 1), {{0, 1, 1}}, {0, 20 * kMillisecond, 40 * kMillisecond});
  EXPECT_EQ(e.latency_ms, (std::vector<double>{10, 10, 10}));
  EXPECT_EQ(e.p99_ms, 10);
}

TEST(PipelineEstimatorTest, TheServingOverheadIsAddedPerStageVisited) {
  const PipelineConfig c = {{0, 4, 1}, {0, 2, 1}};
  const std::vector<Nanos> trace = pipeline::testing::GammaArrivals(100, 1, 10 * kSecond, 3);
  const PlanningProblem p = pipeline::testing::Cascade(0.3);
  PipelineEstimatorOptions options;
  const PipelineEstimate bare = *EstimatePipeline(p, c, trace, options);
  options.stage_overhead_ms = 1.5;
  const PipelineEstimate served = *EstimatePipeline(p, c, trace, options);
  ASSERT_EQ(served.latency_ms.size(), bare.latency_ms.size());
  int both = 0;
  for (size_t q = 0; q < bare.latency_ms.size(); ++q) {
    // One stage or two: the queues are the same, the path 1.5 or 3 ms longer.
    const double added = served.latency_ms[q] - bare.latency_ms[q];
    EXPECT_TRUE(std::abs(added - 1.5) < 1e-9 || std::abs(added - 3) < 1e-9) << q << ": " << added;
    both += std::abs(added - 3) < 1e-9;
  }
  EXPECT_NEAR(both / static_cast<double>(trace.size()), 0.3, 0.05);
  EXPECT_GT(served.p99_ms, bare.p99_ms + 1.5);
  options.stage_overhead_ms = -1;
  EXPECT_FALSE(EstimatePipeline(p, c, trace, options).ok());
}

TEST(PipelineEstimatorTest, BranchesServedAtOnceAddTheOverheadOncePerStageOnTheLongestChain) {
  // Two stages from the input, and a third after both: three stages visited,
  // but the longest chain holds two.
  PlanningProblem p;
  p.hardware = {{"cpu", 0.1}};
  p.stages.push_back({"left", {}, {{0, LinearProfile(2, 1)}}});
  p.stages.push_back({"right", {}, {{0, LinearProfile(3, 1)}}});
  p.stages.push_back({"join", {{0, 1}, {1, 1}}, {{0, LinearProfile(1, 1)}}});
  const PipelineConfig c = {{0, 1, 1}, {0, 1, 1}, {0, 1, 1}};
  const std::vector<Nanos> spaced = {0, 50 * kMillisecond};
  PipelineEstimatorOptions options;
  const PipelineEstimate bare = *EstimatePipeline(p, c, spaced, options);
  EXPECT_EQ(bare.latency_ms, (std::vector<double>{6, 6}));  // right's 4 ms, then join's 2
  options.stage_overhead_ms = 1.5;
  const PipelineEstimate served = *EstimatePipeline(p, c, spaced, options);
  EXPECT_EQ(served.latency_ms, (std::vector<double>{9, 9}));
}

TEST(PipelineEstimatorTest, OneReplicaAtBatchOneQueues) {
  const PipelineEstimate e = Estimate(OneStage(9, 1), {{0, 1, 1}}, {0, 0, 0});
  EXPECT_EQ(e.latency_ms, (std::vector<double>{10, 20, 30}));
  EXPECT_DOUBLE_EQ(e.mean_ms, 20);
}

TEST(PipelineEstimatorTest, ABatchTakesWhatWaitsUpToItsSize) {
  // Batch 2: the first query runs alone (nothing else waits), the next two
  // arrive while it runs and go together, at 9 + 2 = 11 ms.
  const PipelineEstimate e =
      Estimate(OneStage(9, 1), {{0, 2, 1}}, {0, kMillisecond, 2 * kMillisecond});
  EXPECT_EQ(e.latency_ms, (std::vector<double>{10, 20, 19}));
}

TEST(PipelineEstimatorTest, ReplicasServeInParallel) {
  const PipelineEstimate e = Estimate(OneStage(9, 1), {{0, 1, 3}}, {0, 0, 0});
  EXPECT_EQ(e.latency_ms, (std::vector<double>{10, 10, 10}));
}

TEST(PipelineEstimatorTest, ACascadeAddsTheSlowStageOnlyWhenTaken) {
  const PipelineConfig c = {{0, 1, 1}, {0, 1, 1}};  // fast: 2.1 ms, slow: 10.5 ms on the GPU
  const std::vector<Nanos> spaced = {0, 100 * kMillisecond};
  PipelineEstimate never = Estimate(pipeline::testing::Cascade(0), c, spaced);
  EXPECT_NEAR(never.latency_ms[0], 2.1, 1e-6);
  EXPECT_EQ(never.scale_factor, (std::vector<double>{1, 0}));
  PipelineEstimate always = Estimate(pipeline::testing::Cascade(1), c, spaced);
  EXPECT_NEAR(always.latency_ms[1], 12.6, 1e-6);
  EXPECT_EQ(always.scale_factor, (std::vector<double>{1, 1}));
}

TEST(PipelineEstimatorTest, BranchesFollowTheProbabilityWithTheSamePathsInEveryConfig) {
  const PlanningProblem p = pipeline::testing::Cascade(0.3);
  const std::vector<Nanos> arrivals =
      pipeline::testing::GammaArrivals(100, 1, 60 * kSecond);
  const PipelineEstimate a = Estimate(p, {{0, 1, 2}, {0, 1, 2}}, arrivals);
  const PipelineEstimate b = Estimate(p, {{1, 4, 3}, {1, 2, 5}}, arrivals);
  EXPECT_NEAR(a.scale_factor[1], 0.3, 0.03);
  // Common random numbers: the same queries reach the slow stage.
  EXPECT_EQ(a.scale_factor, b.scale_factor);
}

TEST(PipelineEstimatorTest, TheSameInputsGiveTheSameLatencies) {
  const PlanningProblem p = pipeline::testing::Cascade(0.4);
  const std::vector<Nanos> arrivals = pipeline::testing::GammaArrivals(500, 2, 10 * kSecond);
  const PipelineConfig c = {{1, 8, 2}, {0, 4, 2}};
  PipelineEstimatorOptions other_seed;
  other_seed.seed = 2;
  const PipelineEstimate a = Estimate(p, c, arrivals);
  EXPECT_EQ(a.latency_ms, Estimate(p, c, arrivals).latency_ms);
  auto b = EstimatePipeline(p, c, arrivals, other_seed);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_NE(a.latency_ms, b->latency_ms);  // the seed chooses the paths
}

TEST(PipelineEstimatorTest, AJoinWaitsForItsSlowestBranch) {
  PlanningProblem p;
  p.hardware = {{"cpu", 0.1}};
  p.stages.push_back({"split", {}, {{0, LinearProfile(0.5, 0.5)}}});
  p.stages.push_back({"left", {{0, 1}}, {{0, LinearProfile(4, 1)}}});
  p.stages.push_back({"right", {{0, 1}}, {{0, LinearProfile(19, 1)}}});
  p.stages.push_back({"join", {{1, 1}, {2, 1}}, {{0, LinearProfile(1, 1)}}});
  const PipelineEstimate e = Estimate(p, {{0, 1, 1}, {0, 1, 1}, {0, 1, 1}, {0, 1, 1}}, {0});
  EXPECT_DOUBLE_EQ(e.latency_ms[0], 1 + 20 + 2);
  EXPECT_DOUBLE_EQ(pipeline::ServiceTimeMs(p, {{0, 1, 1}, {0, 1, 1}, {0, 1, 1}, {0, 1, 1}}),
                   23);
}

TEST(PipelineEstimatorTest, MoreReplicasNeverRaiseTheTailOnALoadedStage) {
  const PlanningProblem p = pipeline::testing::Cascade(0.5);
  const std::vector<Nanos> arrivals = pipeline::testing::GammaArrivals(300, 4, 30 * kSecond);
  double first = 0, last = 1e18;
  for (int32_t r = 1; r <= 6; ++r) {
    const PipelineEstimate e = Estimate(p, {{0, 4, r}, {0, 4, r}}, arrivals);
    EXPECT_LE(e.p99_ms, last) << r << " replicas";
    if (r == 1) first = e.p99_ms;
    last = e.p99_ms;
  }
  EXPECT_GT(first, 2 * last);  // the bursts did queue at one replica
}

TEST(PipelineEstimatorTest, AddedReplicasServeFromTheirChange) {
  PipelineEstimatorOptions o;
  o.changes = {{0, 0, 3}};
  auto e = EstimatePipeline(OneStage(9, 1), {{0, 1, 1}}, std::vector<Nanos>{0, 0, 0}, o);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->latency_ms, (std::vector<double>{10, 10, 10}));
}

TEST(PipelineEstimatorTest, RemovedReplicasFinishTheirBatchFirst) {
  PipelineEstimatorOptions o;
  o.changes = {{5 * kMillisecond, 0, 1}};
  const Nanos later = 20 * kMillisecond;
  auto e = EstimatePipeline(OneStage(9, 1), {{0, 1, 3}},
                            std::vector<Nanos>{0, 0, 0, later, later, later}, o);
  ASSERT_TRUE(e.ok()) << e.status();
  // The first three ran on three replicas; from 5 ms one remains.
  EXPECT_EQ(e->latency_ms, (std::vector<double>{10, 10, 10, 10, 20, 30}));
  o.changes.push_back({6 * kMillisecond, 0, 2});  // one retirement cancelled
  e = EstimatePipeline(OneStage(9, 1), {{0, 1, 3}},
                       std::vector<Nanos>{0, 0, 0, later, later, later}, o);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->latency_ms, (std::vector<double>{10, 10, 10, 10, 10, 20}));
}

TEST(PipelineEstimatorTest, StopsOnceTheTailIsKnownToExceedTheLimit) {
  // 200 queries at once on one replica: the i-th finishes at 10·(i+1) ms.
  const std::vector<Nanos> burst(200, 0);
  PipelineEstimatorOptions o;
  o.stop_above_p99_ms = 1975;  // the 198th query (1980 ms) is the nearest-rank P99
  auto e = EstimatePipeline(OneStage(9, 1), {{0, 1, 1}}, burst, o);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_TRUE(e->stopped_above);
  EXPECT_TRUE(std::isinf(e->p99_ms));
  o.stop_above_p99_ms = 1980;  // exactly the P99: not above it
  e = EstimatePipeline(OneStage(9, 1), {{0, 1, 1}}, burst, o);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_FALSE(e->stopped_above);
  EXPECT_DOUBLE_EQ(e->p99_ms, 1980);
}

TEST(PipelineEstimatorTest, RefusesABadConfiguration) {
  const PlanningProblem p = OneStage(9, 1);
  EXPECT_FALSE(EstimatePipeline(p, {{0, 0, 1}}, {0}, {}).ok());
  EXPECT_FALSE(EstimatePipeline(p, {{1, 1, 1}}, {0}, {}).ok());
  EXPECT_FALSE(EstimatePipeline(p, {}, {0}, {}).ok());
  EXPECT_FALSE(EstimatePipeline(p, {{0, 1, 1}}, {5, 0}, {}).ok());
  PipelineEstimatorOptions o;
  o.changes = {{0, 1, 2}};
  EXPECT_FALSE(EstimatePipeline(p, {{0, 1, 1}}, {0}, o).ok());
}

}  // namespace
}  // namespace maitre::sim
