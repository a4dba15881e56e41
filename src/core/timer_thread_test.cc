#include "core/timer_thread.h"

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"

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

// With two lanes every closure is queued on both and still runs exactly
// once; cancelling takes it off both.
TEST(TimerThreadTest, LanesRunEachClosureOnceAndCancelFromAll) {
  ManualClock clock(0);
  TimerThread timer(&clock, 2);
  ASSERT_EQ(timer.lanes(), 2);
  std::atomic<int> runs[20] = {};
  std::vector<TimerThread::Handle> handles;
  for (int i = 0; i < 20; ++i) {
    handles.push_back(timer.Schedule(10 + i % 3, [&runs, i] { runs[i].fetch_add(1); }));
  }
  timer.Cancel(handles[7]);
  EXPECT_EQ(timer.pending(), 19u);
  clock.Set(20);
  ASSERT_TRUE(Eventually([&] { return timer.pending() == 0; }));
  for (int i = 0; i < 20; ++i) EXPECT_EQ(runs[i].load(), i == 7 ? 0 : 1) << "closure " << i;
}

// A lane whose thread does not run (here: held inside a closure, as a
// stalled core would hold it) does not hold back a closure the other lane
// can run.
TEST(TimerThreadTest, OneStalledLaneDoesNotDelayTheOther) {
  ManualClock clock(0);
  TimerThread timer(&clock, 2);
  absl::Notification release;
  std::atomic<int> entered{0};
  std::atomic<int> later{0};
  // Whichever lane takes this first is stuck in it until released.
  timer.Schedule(10, [&] {
    entered.fetch_add(1);
    release.WaitForNotification();
  });
  timer.Schedule(20, [&] { later.fetch_add(1); });
  clock.Set(10);
  ASSERT_TRUE(Eventually([&] { return entered.load() == 1; }));
  clock.Set(20);
  EXPECT_TRUE(Eventually([&] { return later.load() == 1; }))
      << "the free lane ran the later closure while the other was stuck";
  release.Notify();
  ASSERT_TRUE(Eventually([&] { return timer.pending() == 0; }));
  EXPECT_EQ(entered.load(), 1);
  EXPECT_EQ(later.load(), 1);
}

TEST(TimerThreadTest, LanesPinToTheCoresGiven) {
  TimerThread timer(SteadyClock::Get(), 2);
  cpu_set_t allowed;
  ASSERT_EQ(sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  int first = 0;
  while (!CPU_ISSET(first, &allowed)) ++first;
  ASSERT_TRUE(timer.PinLanes({first, first}).ok());
  std::atomic<int> core{-1};
  timer.Schedule(0, [&] { core.store(sched_getcpu()); });
  ASSERT_TRUE(Eventually([&] { return core.load() != -1; }));
  EXPECT_EQ(core.load(), first);
  EXPECT_EQ(timer.PinLanes({CPU_SETSIZE + 1}).code(), absl::StatusCode::kInvalidArgument);
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
