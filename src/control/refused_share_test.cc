// How refused demand is spread over the instances serving its app.
#include "control/refused_share.h"

#include <gtest/gtest.h>

namespace maitre::control {
namespace {

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
}  // namespace maitre::control
