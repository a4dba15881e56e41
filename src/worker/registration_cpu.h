// Process CPU time spent on registration work (profiling and evaluating
// variants) rather than serving. The worker reports its utilisation less
// this, so that profiling a new model does not look like serving load to
// the cluster autoscaler (it added a worker for it, then retired it a
// minute later).
//
// A job in progress counts up to now, so a profile that spans several
// report intervals is left out of each of them.
//
// Thread-safety: thread-safe; jobs run one at a time.
#pragma once

#include <functional>

#include "absl/synchronization/mutex.h"

namespace maitre::worker {

class RegistrationCpu {
 public:
  // `process_cpu_seconds` reads the process's CPU clock (injected for tests).
  explicit RegistrationCpu(std::function<double()> process_cpu_seconds)
      : read_(std::move(process_cpu_seconds)) {}

  // Runs `job`, counting the process CPU time that passes as registration.
  template <typename Job>
  void Run(Job job) {
    Begin();
    job();
    End();
  }

  // Registration CPU seconds so far, including a job still running.
  double Seconds() const {
    absl::MutexLock lock(&mu_);
    return done_ + (job_start_ < 0 ? 0 : read_() - job_start_);
  }

 private:
  void Begin() {
    absl::MutexLock lock(&mu_);
    job_start_ = read_();
  }
  void End() {
    absl::MutexLock lock(&mu_);
    done_ += read_() - job_start_;
    job_start_ = -1;
  }

  const std::function<double()> read_;
  mutable absl::Mutex mu_;
  double done_ ABSL_GUARDED_BY(mu_) = 0;
  double job_start_ ABSL_GUARDED_BY(mu_) = -1;  // negative when no job runs
};

}  // namespace maitre::worker
