// A one-way request to stop that sleeping threads see at once. Loops sleep
// on it through Clock::SleepUntil; Request() wakes them, so they need not
// poll a flag on a timer (each timed wake-up costs a hypervisor round trip
// on the virtual machines this runs on).
//
// Thread-safety: thread-safe. Not for use inside a signal handler.
#pragma once

#include "absl/synchronization/mutex.h"

namespace maitre {

class StopSignal {
 public:
  // Returns true for the first request only.
  bool Request() {
    absl::MutexLock lock(&mu_);
    bool first = !requested_;
    requested_ = true;
    return first;
  }
  bool requested() const {
    absl::MutexLock lock(&mu_);
    return requested_;
  }

 private:
  friend class Clock;
  mutable absl::Mutex mu_;
  bool requested_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace maitre
