#include "core/clock.h"

#include <thread>

#include <gtest/gtest.h>

namespace maitre {
namespace {

TEST(ManualClockTest, MovesOnlyWhenTold) {
  ManualClock clock(100);
  EXPECT_EQ(clock.Now(), 100);
  clock.Advance(50);
  EXPECT_EQ(clock.Now(), 150);
  clock.Set(7);
  EXPECT_EQ(clock.Now(), 7);
}

TEST(ManualClockTest, AwaitReturnsWhenTimeReachesDeadline) {
  ManualClock clock(0);
  absl::Mutex mu;
  std::thread advancer([&] {
    for (int i = 0; i < 10; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      clock.Advance(kSecond);
    }
  });
  {
    absl::MutexLock lock(&mu);
    bool never = false;
    EXPECT_FALSE(clock.AwaitWithDeadline(&mu, absl::Condition(&never), 5 * kSecond));
    EXPECT_GE(clock.Now(), 5 * kSecond);
  }
  advancer.join();
}

TEST(ManualClockTest, AwaitReturnsWhenConditionHolds) {
  ManualClock clock(0);
  absl::Mutex mu;
  bool ready = false;
  std::thread setter([&] {
    absl::MutexLock lock(&mu);
    ready = true;
  });
  {
    absl::MutexLock lock(&mu);
    EXPECT_TRUE(clock.AwaitWithDeadline(&mu, absl::Condition(&ready), kInfiniteFuture));
  }
  setter.join();
  EXPECT_EQ(clock.Now(), 0);
}

TEST(ClockTest, SleepUntilStopsEarlyOnRequest) {
  ManualClock clock(0);
  StopSignal stop;
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_TRUE(stop.Request());
  });
  EXPECT_TRUE(clock.SleepUntil(kSecond, &stop));
  stopper.join();
  EXPECT_FALSE(stop.Request());
}

// The request wakes the sleeper itself: a sleep of an hour returns as soon
// as it is stopped (if it did not, the test would time out).
TEST(SteadyClockTest, SleepUntilWakesOnStop) {
  SteadyClock* clock = SteadyClock::Get();
  StopSignal stop;
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    stop.Request();
  });
  EXPECT_TRUE(clock->SleepUntil(clock->Now() + 3600 * kSecond, &stop));
  stopper.join();
}

TEST(SteadyClockTest, IsMonotone) {
  SteadyClock* clock = SteadyClock::Get();
  Nanos a = clock->Now();
  EXPECT_FALSE(clock->SleepUntil(a + kMillisecond));
  EXPECT_GE(clock->Now(), a + kMillisecond);
}

}  // namespace
}  // namespace maitre
