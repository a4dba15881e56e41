#include "core/timer_thread.h"

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <string>

#include "gtest/gtest.h"

namespace maitre {
namespace {

// Waits (in real time, bounded) until `pred` holds.
template <typename Pred>
bool Eventually(Pred pred) {
  for (int i = 0; i < 5000 && !pred(); ++i) absl::SleepFor(absl::Milliseconds(1));
  return pred();
}

TEST(TimerThreadTest, RunsEachClosureAtItsTimeInTimeOrder) {
  ManualClock clock(0);
  TimerThread timer(&clock);
  absl::Mutex mu;
  std::string order;
  auto mark = [&](char c) {
    return [&, c] {
      absl::MutexLock lock(&mu);
      order.push_back(c);
    };
  };
  timer.Schedule(30, mark('c'));
  timer.Schedule(10, mark('a'));
  timer.Schedule(20, mark('b'));
  timer.Schedule(20, mark('B'));  // same time: scheduling order
  absl::SleepFor(absl::Milliseconds(20));
  {
    absl::MutexLock lock(&mu);
    EXPECT_EQ(order, "") << "nothing is due before its time";
  }
  auto order_is = [&](const std::string& want) {
    return Eventually([&] {
      absl::MutexLock lock(&mu);
      return order == want;
    });
  };
  clock.Set(20);
  EXPECT_TRUE(order_is("abB"));
  EXPECT_EQ(timer.pending(), 1u);
  clock.Set(30);
  EXPECT_TRUE(order_is("abBc"));
}

TEST(TimerThreadTest, AnEarlierEntryWakesTheSleepingThread) {
  TimerThread timer(SteadyClock::Get());
  std::atomic<int> fired{0};
  const Nanos now = SteadyClock::Get()->Now();
  timer.Schedule(now + 3600 * kSecond, [&] { fired += 100; });
  timer.Schedule(now + kMillisecond, [&] { ++fired; });
  EXPECT_TRUE(Eventually([&] { return fired.load() == 1; }));
  EXPECT_EQ(timer.pending(), 1u);
}

TEST(TimerThreadTest, APastTimeRunsAtOnceAndStoppingDropsTheRest) {
  std::atomic<int> fired{0};
  {
    ManualClock clock(100);
    TimerThread timer(&clock);
    timer.Schedule(50, [&] { ++fired; });
    EXPECT_TRUE(Eventually([&] { return fired.load() == 1; }));
    timer.Schedule(1000, [&] { fired += 100; });
  }
  EXPECT_EQ(fired.load(), 1);
}

TEST(TimerThreadTest, ACancelledClosureNeverRunsAndLeavesNothingBehind) {
  ManualClock clock(0);
  TimerThread timer(&clock);
  std::atomic<int> fired{0};
  const TimerThread::Handle dropped = timer.Schedule(10, [&] { fired += 100; });
  const TimerThread::Handle same_time = timer.Schedule(10, [&] { ++fired; });
  timer.Schedule(20, [&] { fired += 10; });
  timer.Cancel(dropped);
  EXPECT_EQ(timer.pending(), 2u);
  clock.Set(10);
  ASSERT_TRUE(Eventually([&] { return fired.load() == 1; }));
  // Cancelling what already ran, twice, or a default handle changes nothing.
  timer.Cancel(same_time);
  timer.Cancel(dropped);
  timer.Cancel(TimerThread::Handle{});
  EXPECT_EQ(timer.pending(), 1u);
  clock.Set(20);
  EXPECT_TRUE(Eventually([&] { return fired.load() == 11; }));
  EXPECT_EQ(timer.pending(), 0u);
}

// Closures run at real-time priority when the process may raise it (root in
// CI), and the thread keeps its ordinary policy with an error otherwise.
TEST(TimerThreadTest, RealtimePriorityReachesTheThreadThatRunsClosures) {
  ManualClock clock(0);
  TimerThread timer(&clock);
  const absl::Status raised = timer.RaiseToRealtime();
  std::atomic<int> policy{-1};
  timer.Schedule(0, [&] {
    int p = -1;
    sched_param param{};
    pthread_getschedparam(pthread_self(), &p, &param);
    policy.store(p);
  });
  ASSERT_TRUE(Eventually([&] { return policy.load() != -1; }));
  if (raised.ok()) {
    EXPECT_EQ(policy.load(), SCHED_FIFO);
  } else {
    EXPECT_EQ(raised.code(), absl::StatusCode::kPermissionDenied) << raised;
    EXPECT_EQ(policy.load(), SCHED_OTHER);
  }
}

}  // namespace
}  // namespace maitre
