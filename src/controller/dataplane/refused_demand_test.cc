#include "controller/dataplane/refused_demand.h"

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

}  // namespace
}  // namespace maitre::controller
