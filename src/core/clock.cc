#include "core/clock.h"

#include <chrono>

namespace maitre {

bool Clock::SleepUntil(Nanos deadline, const StopSignal* stop) const {
  StopSignal never;
  if (stop == nullptr) stop = &never;
  absl::MutexLock lock(&stop->mu_);
  while (!stop->requested_ && Now() < deadline) {
    AwaitWithDeadline(&stop->mu_, absl::Condition(&stop->requested_), deadline);
  }
  return stop->requested_;
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
