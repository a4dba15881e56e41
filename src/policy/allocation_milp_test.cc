#include "policy/allocation_milp.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

namespace maitre::policy {
namespace {

// Two query types; "a" has a fast inaccurate and a slow accurate variant,
// "b" one of each too. Device types: "cpu" (slow) and "gpu" (fast).
AllocationProblem TwoFamilies(double demand_a, double demand_b, int cpus, int gpus) {
  AllocationProblem p;
  p.query_types = {{"a", demand_a}, {"b", demand_b}};
  p.variants = {
      {"a-small", 0, 0.85}, {"a-large", 0, 1.0}, {"b-small", 1, 0.8}, {"b-large", 1, 1.0}};
  p.device_types = {"cpu", "gpu"};
  p.peak_qps = {{40, 10, 50, 12}, {200, 80, 250, 100}};
  for (int i = 0; i < cpus; ++i) p.devices.push_back({"cpu" + std::to_string(i), 0, -1});
  for (int i = 0; i < gpus; ++i) p.devices.push_back({"gpu" + std::to_string(i), 1, -1});
  return p;
}

// Every placement of every device (or none), each with its best
// assignment: the exact optimum by enumeration.
AllocationPlan BruteForce(const AllocationProblem& p, const AllocationOptions& o = {}) {
  const int nm = static_cast<int>(p.variants.size());
  const size_t nd = p.devices.size();
  std::vector<int> placement(nd, -1);
  AllocationPlan best;
  best.objective = -std::numeric_limits<double>::infinity();
  while (true) {
    AllocationPlan plan = AssignForPlacement(p, placement, o);
    if (plan.objective > best.objective + 1e-12) best = plan;
    size_t d = 0;
    for (; d < nd; ++d) {
      if (++placement[d] < nm) break;
      placement[d] = -1;
    }
    if (d == nd) return best;
  }
}

TEST(AllocationMilpTest, MatchesBruteForceOnRandomSmallClusters) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> unit(0, 1);
  for (int trial = 0; trial < 150; ++trial) {
    AllocationProblem p;
    int nq = 1 + trial % 2;
    for (int q = 0; q < nq; ++q)
      p.query_types.push_back({"q" + std::to_string(q), 5 + 150 * unit(rng)});
    int nm = 2 + trial % 3;
    for (int m = 0; m < nm; ++m) {
      p.variants.push_back({"m" + std::to_string(m), m % nq, 0.75 + 0.25 * unit(rng)});
    }
    p.device_types = {"t0", "t1"};
    p.peak_qps.assign(2, std::vector<double>(nm, 0));
    for (auto& row : p.peak_qps) {
      for (double& peak : row) peak = unit(rng) < 0.2 ? 0 : 5 + 100 * unit(rng);
    }
    int nd = 2 + trial % 3;
    for (int d = 0; d < nd; ++d) {
      // What a device hosts now is something it can serve with (a variant
      // it cannot is always unloaded: see AllocationProblem::Device).
      int current = unit(rng) < 0.5 ? -1 : static_cast<int>(unit(rng) * nm);
      if (current >= 0 && p.peak_qps[d % 2][current] == 0) current = -1;
      p.devices.push_back({"d" + std::to_string(d), d % 2, current});
    }
    AllocationOptions exact;
    exact.absolute_gap = 1e-9;
    exact.move_penalty = 1e-4;
    auto plan = SolveAllocation(p, exact);
    ASSERT_TRUE(plan.ok()) << plan.status();
    AllocationPlan reference = BruteForce(p, exact);
    EXPECT_TRUE(plan->optimal);
    EXPECT_NEAR(plan->objective, reference.objective, 1e-6) << "trial " << trial;
    EXPECT_NEAR(plan->served_fraction, reference.served_fraction, 1e-6) << "trial " << trial;
    EXPECT_NEAR(plan->effective_accuracy, reference.effective_accuracy, 1e-4) << "trial " << trial;
    EXPECT_EQ(plan->moves, reference.moves) << "trial " << trial;
    // The plan's own figures are consistent with its placement.
    AllocationPlan again = AssignForPlacement(p, plan->device_variant, exact);
    EXPECT_NEAR(again.objective, plan->objective, 1e-6) << "trial " << trial;
  }
}

TEST(AllocationMilpTest, LowDemandGetsFullAccuracy) {
  auto plan = SolveAllocation(TwoFamilies(30, 30, 2, 2));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_NEAR(plan->served_fraction, 1, 1e-9);
  EXPECT_NEAR(plan->effective_accuracy, 1.0, 1e-9);
  EXPECT_NEAR(plan->type_served_qps[0], 30, 1e-6);
  EXPECT_NEAR(plan->type_served_qps[1], 30, 1e-6);
  // Shares of each type sum to one; each device serves at most its peak.
  for (int q = 0; q < 2; ++q) {
    double sum = 0;
    for (const auto& row : plan->share) sum += row[q];
    EXPECT_NEAR(sum, 1, 1e-6);
  }
}

TEST(AllocationMilpTest, HighDemandLowersAccuracyBeforeDroppingQueries) {
  // 2 GPUs: a-large 80 + b-large 100 carries 80 + 100; asking 150 + 150
  // needs the small variants somewhere, but all of it fits.
  auto plan = SolveAllocation(TwoFamilies(150, 150, 2, 2));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_NEAR(plan->served_fraction, 1, 1e-9);
  EXPECT_LT(plan->effective_accuracy, 1.0);
  EXPECT_GT(plan->effective_accuracy, 0.85);
  EXPECT_NEAR(plan->served_qps_total, 300, 1e-6);
}

TEST(AllocationMilpTest, OverDemandServesTheSameShareOfEveryType) {
  // Everything at the smallest variants: cpu 40 / 50, gpu 200 / 250. Two
  // of each carry far less than 1000 + 1000.
  auto plan = SolveAllocation(TwoFamilies(1000, 1000, 2, 2));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_LT(plan->served_fraction, 1);
  EXPECT_GT(plan->served_fraction, 0.2);
  for (int q = 0; q < 2; ++q) {
    EXPECT_GE(plan->type_served_qps[q] + 1e-6, plan->served_fraction * 1000);
  }
  // Every device is used, and only small variants are (they serve most).
  for (int m : plan->device_variant) EXPECT_TRUE(m == 0 || m == 2) << m;
  // The best common fraction: "a" on both CPUs and one GPU (280 qps),
  // "b" on the other GPU (250): 0.25 of each type.
  EXPECT_NEAR(plan->served_fraction, 0.25, 1e-9);
  EXPECT_NEAR(plan->served_fraction, BruteForce(TwoFamilies(1000, 1000, 2, 2)).served_fraction,
              1e-9);
}

TEST(AllocationMilpTest, TypeNoVariantCanServeGetsNothingAndTheRestIsPlanned) {
  AllocationProblem p = TwoFamilies(50, 50, 1, 1);
  p.peak_qps[0][2] = p.peak_qps[0][3] = p.peak_qps[1][2] = p.peak_qps[1][3] = 0;
  auto plan = SolveAllocation(p);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_DOUBLE_EQ(plan->served_fraction, 0);
  EXPECT_DOUBLE_EQ(plan->type_served_qps[1], 0);
  EXPECT_NEAR(plan->type_served_qps[0], 50, 1e-6);
}

TEST(AllocationMilpTest, OfEquallyAccurateVariantsTheFasterIsHosted) {
  // "a-opt" is "a-large" compiled better: as accurate, twice as fast. At a
  // demand either carries, only the faster one leaves headroom.
  AllocationProblem p = TwoFamilies(5, 5, 1, 1);
  p.variants.push_back({"a-opt", 0, 1.0});
  p.peak_qps[0].push_back(20);
  p.peak_qps[1].push_back(160);
  auto plan = SolveAllocation(p);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_NEAR(plan->effective_accuracy, 1.0, 1e-9);
  for (int m : plan->device_variant) EXPECT_NE(m, 1) << "the slower a-large was hosted";

  AllocationProblem pruned = WithoutDominatedVariants(p);
  EXPECT_EQ(pruned.peak_qps[0][1], 0);   // a-large: a-opt is as accurate and faster
  EXPECT_EQ(pruned.peak_qps[0][0], 40);  // a-small: less accurate but faster, kept
  EXPECT_EQ(pruned.peak_qps[1][4], 160);
  // What a device hosts now is kept, so a re-solve is not forced to move it.
  p.devices[0].current = 1;
  EXPECT_EQ(WithoutDominatedVariants(p).peak_qps[0][1], 10);
  EXPECT_EQ(WithoutDominatedVariants(p).peak_qps[1][1], 0);
}

TEST(AllocationMilpTest, ResolveAtUnchangedDemandMovesNothing) {
  for (double demand : {20.0, 150.0, 400.0, 2000.0}) {
    AllocationProblem p = TwoFamilies(demand, demand * 0.7, 3, 3);
    auto first = SolveAllocation(p);
    ASSERT_TRUE(first.ok()) << first.status();
    EXPECT_EQ(first->moves, 0);  // nothing was loaded
    for (size_t d = 0; d < p.devices.size(); ++d) p.devices[d].current = first->device_variant[d];
    auto second = SolveAllocation(p);
    ASSERT_TRUE(second.ok()) << second.status();
    EXPECT_EQ(second->moves, 0) << demand;
    EXPECT_EQ(second->loads, 0) << demand;
    EXPECT_EQ(second->device_variant, first->device_variant) << demand;
  }
}

TEST(AllocationMilpTest, ADemandChangeMovesOnlyWhatItMust) {
  AllocationOptions exact;
  exact.absolute_gap = 1e-9;
  AllocationProblem p = TwoFamilies(60, 60, 2, 2);
  auto low = SolveAllocation(p, exact);
  ASSERT_TRUE(low.ok());
  for (size_t d = 0; d < p.devices.size(); ++d) p.devices[d].current = low->device_variant[d];
  p.query_types[0].demand_qps = 250;  // only "a" rises
  auto high = SolveAllocation(p, exact);
  ASSERT_TRUE(high.ok());
  EXPECT_NEAR(high->served_fraction, 1, 1e-9);
  EXPECT_GT(high->moves, 0);
  AllocationPlan reference = BruteForce(p, exact);
  EXPECT_EQ(high->moves, reference.moves);
  EXPECT_NEAR(high->objective, reference.objective, 1e-6);
}

TEST(AllocationMilpTest, BadInputIsRefusedWithAReason) {
  AllocationProblem no_variants = TwoFamilies(1, 1, 1, 1);
  no_variants.variants.clear();
  EXPECT_EQ(SolveAllocation(no_variants).status().message(), "no variants");
  AllocationProblem no_devices = TwoFamilies(1, 1, 0, 0);
  EXPECT_EQ(SolveAllocation(no_devices).status().message(), "no devices");
  AllocationProblem nan = TwoFamilies(std::nan(""), 1, 1, 1);
  auto status = SolveAllocation(nan).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("query type \"a\""), absl::string_view::npos) << status;
  AllocationProblem negative_peak = TwoFamilies(1, 1, 1, 1);
  negative_peak.peak_qps[1][0] = -3;
  EXPECT_EQ(SolveAllocation(negative_peak).status().code(), absl::StatusCode::kInvalidArgument);
  AllocationProblem bad_type = TwoFamilies(1, 1, 1, 1);
  bad_type.variants[0].query_type = 5;
  EXPECT_EQ(SolveAllocation(bad_type).status().code(), absl::StatusCode::kInvalidArgument);
  AllocationOptions bad_limit;
  bad_limit.time_limit_s = 0;
  EXPECT_EQ(SolveAllocation(TwoFamilies(1, 1, 1, 1), bad_limit).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(AllocationMilpTest, PeakThroughputUsesTheLargestBatchWithinHalfTheObjective) {
  // p99 of batch 1, 2, 4: 4, 6, 11 ms; medians 3, 5, 9.
  auto profile = Profile::Create({{1, 3, 4}, {2, 5, 6}, {4, 9, 11}}, 100, 10);
  ASSERT_TRUE(profile.ok());
  // SLO 20 ms: half is 10; batch 3's p99 interpolates to 8.5, batch 4's is 11.
  EXPECT_NEAR(PeakThroughputQps(*profile, 20, 1), 3 * 1000.0 / 7, 1e-9);
  EXPECT_NEAR(PeakThroughputQps(*profile, 20, 2), 2 * 3 * 1000.0 / 7, 1e-9);
  EXPECT_DOUBLE_EQ(PeakThroughputQps(*profile, 7, 1), 0);  // batch 1's p99 is 4 > 3.5
  EXPECT_DOUBLE_EQ(PeakThroughputQps(*profile, 20, 0), 0);
}

}  // namespace
}  // namespace maitre::policy
