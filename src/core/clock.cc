#include "core/clock.h"

#include <chrono>

namespace maitre {
namespace {

bool StopRequested(const std::atomic<bool>* stop) {
  return stop != nullptr && stop->load(std::memory_order_acquire);
}

bool StopRequestedThunk(void* stop) {
  return StopRequested(static_cast<const std::atomic<bool>*>(stop));
}

}  // namespace

bool Clock::SleepUntil(Nanos deadline, const std::atomic<bool>* stop) const {
  absl::Mutex mu;
  absl::MutexLock lock(&mu);
  // The condition is re-checked at least every few milliseconds so that a
  // stop request is seen without a separate wake-up channel.
  while (!StopRequested(stop) && Now() < deadline) {
    Nanos step = std::min<Nanos>(deadline - Now(), 5 * kMillisecond);
    AwaitWithDeadline(&mu,
                      absl::Condition(&StopRequestedThunk, const_cast<std::atomic<bool>*>(stop)),
                      Now() + step);
  }
  return StopRequested(stop);
}

Nanos SteadyClock::Now() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool SteadyClock::AwaitWithDeadline(absl::Mutex* mu, const absl::Condition& cond,
                                    Nanos deadline) const {
  Nanos remaining = deadline - Now();
  if (remaining <= 0) return cond.Eval();
  return mu->AwaitWithTimeout(cond, absl::Nanoseconds(remaining));
}

SteadyClock* SteadyClock::Get() {
  static SteadyClock* clock = new SteadyClock();
  return clock;
}

bool ManualClock::AwaitWithDeadline(absl::Mutex* mu, const absl::Condition& cond,
                                    Nanos deadline) const {
  while (Now() < deadline) {
    if (mu->AwaitWithTimeout(cond, absl::Milliseconds(1))) return true;
  }
  return cond.Eval();
}

}  // namespace maitre
