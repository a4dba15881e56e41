#include "runtime/host_speed.h"

#include "gtest/gtest.h"

namespace maitre::runtime {
namespace {

TEST(HostSpeedProbeTest, SlowdownIsRelativeToTheFastestTimeSeen) {
  HostSpeedProbe probe(SteadyClock::Get());
  EXPECT_EQ(probe.Slowdown(5.0), 1.0) << "nothing measured yet";
  double first = probe.Measure();
  ASSERT_GT(first, 0);
  double fastest = first;
  for (int i = 0; i < 4; ++i) fastest = std::min(fastest, probe.Measure());
  EXPECT_DOUBLE_EQ(probe.Slowdown(fastest), 1.0);
  EXPECT_DOUBLE_EQ(probe.Slowdown(1.5 * fastest), 1.5);
  EXPECT_DOUBLE_EQ(probe.Slowdown(0.5 * fastest), 1.0) << "never below 1";
}

}  // namespace
}  // namespace maitre::runtime
