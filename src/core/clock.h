// The one source of time (docs/architecture.md, "Policies and one clock"). No
// module reads std::chrono clocks to decide or to wait: it is handed a Clock.
// Production uses SteadyClock; tests use ManualClock and move time by hand.
//
// Thread-safety: every Clock is safe to use from many threads.
#pragma once

#include <atomic>

#include "absl/synchronization/mutex.h"
#include "core/stop_signal.h"
#include "core/time.h"

namespace maitre {

class Clock {
 public:
  virtual ~Clock() = default;

  virtual Nanos Now() const = 0;

  // Called with *mu held. Returns, still holding *mu, once `cond` is true or
  // Now() >= deadline, whichever comes first. Returns whether `cond` held.
  // Mechanisms wait through this so that a manual clock can drive them.
  virtual bool AwaitWithDeadline(absl::Mutex* mu, const absl::Condition& cond,
                                 Nanos deadline) const = 0;

  // Sleeps until Now() >= deadline, or until *stop is requested (may be
  // null). Returns true if it woke because of *stop.
  bool SleepUntil(Nanos deadline, const StopSignal* stop = nullptr) const;
};

// The process's monotonic clock. Its epoch is arbitrary (boot time).
class SteadyClock final : public Clock {
 public:
  Nanos Now() const override;
  bool AwaitWithDeadline(absl::Mutex* mu, const absl::Condition& cond,
                         Nanos deadline) const override;
  // A shared instance; SteadyClock has no state, so sharing it is harmless.
  static SteadyClock* Get();
};

// A clock that moves only when told to. Waiters poll it every millisecond of
// real time, so a test that advances it wakes them promptly.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(Nanos start = 0) : now_(start) {}
  Nanos Now() const override { return now_.load(std::memory_order_acquire); }
  bool AwaitWithDeadline(absl::Mutex* mu, const absl::Condition& cond,
                         Nanos deadline) const override;
  void Advance(Nanos by) { now_.fetch_add(by, std::memory_order_acq_rel); }
  void Set(Nanos t) { now_.store(t, std::memory_order_release); }

 private:
  std::atomic<Nanos> now_;
};

}  // namespace maitre
