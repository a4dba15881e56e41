#include "policy/mark_provisioning.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace maitre::policy {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

ProvisionedType Type(const char* name, double capacity, double price, int launch_units = 0,
                     double overhead = 0, int billing = 1) {
  ProvisionedType t;
  t.name = name;
  t.capacity_qps = capacity;
  t.price_per_unit = price;
  t.launch_units = launch_units;
  t.launch_overhead = overhead;
  t.billing_units = billing;
  return t;
}

TEST(MarkProvisioningTest, CoversTheForecastWithTheCheapestPerRequest) {
  // 10 qps for 1 a unit, or 40 qps for 3: the big one is cheaper per request.
  std::vector<ProvisionedType> types = {Type("small", 10, 1), Type("big", 40, 3)};
  auto plan = PlanProvisioning({35, 35, 35}, types, {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(plan->launch_now, ElementsAre(1));
  EXPECT_THAT(plan->uncovered_qps, ElementsAre(0, 0, 0));
}

TEST(MarkProvisioningTest, ATypeAtItsCeilingGivesWayToTheNextCheapest) {
  std::vector<ProvisionedType> types = {Type("small", 10, 1), Type("big", 40, 3)};
  types[1].max_workers = 1;
  auto plan = PlanProvisioning({75, 75}, types, {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  // One big (40), then small ones for the other 35: four of them.
  EXPECT_THAT(plan->launch_now, ElementsAre(1, 0, 0, 0, 0));
  types[0].max_workers = 2;
  plan = PlanProvisioning({75, 75}, types, {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(plan->launch_now, ElementsAre(1, 0, 0));
  EXPECT_THAT(plan->uncovered_qps, ElementsAre(15, 15));
}

TEST(MarkProvisioningTest, ALaunchOverheadLosesToAShortBurstAndWinsALongPlateau) {
  // "big" is cheaper per request once running, but costs 6 to launch.
  std::vector<ProvisionedType> types = {Type("small", 10, 1), Type("big", 40, 2, 0, 6)};
  auto burst = PlanProvisioning({20}, types, {});
  ASSERT_TRUE(burst.ok());
  EXPECT_THAT(burst->launch_now, ElementsAre(0, 0));  // 2 units of "small"
  auto plateau = PlanProvisioning(std::vector<double>(10, 40), types, {});
  ASSERT_TRUE(plateau.ok());
  EXPECT_THAT(plateau->launch_now, ElementsAre(1));
}

TEST(MarkProvisioningTest, APaidRunningWorkerIsKeptBeforeANewOne) {
  std::vector<ProvisionedType> types = {Type("a", 20, 2), Type("b", 20, 1)};
  // A worker of the dearer type, paid for the next 3 units: free to keep.
  auto plan = PlanProvisioning({20, 20, 20}, types, {{7, 0, 3, 0}});
  ASSERT_TRUE(plan.ok());
  EXPECT_THAT(plan->keep, ElementsAre(7));
  EXPECT_THAT(plan->launch_now, IsEmpty());
  // Unpaid, it costs 2 a unit against 1 for a new "b": it goes at once.
  auto unpaid = PlanProvisioning({20, 20, 20}, types, {{7, 0, 0, 0}});
  ASSERT_TRUE(unpaid.ok());
  EXPECT_THAT(unpaid->launch_now, ElementsAre(1));
  EXPECT_THAT(unpaid->release_now, ElementsAre(7));
}

TEST(MarkProvisioningTest, AnIdleWorkerIsReleasedWhenItsPaidTimeEnds) {
  std::vector<ProvisionedType> types = {Type("a", 20, 1)};
  auto plan = PlanProvisioning({0, 0}, types, {{1, 0, 2, 0}, {2, 0, 0, 0}});
  ASSERT_TRUE(plan.ok());
  EXPECT_THAT(plan->release_later, ElementsAre(1));
  EXPECT_THAT(plan->release_now, ElementsAre(2));
}

TEST(MarkProvisioningTest, LaunchesAheadOfTheLoadByTheLaunchTime) {
  // Takes 2 units to start; the load arrives at unit 5.
  std::vector<ProvisionedType> types = {Type("slow", 20, 1, 2)};
  auto later = PlanProvisioning({0, 0, 0, 0, 0, 20, 20}, types, {});
  ASSERT_TRUE(later.ok());
  EXPECT_THAT(later->launch_now, IsEmpty());
  ASSERT_EQ(later->launch_later.size(), 1u);
  EXPECT_EQ(later->launch_later[0].launch_at, 3);
  // Load from unit 1: launched now, and unit 1 cannot be served in time.
  auto now = PlanProvisioning({0, 20, 20, 20}, types, {});
  ASSERT_TRUE(now.ok());
  EXPECT_THAT(now->launch_now, ElementsAre(0));
  EXPECT_THAT(now->uncovered_qps, ElementsAre(0, 20, 0, 0));
}

TEST(MarkProvisioningTest, AtItsCeilingATypesIdleWorkerIsStillReplacedByALaterLaunch) {
  // Two workers at most; one serves the 20 qps base, and a peak of 40 comes
  // back at unit 4. Keeping the second idle until then costs 8 units; a
  // launch one unit ahead, 5: it goes now and a launch is planned, which
  // the ceiling allows, as the two never run at once.
  std::vector<ProvisionedType> types = {Type("a", 20, 1, 1)};
  types[0].max_workers = 2;
  const std::vector<double> forecast = {20, 20, 20, 20, 40, 40, 40, 40};
  auto plan = PlanProvisioning(forecast, types, {{1, 0, 0, 0}, {2, 0, 0, 0}});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(plan->keep, ElementsAre(1));
  EXPECT_THAT(plan->release_now, ElementsAre(2));
  ASSERT_EQ(plan->launch_later.size(), 1u);
  EXPECT_EQ(plan->launch_later[0].launch_at, 3);
  // The peak next unit: keeping it costs what a launch would, and it serves
  // sooner, so it stays.
  auto soon = PlanProvisioning({20, 40, 40, 40}, types, {{1, 0, 0, 0}, {2, 0, 0, 0}});
  ASSERT_TRUE(soon.ok()) << soon.status();
  EXPECT_THAT(soon->keep, ElementsAre(1, 2));
  EXPECT_THAT(soon->launch_later, IsEmpty());
  // The ceiling holds against running workers too: no third at the peak.
  auto more = PlanProvisioning({20, 60, 60}, types, {{1, 0, 0, 0}, {2, 0, 0, 0}});
  ASSERT_TRUE(more.ok()) << more.status();
  EXPECT_THAT(more->keep, ElementsAre(1, 2));
  EXPECT_THAT(more->launch_now, IsEmpty());
  EXPECT_THAT(more->uncovered_qps, ElementsAre(0, 20, 20));
}

TEST(MarkProvisioningTest, OnlyTypesThatMeetTheSloAreUsed) {
  std::vector<ProvisionedType> types = {Type("fast", 10, 2), Type("cheap", 50, 1)};
  types[1].meets_slo = false;
  auto plan = PlanProvisioning({15}, types, {{3, 1, 5, 0}});
  ASSERT_TRUE(plan.ok());
  EXPECT_THAT(plan->launch_now, ElementsAre(0, 0));
  EXPECT_THAT(plan->release_later, ElementsAre(3));
  types[0].meets_slo = false;
  EXPECT_TRUE(absl::IsFailedPrecondition(PlanProvisioning({15}, types, {}).status()));
}

TEST(MarkProvisioningTest, BadInputIsRefused) {
  std::vector<ProvisionedType> types = {Type("a", 10, 1)};
  EXPECT_TRUE(absl::IsInvalidArgument(PlanProvisioning({-1}, types, {}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(PlanProvisioning({NAN}, types, {}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(PlanProvisioning({1}, types, {{1, 4, 0, 0}}).status()));
  types[0].price_per_unit = -1;
  EXPECT_TRUE(absl::IsInvalidArgument(PlanProvisioning({1}, types, {}).status()));
}

// ---- against brute force over the horizon ----

struct Case {
  std::vector<double> forecast;
  std::vector<ProvisionedType> types;
  std::vector<RunningWorker> running;
};

// A whole plan: which running workers stay, and new workers by (type,
// launch unit). Cost: every worker in it runs to the horizon's end.
struct FullPlan {
  std::vector<bool> keep;
  std::vector<std::vector<int>> launches;  // [type][launch unit] -> count
};

double CostOf(const Case& c, const FullPlan& p) {
  const int m = static_cast<int>(c.forecast.size());
  double cost = 0;
  auto paid = [](const ProvisionedType& t, int units) {
    if (units <= 0) return 0.0;
    return std::ceil(static_cast<double>(units) / t.billing_units) * t.billing_units *
           t.price_per_unit;
  };
  for (size_t r = 0; r < c.running.size(); ++r) {
    if (p.keep[r]) cost += paid(c.types[c.running[r].type], m - c.running[r].paid_units_left);
  }
  for (size_t i = 0; i < c.types.size(); ++i) {
    for (int u = 0; u < m; ++u) {
      cost += p.launches[i][u] * (c.types[i].launch_overhead + paid(c.types[i], m - u));
    }
  }
  return cost;
}

std::vector<double> CapacityOf(const Case& c, const FullPlan& p) {
  const int m = static_cast<int>(c.forecast.size());
  std::vector<double> capacity(m, 0.0);
  for (size_t r = 0; r < c.running.size(); ++r) {
    if (!p.keep[r]) continue;
    for (int t = c.running[r].ready_in_units; t < m; ++t) {
      capacity[t] += c.types[c.running[r].type].capacity_qps;
    }
  }
  for (size_t i = 0; i < c.types.size(); ++i) {
    for (int u = 0; u < m; ++u) {
      for (int t = u + c.types[i].launch_units; t < m; ++t) {
        capacity[t] += p.launches[i][u] * c.types[i].capacity_qps;
      }
    }
  }
  return capacity;
}

// The cheapest whole plan covering every unit `must_cover` marks.
double BruteForce(const Case& c, const std::vector<bool>& must_cover, int max_per_slot) {
  const int m = static_cast<int>(c.forecast.size());
  const size_t slots = c.types.size() * m;
  double best = std::numeric_limits<double>::infinity();
  FullPlan p;
  p.launches.assign(c.types.size(), std::vector<int>(m, 0));
  for (int keep_mask = 0; keep_mask < (1 << c.running.size()); ++keep_mask) {
    p.keep.assign(c.running.size(), false);
    for (size_t r = 0; r < c.running.size(); ++r) p.keep[r] = (keep_mask >> r) & 1;
    std::function<void(size_t)> fill = [&](size_t slot) {
      if (slot == slots) {
        std::vector<double> capacity = CapacityOf(c, p);
        for (int t = 0; t < m; ++t) {
          if (must_cover[t] && capacity[t] < c.forecast[t] - 1e-9) return;
        }
        best = std::min(best, CostOf(c, p));
        return;
      }
      for (int n = 0; n <= max_per_slot; ++n) {
        p.launches[slot / m][slot % m] = n;
        fill(slot + 1);
      }
      p.launches[slot / m][slot % m] = 0;
    };
    fill(0);
  }
  return best;
}

TEST(MarkProvisioningTest, NearTheBruteForceOptimumOnSmallCases) {
  std::mt19937 rng(7);
  auto pick = [&](std::vector<double> from) {
    return from[std::uniform_int_distribution<size_t>(0, from.size() - 1)(rng)];
  };
  std::vector<double> ratios;
  for (int trial = 0; trial < 60; ++trial) {
    Case c;
    const int m = 4;
    for (int t = 0; t < m; ++t) c.forecast.push_back(pick({0, 15, 30, 45, 60}));
    for (int i = 0; i < 2; ++i) {
      c.types.push_back(Type("t", pick({25, 40}), pick({1, 2, 3, 4}),
                             static_cast<int>(pick({0, 1})), pick({0, 2}),
                             static_cast<int>(pick({1, 2}))));
    }
    const int running = static_cast<int>(pick({0, 1, 2}));
    for (int r = 0; r < running; ++r) {
      c.running.push_back({r, static_cast<int>(pick({0, 1})), static_cast<int>(pick({0, 1, 2})),
                           0});
    }
    auto plan = PlanProvisioning(c.forecast, c.types, c.running);
    ASSERT_TRUE(plan.ok()) << plan.status();
    // The greedy's plan as a whole plan, scored like the brute force's.
    FullPlan greedy;
    greedy.keep.assign(c.running.size(), false);
    greedy.launches.assign(c.types.size(), std::vector<int>(m, 0));
    for (int id : plan->keep) greedy.keep[id] = true;
    for (int type : plan->launch_now) ++greedy.launches[type][0];
    for (const auto& later : plan->launch_later) ++greedy.launches[later.type][later.launch_at];
    std::vector<double> capacity = CapacityOf(c, greedy);
    std::vector<bool> covered(m);
    for (int t = 0; t < m; ++t) {
      // Every unit is served but those it reports uncovered, and those are
      // out of any plan's reach.
      covered[t] = plan->uncovered_qps[t] == 0;
      EXPECT_GE(capacity[t] + plan->uncovered_qps[t], c.forecast[t] - 1e-9) << trial;
    }
    const double optimum = BruteForce(c, covered, 3);
    std::vector<bool> everything(m, true);
    EXPECT_EQ(BruteForce(c, everything, 3) < std::numeric_limits<double>::infinity(),
              std::all_of(covered.begin(), covered.end(), [](bool b) { return b; }))
        << "trial " << trial << ": it left a unit uncovered that some plan covers";
    const double cost = CostOf(c, greedy);
    ASSERT_GE(cost, optimum - 1e-9) << trial;
    ratios.push_back(optimum > 0 ? cost / optimum : 1.0);
  }
  std::sort(ratios.begin(), ratios.end());
  const double median = ratios[ratios.size() / 2], worst = ratios.back();
  const auto optimal = std::count_if(ratios.begin(), ratios.end(),
                                     [](double r) { return r <= 1 + 1e-9; });
  std::printf("greedy cost / optimum over %zu cases: %td optimal, median %.3f, worst %.3f\n",
              ratios.size(), optimal, median, worst);
  // Greedy over the run of short units only, it cannot see that a worker
  // it launches for a short run keeps costing afterwards (MArk's heuristic,
  // not an optimiser): on these cases it is optimal in most and within
  // 1.5× in all.
  EXPECT_LE(median, 1.0 + 1e-9);
  EXPECT_LE(worst, 1.5 + 1e-9);
}

}  // namespace
}  // namespace maitre::policy
