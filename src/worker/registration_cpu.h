// Process CPU time spent on registration work (profiling and evaluating
// variants) rather than serving. The worker reports its utilisation less
// this, so that profiling a new model does not look like serving load to
// the cluster autoscaler (it added a worker for it, then retired it a
// minute later).
//
// Replicas go on serving while a job runs, so the process's CPU clock alone
// would count their work as the job's: with profiles refined in sweeps over
// minutes, a worker kept 100% busy by online load reported 0% while a sweep
// ran, and offline jobs never paused for it. A job's own CPU is at most its
// thread's CPU times the cores that thread may run on (torch and OpenCV
// spread a batch over helper threads on those cores, no longer than the
// job's thread works), so a job counts
//   min(process CPU, job thread CPU × cores)
// over its run: exact on a one-core worker, an upper bound on larger ones.
//
// A job in progress counts up to now, so a profile that spans several
// report intervals is left out of each of them.
//
// Thread-safety: thread-safe; jobs run one at a time.
#pragma once

#include <algorithm>
#include <functional>
#include <optional>
#include <utility>

#include "absl/synchronization/mutex.h"

namespace maitre::worker {

class RegistrationCpu {
 public:
  struct Clocks {
    std::function<double()> process;  // CPU seconds of the whole process
    // Called on a job's thread: a reader of that thread's CPU seconds,
    // which may be called from any thread.
    std::function<std::function<double()>()> this_thread;
    // Called on a job's thread: how many cores it may run on.
    std::function<int()> this_thread_cores;
  };
  explicit RegistrationCpu(Clocks clocks) : clocks_(std::move(clocks)) {}

  // Runs `job` on the calling thread, counting its CPU time as registration.
  template <typename Job>
  void Run(Job job) {
    Begin();
    job();
    End();
  }

  // Registration CPU seconds so far, including a job still running.
  double Seconds() const {
    absl::MutexLock lock(&mu_);
    return done_ + (job_.has_value() ? job_->SoFar(clocks_) : 0);
  }

 private:
  struct RunningJob {
    std::function<double()> thread_cpu;
    int cores = 1;
    double process_start = 0;
    double thread_start = 0;
    double SoFar(const Clocks& clocks) const {
      return std::max(0.0, std::min(clocks.process() - process_start,
                                    (thread_cpu() - thread_start) * cores));
    }
  };

  void Begin() {
    RunningJob job;
    job.thread_cpu = clocks_.this_thread();
    job.cores = std::max(1, clocks_.this_thread_cores());
    job.process_start = clocks_.process();
    job.thread_start = job.thread_cpu();
    absl::MutexLock lock(&mu_);
    job_ = std::move(job);
  }
  void End() {
    absl::MutexLock lock(&mu_);
    done_ += job_->SoFar(clocks_);
    job_.reset();
  }

  const Clocks clocks_;
  mutable absl::Mutex mu_;
  double done_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<RunningJob> job_ ABSL_GUARDED_BY(mu_);  // the job running, if any
};

}  // namespace maitre::worker
