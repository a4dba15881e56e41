// Online queries from a few client threads until stopped, for end-to-end
// tests that need a worker kept busy: every query carries `rows` validation
// images, so the workers do more per request than the front end does.
//
// Thread-safety: the counters may be read from any thread; Stop() from the
// thread that made the load.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/valset.h"

namespace maitre::testing {

class OnlineLoad {
 public:
  // Posts to /v2/models/`model`/infer (`model` may pin a variant,
  // "name:variant") from `threads` threads, each waiting `pause` after
  // each answer: back to back with none (a closed loop that keeps every
  // instance at its limit), paced below the workers' capacity with one.
  OnlineLoad(const std::string& url, const std::string& model, const Valset& valset,
             int threads, int rows, absl::Duration pause = absl::ZeroDuration());
  ~OnlineLoad() { Stop(); }
  void Stop();
  int64_t served() const { return served_.load(); }
  int64_t failed() const { return failed_.load(); }
  // Answers the worker `worker` gave (the answer's parameters.worker).
  int64_t served_by(const std::string& worker) const;
  // The first failure's status and body, for messages ("" while none).
  std::string first_failure() const;

 private:
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> served_{0}, failed_{0};
  mutable absl::Mutex mu_;
  std::string first_failure_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int64_t> served_by_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_;
};

}  // namespace maitre::testing
