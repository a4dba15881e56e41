#include "controller/dataplane/service_level.h"

#include <gtest/gtest.h>

namespace maitre::controller {
namespace {

TEST(ServiceLevelTest, CountsAnsweredAndWithinPerAppUntilTaken) {
  ServiceLevel level;
  level.Add("fashion", true);
  level.Add("fashion", false);
  level.Add("fashion", true);
  level.Add("other", false);
  auto taken = level.Take();
  EXPECT_EQ(taken["fashion"].answered, 3);
  EXPECT_EQ(taken["fashion"].within, 2);
  EXPECT_EQ(taken["other"].answered, 1);
  EXPECT_EQ(taken["other"].within, 0);
  EXPECT_TRUE(level.Take().empty());
}

}  // namespace
}  // namespace maitre::controller
