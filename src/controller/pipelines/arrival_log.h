// A pipeline's query arrivals between two model rounds (docs/policies.md,
// "Pipelines under an end-to-end objective"): the front-ends record each
// query as it is accepted, and the scaling loop takes them for the tuner's
// traffic envelopes.
//
// Thread-safety: thread-safe.
#pragma once

#include <algorithm>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "core/time.h"

namespace maitre::controller {

class ArrivalLog {
 public:
  // Past this many between two takes, further arrivals are dropped: a
  // scaling loop that stalled must not grow the log without bound.
  static constexpr size_t kMaxKept = 1 << 20;

  void Record(Nanos at) {
    absl::MutexLock lock(&mu_);
    if (times_.size() < kMaxKept) times_.push_back(at);
  }

  // Every arrival recorded since the last take, in time order (queries
  // accepted on several threads are recorded a little out of order).
  std::vector<Nanos> Take() {
    std::vector<Nanos> taken;
    {
      absl::MutexLock lock(&mu_);
      taken.swap(times_);
    }
    std::sort(taken.begin(), taken.end());
    return taken;
  }

 private:
  absl::Mutex mu_;
  std::vector<Nanos> times_ ABSL_GUARDED_BY(mu_);
};

}  // namespace maitre::controller
