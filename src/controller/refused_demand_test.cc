#include "controller/refused_demand.h"

#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace maitre::controller {
namespace {

TEST(RefusedDemandTest, CountsPerAppUntilTaken) {
  RefusedDemand refused;
  refused.Add("fashion", 8);
  refused.Add("fashion", 1);
  refused.Add("other", 2);
  auto taken = refused.Take();
  EXPECT_EQ(taken, (std::map<std::string, int64_t>{{"fashion", 9}, {"other", 2}}));
  EXPECT_TRUE(refused.Take().empty());
}

TEST(RefusedDemandTest, CountsFromManyThreads) {
  RefusedDemand refused;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) refused.Add("a", 1);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(refused.Take()["a"], 4000);
}

TEST(ShareRefusedTest, InProportionToWhatEachInstanceWasSent) {
  std::vector<ServingInstance> instances = {
      {"fashion", 300}, {"fashion", 100}, {"other", 50}, {"idle-app", 0}};
  auto shares = ShareRefused({{"fashion", 200}}, instances);
  ASSERT_EQ(shares.size(), 2u);
  EXPECT_DOUBLE_EQ(shares[0], 150);
  EXPECT_DOUBLE_EQ(shares[1], 50);
}

TEST(ShareRefusedTest, EvenlyWhenNoInstanceWasSentAnything) {
  auto shares = ShareRefused({{"a", 90}}, {{"a", 0}, {"a", 0}, {"a", 0}});
  for (size_t i = 0; i < 3; ++i) EXPECT_DOUBLE_EQ(shares[i], 30);
}

TEST(ShareRefusedTest, AnAppWithNoServingInstanceGetsNothing) {
  EXPECT_TRUE(ShareRefused({{"a", 90}}, {{"b", 10}}).empty());
}

}  // namespace
}  // namespace maitre::controller
