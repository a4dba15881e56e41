#include "policy/allocation_infaas.h"

#include <random>

#include "gtest/gtest.h"

namespace maitre::policy {
namespace {

// One device type; per query type a "top" variant (accuracy 1, 100 qps a
// device) and a "fast" one (accuracy 0.9, 300 qps a device).
AllocationProblem TwoVariantsPerType(std::vector<double> demand, int devices) {
  AllocationProblem p;
  p.device_types = {"cpu"};
  p.peak_qps.assign(1, {});
  for (size_t q = 0; q < demand.size(); ++q) {
    const std::string name = "app" + std::to_string(q);
    p.query_types.push_back({name, demand[q]});
    p.variants.push_back({name + ":top", static_cast<int>(q), 1.0});
    p.variants.push_back({name + ":fast", static_cast<int>(q), 0.9});
    p.peak_qps[0].push_back(100);
    p.peak_qps[0].push_back(300);
  }
  for (int d = 0; d < devices; ++d) p.devices.push_back({"d" + std::to_string(d), 0, -1});
  return p;
}

void Hold(AllocationProblem& p, const std::vector<int>& placement) {
  for (size_t d = 0; d < placement.size(); ++d) p.devices[d].current = placement[d];
}

constexpr int kTop = 0, kFast = 1;  // of app0; app1's are 2 and 3

TEST(InfaasAccuracyTest, ReplicatesTheAccurateVariantWhileFreeDevicesLast) {
  AllocationProblem p = TwoVariantsPerType({250}, 4);
  Hold(p, {kTop, -1, -1, -1});
  // 1.05 × 250 needs three devices of "top": no accuracy is given up.
  EXPECT_EQ(InfaasAccuracyPlacement(p), (std::vector<int>{kTop, kTop, kTop, -1}));
}

TEST(InfaasAccuracyTest, SwitchesToTheFastVariantWhenReplicasCannotCarryTheLoad) {
  AllocationProblem p = TwoVariantsPerType({500}, 4);
  Hold(p, {kTop, kTop, -1, -1});
  // Four "top" devices carry 400: the whole type moves to "fast", on its
  // own devices first, and needs only two. It never mixes the two
  // variants, which would have served everything more accurately (the
  // MILP's plan below): INFaaS weighs replicating against switching only.
  std::vector<int> placement = InfaasAccuracyPlacement(p);
  EXPECT_EQ(placement, (std::vector<int>{kFast, kFast, -1, -1}));
  AllocationPlan greedy = AssignForPlacement(p, placement);
  auto milp = SolveAllocation(p);
  ASSERT_TRUE(milp.ok());
  EXPECT_DOUBLE_EQ(greedy.served_fraction, 1);
  EXPECT_NEAR(greedy.effective_accuracy, 0.9, 1e-9);
  EXPECT_GT(milp->effective_accuracy, greedy.effective_accuracy + 0.03);
}

TEST(InfaasAccuracyTest, ScalesDownToTheAccurateVariantWhenDemandFalls) {
  AllocationProblem p = TwoVariantsPerType({100}, 4);
  Hold(p, {kFast, kFast, -1, -1});
  std::vector<int> placement = InfaasAccuracyPlacement(p);
  EXPECT_EQ(placement, (std::vector<int>{kTop, kTop, -1, -1}));
  // At the same demand the next round changes nothing: one "top" device
  // would be short of the headroom, one "fast" one would drop accuracy.
  Hold(p, placement);
  EXPECT_EQ(InfaasAccuracyPlacement(p), placement);
}

TEST(InfaasAccuracyTest, GivesBackDevicesItNoLongerNeeds) {
  AllocationProblem p = TwoVariantsPerType({90}, 4);
  Hold(p, {kTop, kTop, kTop, kTop});
  // Two devices keep 1.15 × 90 at the same accuracy; the others are freed
  // for whichever type needs them next, and the plan then stays.
  std::vector<int> placement = InfaasAccuracyPlacement(p);
  EXPECT_EQ(placement, (std::vector<int>{kTop, kTop, -1, -1}));
  Hold(p, placement);
  EXPECT_EQ(InfaasAccuracyPlacement(p), placement);
}

TEST(InfaasAccuracyTest, ATypeNeverTakesAnotherTypesDevice) {
  AllocationProblem p = TwoVariantsPerType({350, 200}, 4);
  Hold(p, {kTop, kTop, kTop, kTop});
  // app0 holds every device at "top" and is short (400 < 1.05 × 350 is
  // false, so it keeps them); app1 arrives and finds no free device.
  std::vector<int> placement = InfaasAccuracyPlacement(p);
  EXPECT_EQ(placement, (std::vector<int>{kTop, kTop, kTop, kTop}));
  AllocationPlan greedy = AssignForPlacement(p, placement);
  auto milp = SolveAllocation(p);
  ASSERT_TRUE(milp.ok());
  EXPECT_DOUBLE_EQ(greedy.served_fraction, 0);
  EXPECT_DOUBLE_EQ(milp->served_fraction, 1);
}

TEST(InfaasAccuracyTest, TheShortestTypeChoosesFirst) {
  AllocationProblem p = TwoVariantsPerType({100, 800}, 4);
  Hold(p, {kTop, -1, -1, -1});
  // app1 has nothing and goes first: three free devices at "fast". app0,
  // just short of its slack, finds none left and switches its own device.
  // Had app0 gone first, it would have replicated "top" and left app1 short.
  EXPECT_EQ(InfaasAccuracyPlacement(p), (std::vector<int>{kFast, 3, 3, 3}));
}

// Random clusters: the heuristic's plan is never better than the MILP's,
// and a second round at the same demand changes nothing once the first
// has reached its targets.
TEST(InfaasAccuracyTest, NeverBeatsTheMilpOnRandomClusters) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> unit(0, 1);
  for (int trial = 0; trial < 60; ++trial) {
    AllocationProblem p;
    p.device_types = {"a", "b"};
    const int nq = 1 + trial % 3;
    for (int q = 0; q < nq; ++q) p.query_types.push_back({"q" + std::to_string(q), 0});
    for (int q = 0; q < nq; ++q) {
      for (int k = 0; k < 3; ++k) {
        p.variants.push_back({"v", q, 1.0 - 0.05 * k});
      }
    }
    p.peak_qps.assign(2, std::vector<double>(p.variants.size(), 0));
    for (int t = 0; t < 2; ++t) {
      for (size_t m = 0; m < p.variants.size(); ++m) {
        p.peak_qps[t][m] = (m % 3 + 1) * (50 + 100 * unit(rng)) * (t + 1);
      }
    }
    double total = 0;
    for (int d = 0; d < 5; ++d) p.devices.push_back({"d" + std::to_string(d), d % 2, -1});
    for (int t = 0; t < 2; ++t) total += 2.5 * p.peak_qps[t][0];
    for (auto& q : p.query_types) q.demand_qps = total * (0.2 + unit(rng)) / nq;

    std::vector<int> placement = InfaasAccuracyPlacement(p);
    AllocationPlan greedy = AssignForPlacement(p, placement);
    auto milp = SolveAllocation(p);
    ASSERT_TRUE(milp.ok());
    EXPECT_LE(greedy.objective, milp->objective + 1e-6) << trial;
    for (int m : placement) {
      if (m >= 0) EXPECT_LT(m, static_cast<int>(p.variants.size()));
    }
  }
}

}  // namespace
}  // namespace maitre::policy
