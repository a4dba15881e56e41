// The cluster's cost split among apps, on a case computed by hand.
#include "controller/provision/app_cost_split.h"

#include <gtest/gtest.h>

namespace maitre::controller {
namespace {

// $0.30 of on-demand workers' lives at $0.36/h now; a burst type's $0.10 of
// lives at $0.036/h, and 50 queries charged $0.001 each.
CostReport Report() {
  CostReport r;
  r.lines.push_back({"cpu", "on-demand", 1, 0, 0.30, 0.36});
  CostLine burst{"burst", "burst", 1, 0, 0.15, 0.036};
  burst.requests = 50;
  burst.request_cost = 0.05;
  r.lines.push_back(burst);
  r.cost = 0.45;
  r.per_hour = 0.396;
  return r;
}

TEST(AppCostSplitTest, LivesByComputeShareAndRequestsByApp) {
  std::map<std::string, AppUsed> usage;
  usage["a"].compute_s = 3;
  usage["a"].requests_by_type["burst"] = 20;
  usage["b"].compute_s = 1;
  usage["b"].requests_by_type["burst"] = 25;
  usage["c"];  // seen, nothing computed

  const AppCostSplit split = SplitCostByApp(Report(), usage);
  ASSERT_EQ(split.apps.size(), 3u);
  const AppCost& a = split.apps[0];
  EXPECT_EQ(a.app, "a");
  EXPECT_DOUBLE_EQ(a.share, 0.75);
  EXPECT_DOUBLE_EQ(a.cost, 0.75 * 0.40 + 0.020);  // lives are $0.45 - $0.05
  EXPECT_DOUBLE_EQ(a.per_hour, 0.75 * 0.396);
  EXPECT_EQ(a.requests, 20);
  const AppCost& b = split.apps[1];
  EXPECT_DOUBLE_EQ(b.share, 0.25);
  EXPECT_DOUBLE_EQ(b.cost, 0.25 * 0.40 + 0.025);
  EXPECT_DOUBLE_EQ(b.per_hour, 0.25 * 0.396);
  const AppCost& c = split.apps[2];
  EXPECT_EQ(c.share, 0);
  EXPECT_EQ(c.cost, 0);
  EXPECT_EQ(c.per_hour, 0);
  // 5 of the 50 charged queries are no app's.
  EXPECT_DOUBLE_EQ(split.unattributed_cost, 0.005);
  EXPECT_EQ(split.unattributed_per_hour, 0);
  EXPECT_DOUBLE_EQ(a.cost + b.cost + split.unattributed_cost, 0.45);
}

TEST(AppCostSplitTest, WithNoUsageEverythingIsUnattributed) {
  const AppCostSplit split = SplitCostByApp(Report(), {});
  EXPECT_TRUE(split.apps.empty());
  EXPECT_DOUBLE_EQ(split.unattributed_cost, 0.45);
  EXPECT_DOUBLE_EQ(split.unattributed_per_hour, 0.396);
}

}  // namespace
}  // namespace maitre::controller
