// The workers with a load under way, which an allocator's rounds leave
// alone until the sink says the load ended: a round must not stack a move on
// a report that does not show the last one yet.
//
// Thread-safety: thread-safe; the callbacks Mark returns may run on any
// thread (the sink's `done`), and must not outlive the set.
#pragma once

#include <functional>
#include <set>
#include <string>

#include "absl/synchronization/mutex.h"

namespace maitre::control {

class BusyWorkers {
 public:
  bool Contains(const std::string& worker) const {
    absl::MutexLock lock(&mu_);
    return busy_.count(worker) > 0;
  }
  // Marks `worker` busy; the callback returned frees it.
  std::function<void()> Mark(const std::string& worker) {
    {
      absl::MutexLock lock(&mu_);
      busy_.insert(worker);
    }
    return [this, worker] {
      absl::MutexLock lock(&mu_);
      busy_.erase(worker);
    };
  }

 private:
  mutable absl::Mutex mu_;
  std::set<std::string> busy_ ABSL_GUARDED_BY(mu_);
};

}  // namespace maitre::control
