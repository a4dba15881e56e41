#include "policy/latency_table.h"

#include <gtest/gtest.h>

#include "policy/testing/test_profiles.h"

namespace maitre::policy {
namespace {

TEST(LatencyTableTest, TabulatesAndSearches) {
  LatencyTable t = LatencyTable::Build(testing::LinearProfile(4, 2), 16);
  ASSERT_FALSE(t.empty());
  EXPECT_EQ(t.P50(1), 6 * kMillisecond);
  EXPECT_EQ(t.P50(8), 20 * kMillisecond);
  EXPECT_EQ(t.P99(2), 8'800'000);
  EXPECT_EQ(t.P50(17), 38 * kMillisecond);  // one past the cap is tabulated
  EXPECT_EQ(t.P50(40), 84 * kMillisecond);  // beyond that, the profile extrapolates
  EXPECT_EQ(t.MaxRowsWithin(20 * kMillisecond, false), 8);
  EXPECT_EQ(t.MaxRowsWithin(20 * kMillisecond - 1, false), 7);
  EXPECT_EQ(t.MaxRowsWithin(40 * kMillisecond, true), 16);
  EXPECT_EQ(t.MaxRowsWithin(kSecond, false), 16);  // capped at max_rows
  EXPECT_EQ(t.MaxRowsWithin(5 * kMillisecond, false), 0);
}

TEST(LatencyTableTest, MonotoneEvenWhenTheProfileDips) {
  auto p = Profile::Create({{1, 5, 6}, {2, 4, 5}, {4, 9, 10}}, 0, 0);
  ASSERT_TRUE(p.ok());
  LatencyTable t = LatencyTable::Build(*p, 4);
  EXPECT_EQ(t.P50(2), 5 * kMillisecond);
  EXPECT_EQ(t.MaxRowsWithin(5 * kMillisecond, false), 2);
}

TEST(LatencyTableTest, EmptyWithoutProfile) {
  LatencyTable t = LatencyTable::Build(Profile(), 8);
  EXPECT_TRUE(t.empty());
  EXPECT_EQ(t.MaxRowsWithin(kSecond, true), 0);
}

TEST(LatencyTableTest, PrefixHelpers) {
  std::vector<QueuedQuery> q = {{5, 10, 1}, {2, 10, 1}, {7, 30, 1}};
  EXPECT_EQ(ExpiredPrefix(q, 9), 0);
  EXPECT_EQ(ExpiredPrefix(q, 10), 2);
  EXPECT_EQ(ExpiredPrefix(q, 31), 3);
  EXPECT_EQ(OldestArrival(q, 1), 5);
  EXPECT_EQ(OldestArrival(q, 3), 2);
}

}  // namespace
}  // namespace maitre::policy
