#include "worker/registration_cpu.h"

#include <gtest/gtest.h>

namespace maitre::worker {
namespace {

TEST(RegistrationCpuTest, CountsOnlyTheCpuThatPassesDuringJobs) {
  double cpu = 10;
  RegistrationCpu tally([&cpu] { return cpu; });
  cpu = 12;  // serving work: not counted
  EXPECT_DOUBLE_EQ(tally.Seconds(), 0);
  tally.Run([&] { cpu = 15; });
  EXPECT_DOUBLE_EQ(tally.Seconds(), 3);
  cpu = 20;
  EXPECT_DOUBLE_EQ(tally.Seconds(), 3);
  tally.Run([&] { cpu = 21.5; });
  EXPECT_DOUBLE_EQ(tally.Seconds(), 4.5);
}

// A profile can outlast a report interval: each interval's reading must
// already leave out the part of the job that ran in it.
TEST(RegistrationCpuTest, AJobInProgressCountsUpToNow) {
  double cpu = 0;
  RegistrationCpu tally([&cpu] { return cpu; });
  tally.Run([&] {
    cpu = 2;
    EXPECT_DOUBLE_EQ(tally.Seconds(), 2);
    cpu = 5;
    EXPECT_DOUBLE_EQ(tally.Seconds(), 5);
  });
  cpu = 9;
  EXPECT_DOUBLE_EQ(tally.Seconds(), 5);
}

}  // namespace
}  // namespace maitre::worker
