// A fixed pool of threads running queued closures in FIFO order. The control
// path (loading, profiling, registration) runs on these so that slow work
// never holds an RPC or HTTP thread.
//
// Thread-safety: thread-safe.
#pragma once

#include <deque>
#include <string>
#include <thread>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"

namespace maitre {

class WorkQueue {
 public:
  explicit WorkQueue(int threads);
  // Runs what is queued, then joins.
  ~WorkQueue();

  // Queues `work`. After shutdown began, `work` is dropped.
  void Post(absl::AnyInvocable<void() &&> work);
  size_t pending() const;

 private:
  void Loop();

  mutable absl::Mutex mu_;
  std::deque<absl::AnyInvocable<void() &&>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace maitre
