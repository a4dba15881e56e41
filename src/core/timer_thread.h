// One thread that runs each scheduled closure once its time comes, in time
// order. Used where an answer must leave at a deadline whatever else the
// process is doing: the thread sleeps until the earliest time, so on a busy
// host it is a woken sleeper the scheduler runs promptly, not a task queued
// behind a burst of other completions.
//
// Closures run on the timer's thread, one at a time, and must be short.
//
// Thread-safety: thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <thread>
#include <utility>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "core/clock.h"

namespace maitre {

class TimerThread {
 public:
  explicit TimerThread(const Clock* clock);
  // Stops the thread; closures not yet due are dropped without running.
  ~TimerThread();

  // Puts the thread ahead of every ordinary thread of the host (SCHED_FIFO
  // at the lowest real-time priority), so that on a busy host a closure
  // runs when it is due rather than after the scheduler gets round to a
  // woken sleeper. Closures are short, and the kernel's real-time
  // throttling bounds what a runaway one could take. Needs CAP_SYS_NICE
  // (root, or an RLIMIT_RTPRIO above 0); without it the thread stays as it
  // was and the error says so.
  absl::Status RaiseToRealtime();

  // What Cancel needs: the time a closure was scheduled for and its
  // sequence number (never 0).
  struct Handle {
    Nanos at = 0;
    uint64_t seq = 0;
  };

  // Runs `fire` at `at` (at once if `at` has passed). Closures due at the
  // same time run in the order they were scheduled.
  Handle Schedule(Nanos at, absl::AnyInvocable<void() &&> fire);
  // Drops the closure unless it has started; a no-op for one already run or
  // dropped. Cancelling what is no longer needed keeps the timer's memory
  // to what is still pending: a query answered in a millisecond would
  // otherwise hold its entry until its deadline (30 s by default).
  void Cancel(Handle handle);
  size_t pending() const;

 private:
  void Loop();

  const Clock* const clock_;
  mutable absl::Mutex mu_;
  // Ordered by (time, sequence number): the earliest first, ties in order.
  std::map<std::pair<Nanos, uint64_t>, absl::AnyInvocable<void() &&>> entries_
      ABSL_GUARDED_BY(mu_);
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 1;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace maitre
