// What each app used: compute seconds by its share of each batch, and its
// queries charged by the request, by type.
#include "controller/provision/app_usage.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace maitre::controller {
namespace {

TEST(AppUsageTest, EachQueryCountsItsShareOfTheBatch) {
  AppUsage usage;
  usage.AddCompute("a", 4000, 2);  // a batch of 2 in 4 ms: 2 ms this query's
  usage.AddCompute("a", 3000, 1);
  usage.AddCompute("b", 1000, 0);  // no batch size reported: a batch of one
  usage.AddRequest("b", "burst");
  usage.AddRequest("b", "burst");
  usage.AddRequest("b", "other");

  const std::map<std::string, AppUsed> used = usage.Snapshot();
  ASSERT_EQ(used.size(), 2u);
  EXPECT_DOUBLE_EQ(used.at("a").compute_s, 0.005);
  EXPECT_EQ(used.at("a").requests(), 0);
  EXPECT_DOUBLE_EQ(used.at("b").compute_s, 0.001);
  EXPECT_EQ(used.at("b").requests(), 3);
  EXPECT_EQ(used.at("b").requests_by_type.at("burst"), 2);
  EXPECT_EQ(used.at("b").requests_by_type.at("other"), 1);
}

TEST(AppUsageTest, ConcurrentQueriesAreAllCounted) {
  AppUsage usage;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&usage, t] {
      for (int i = 0; i < 1000; ++i) {
        usage.AddCompute(t % 2 == 0 ? "a" : "b", 1000, 1);
        usage.AddRequest("a", "burst");
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const std::map<std::string, AppUsed> used = usage.Snapshot();
  // 2,000 queries of a millisecond each (a lost update loses one).
  EXPECT_NEAR(used.at("a").compute_s, 2.0, 1e-9);
  EXPECT_NEAR(used.at("b").compute_s, 2.0, 1e-9);
  EXPECT_EQ(used.at("a").requests(), 4000);
}

}  // namespace
}  // namespace maitre::controller
