// Behaviour of the CostStore's calls on one registry file, and that what a
// run paid survives reopening it.
#include "controller/registry/cost_store.h"

#include <memory>

#include "controller/registry/registry.h"
#include "controller/registry/registry_test_util.h"
#include "gtest/gtest.h"

namespace maitre::registry {
namespace {


class CostStoreTest : public test_util::RegistryFileTest {
 protected:
  CostStore& costs() { return registry_->costs(); }
};

TEST_F(CostStoreTest, ARunSavedAgainReplacesItsLinesAndEarlierRunsAreSummedByType) {
  ASSERT_TRUE(costs().SaveRun(1000, {{"cpu-1", "on-demand", 0.5, 2}}).ok());
  // The same run a minute later: its line is replaced, not added to.
  ASSERT_TRUE(costs().SaveRun(1000, {{"cpu-1", "on-demand", 0.75, 3},
                                     {"spot-1", "spot", 0.1, 1}}).ok());
  ASSERT_TRUE(costs().SaveRun(2000, {{"cpu-1", "on-demand", 0.25, 1}}).ok());
  Open();  // survives reopening

  const CostHistory before_third = costs().Before(3000);
  EXPECT_EQ(before_third.runs, 2);
  EXPECT_EQ(before_third.first_run_unix_ms, 1000);
  ASSERT_EQ(before_third.lines.size(), 2u);
  EXPECT_EQ(before_third.lines[0].type, "cpu-1");
  EXPECT_DOUBLE_EQ(before_third.lines[0].cost, 1.0);
  EXPECT_EQ(before_third.lines[0].workers, 4);
  EXPECT_EQ(before_third.lines[1].type, "spot-1");
  EXPECT_EQ(before_third.lines[1].market, "spot");
  EXPECT_DOUBLE_EQ(before_third.lines[1].cost, 0.1);

  // A run does not count itself, nor the runs after it.
  const CostHistory before_second = costs().Before(2000);
  EXPECT_EQ(before_second.runs, 1);
  ASSERT_EQ(before_second.lines.size(), 2u);
  EXPECT_DOUBLE_EQ(before_second.lines[0].cost, 0.75);
  EXPECT_EQ(costs().Before(1000).runs, 0);
  EXPECT_TRUE(costs().Before(1000).lines.empty());
}

TEST_F(CostStoreTest, AMalformedLineIsRefusedAndNothingOfTheRunIsSaved) {
  EXPECT_EQ(costs().SaveRun(1000, {{"cpu-1", "on-demand", 0.5, 1}, {"cpu-2", "on-demand", -1, 1}})
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(costs().SaveRun(1000, {{"", "on-demand", 0.5, 1}}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(costs().Before(2000).runs, 0);
}

}  // namespace
}  // namespace maitre::registry
