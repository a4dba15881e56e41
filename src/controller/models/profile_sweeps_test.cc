#include "controller/models/profile_sweeps.h"

#include <gtest/gtest.h>

namespace maitre::controller {
namespace {

Profile AtBatchOne(double ms) {
  return *Profile::Create({{1, ms, 2 * ms}, {8, 4 * ms, 6 * ms}}, /*load_ms=*/10,
                          /*memory_mb=*/5);
}

TEST(SweepRuleTest, OneSweepIsFinalAtOnce) {
  SweepRule rule = SweepRule::ForMinimum(1);
  EXPECT_EQ(rule.max_sweeps, 1);
  EXPECT_EQ(rule.SweepsLeftAfterFirst(), 0);
  EXPECT_EQ(SweepRule::ForMinimum(0).SweepsLeftAfterFirst(), 0);
}

TEST(SweepRuleTest, KeepsSweepingUntilTheFastestIsSeenAgain) {
  SweepRule rule = SweepRule::ForMinimum(3);
  ASSERT_EQ(rule.max_sweeps, 6);
  EXPECT_EQ(rule.SweepsLeftAfterFirst(), 5);
  // Sweep 2 agrees, but the minimum is 3.
  EXPECT_EQ(rule.SweepsLeftAfter(2, AtBatchOne(0.20), AtBatchOne(0.21)), 4);
  // Sweep 3 found a faster stretch (0.153 against 0.206): not yet confirmed.
  EXPECT_EQ(rule.SweepsLeftAfter(3, AtBatchOne(0.206), AtBatchOne(0.153)), 3);
  // Slower by more than 10%: neither.
  EXPECT_EQ(rule.SweepsLeftAfter(4, AtBatchOne(0.153), AtBatchOne(0.232)), 2);
  // Within 10% either way: final.
  EXPECT_EQ(rule.SweepsLeftAfter(4, AtBatchOne(0.153), AtBatchOne(0.165)), 0);
  EXPECT_EQ(rule.SweepsLeftAfter(3, AtBatchOne(0.153), AtBatchOne(0.140)), 0);
}

TEST(SweepRuleTest, FinalAtTheMaximumWhateverTheSweepsSaid) {
  SweepRule rule = SweepRule::ForMinimum(3);
  EXPECT_EQ(rule.SweepsLeftAfter(6, AtBatchOne(0.1), AtBatchOne(0.3)), 0);
  EXPECT_EQ(rule.SweepsLeftAfter(7, AtBatchOne(0.1), AtBatchOne(0.3)), 0);
}

TEST(SweepRuleTest, OutOfTimeOnceTheBoundHasPassed) {
  SweepRule rule;
  rule.settle_within = 600 * kSecond;
  EXPECT_FALSE(rule.OutOfTime(0));
  EXPECT_FALSE(rule.OutOfTime(599 * kSecond));
  EXPECT_TRUE(rule.OutOfTime(600 * kSecond));
  EXPECT_TRUE(rule.OutOfTime(3600 * kSecond));
}

}  // namespace
}  // namespace maitre::controller
