#include "worker/registration_cpu.h"

#include <gtest/gtest.h>

namespace maitre::worker {
namespace {

// Hand-set CPU clocks: the process's, and the job thread's.
struct FakeCpu {
  double process = 0;
  double thread = 0;
  int cores = 1;
  RegistrationCpu::Clocks Clocks() {
    return {[this] { return process; }, [this] { return [this] { return thread; }; },
            [this] { return cores; }};
  }
};

TEST(RegistrationCpuTest, CountsOnlyTheCpuThatPassesDuringJobs) {
  FakeCpu cpu{10, 0};
  RegistrationCpu tally(cpu.Clocks());
  cpu.process = 12;  // serving work: not counted
  EXPECT_DOUBLE_EQ(tally.Seconds(), 0);
  tally.Run([&] {
    cpu.process += 3;
    cpu.thread += 3;
  });
  EXPECT_DOUBLE_EQ(tally.Seconds(), 3);
  cpu.process = 20;
  EXPECT_DOUBLE_EQ(tally.Seconds(), 3);
  tally.Run([&] {
    cpu.process += 1.5;
    cpu.thread += 1.5;
  });
  EXPECT_DOUBLE_EQ(tally.Seconds(), 4.5);
}

// A profile can outlast a report interval: each interval's reading must
// already leave out the part of the job that ran in it.
TEST(RegistrationCpuTest, AJobInProgressCountsUpToNow) {
  FakeCpu cpu;
  RegistrationCpu tally(cpu.Clocks());
  tally.Run([&] {
    cpu.process = cpu.thread = 2;
    EXPECT_DOUBLE_EQ(tally.Seconds(), 2);
    cpu.process = cpu.thread = 5;
    EXPECT_DOUBLE_EQ(tally.Seconds(), 5);
  });
  cpu.process = 9;
  EXPECT_DOUBLE_EQ(tally.Seconds(), 5);
}

// Replicas serving while a job runs use the process's CPU too; that is
// serving, not registration.
TEST(RegistrationCpuTest, ServingBesideAJobIsNotCounted) {
  FakeCpu cpu;
  RegistrationCpu tally(cpu.Clocks());
  tally.Run([&] {
    cpu.thread = 0.2;   // the job's own work
    cpu.process = 1.0;  // ... and 0.8 s of serving on another thread
    EXPECT_DOUBLE_EQ(tally.Seconds(), 0.2);
  });
  EXPECT_DOUBLE_EQ(tally.Seconds(), 0.2);
}

// On a worker of several cores a job's helper threads work beside its own
// thread: up to cores × its thread's time counts, never more than the
// process used.
TEST(RegistrationCpuTest, AJobMayUseEveryCoreItsThreadMayRunOn) {
  FakeCpu cpu;
  cpu.cores = 2;
  RegistrationCpu tally(cpu.Clocks());
  tally.Run([&] {
    cpu.thread = 1.0;
    cpu.process = 1.9;  // a parallel profile: helper threads used 0.9 s
    EXPECT_DOUBLE_EQ(tally.Seconds(), 1.9);
    cpu.thread = 1.5;
    cpu.process = 4.0;  // serial runs, serving beside them
    EXPECT_DOUBLE_EQ(tally.Seconds(), 3.0);
  });
}

}  // namespace
}  // namespace maitre::worker
