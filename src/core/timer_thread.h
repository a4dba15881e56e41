// Runs each scheduled closure once its time comes, in time order. Used
// where an answer must leave at a deadline whatever else the process is
// doing: a timer thread sleeps until the earliest time, so on a busy host it
// is a woken sleeper the scheduler runs promptly, not a task queued behind a
// burst of other completions.
//
// A timer may have several lanes, each a thread with its own queue. A
// closure is then scheduled on every lane and runs once, on the first lane
// to reach it. On this project's VMs a thread now and then does not run for
// 3-13 ms however idle the host and whatever its priority (a SCHED_FIFO
// thread sleeping 200 us overslept by more than 2 ms 55 times a minute on
// an idle host), while the two virtual cores stall independently (in 60 s,
// 87 and 162 such stalls; never both at once for more than 1.6 ms). Lanes
// pinned to different cores keep a closure on time through one core's
// stall: under gamma bursts, 504s more than 5 ms late fell from 3.7% to
// 0.6% with two (docs/experiments.md, real-vs-sim).
//
// Closures run on a lane's thread, one at a time per lane, and must be
// short.
//
// Thread-safety: thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "core/clock.h"

namespace maitre {

class TimerThread {
 public:
  explicit TimerThread(const Clock* clock, int lanes = 1);
  // Stops the lanes; closures not yet due are dropped without running.
  ~TimerThread();

  // Puts every lane ahead of every ordinary thread of the host (SCHED_FIFO
  // at the lowest real-time priority), so that on a busy host a closure
  // runs when it is due rather than after the scheduler gets round to a
  // woken sleeper. Closures are short, and the kernel's real-time
  // throttling bounds what a runaway one could take. Needs CAP_SYS_NICE
  // (root, or an RLIMIT_RTPRIO above 0); without it the lanes stay as they
  // were and the error says so.
  absl::Status RaiseToRealtime();
  // Pins lane i to core cpus[i] (lanes beyond the list stay unpinned).
  absl::Status PinLanes(const std::vector<int>& cpus);
  int lanes() const { return static_cast<int>(lanes_.size()); }

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
  // Entries still held by the fullest lane (a closure another lane already
  // ran stays on the others until they reach its time).
  size_t pending() const;

 private:
  struct Lane {
    mutable absl::Mutex mu;
    // Ordered by (time, sequence number): the earliest first, ties in order.
    std::map<std::pair<Nanos, uint64_t>, absl::AnyInvocable<void() &&>> entries
        ABSL_GUARDED_BY(mu);
    bool stopping ABSL_GUARDED_BY(mu) = false;
    std::thread thread;
  };

  void Loop(Lane& lane);

  const Clock* const clock_;
  std::atomic<uint64_t> next_seq_{1};
  std::vector<std::unique_ptr<Lane>> lanes_;
};

}  // namespace maitre
