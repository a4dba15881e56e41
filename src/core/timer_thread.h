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
#include <queue>
#include <thread>
#include <vector>

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

  // Runs `fire` at `at` (at once if `at` has passed). Closures due at the
  // same time run in the order they were scheduled.
  void Schedule(Nanos at, absl::AnyInvocable<void() &&> fire);
  size_t pending() const;

 private:
  struct Entry {
    Nanos at;
    uint64_t seq;
    // Mutable so the closure can be moved out of the heap's const top().
    mutable absl::AnyInvocable<void() &&> fire;
    bool operator>(const Entry& other) const {
      return at != other.at ? at > other.at : seq > other.seq;
    }
  };
  void Loop();

  const Clock* const clock_;
  mutable absl::Mutex mu_;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<>> entries_ ABSL_GUARDED_BY(mu_);
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace maitre
