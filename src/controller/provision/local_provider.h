// The `local` provider: starts `maitre worker` processes on this machine,
// pinned to cores, and keeps the requested number of each worker type
// running. A worker that exits is replaced, with a growing pause if it keeps
// dying young. Workers die with the controller (PR_SET_PDEATHSIG), so nothing
// is left running if the controller is killed, and each runs in a process
// group of its own, so a terminal's Ctrl-C stops them only through the
// controller's drain. They inherit no descriptor of the controller's.
//
// All forking happens on the provider's own thread: PR_SET_PDEATHSIG fires
// when the *thread* that forked exits, so that thread must live as long as
// the workers.
//
// Thread-safety: thread-safe.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "core/clock.h"
#include "controller/provision/worker_provider.h"
#include "core/worker_type.h"

namespace maitre::controller {

// The local workers `maitre serve` starts when --workers is not given, for
// a machine with `cpus` cores: one of each type in `types` when their cores
// add up to `cpus` or fewer, so that every type exists; otherwise as many
// workers of the smallest type (the first listed, on a tie) as its cores
// fit, at least one. Either way no two workers share a core (unless one
// worker needs more cores than there are): the autoscalers count each
// worker's cores as its own, so workers pinned to the same core would be
// counted as capacity twice (docs/operations.md, "Local workers"). As
// --workers takes it: "type:count,...".
std::string DefaultLocalWorkers(const WorkerTypeTable& types, int cpus);

class LocalProvider : public WorkerProvider {
 public:
  struct Options {
    std::string binary;      // the maitre executable
    std::string controller;  // host:port the workers register with
    std::string log_dir;     // each worker logs to log_dir/worker-<token>.log
    std::string cache_dir;   // each worker caches blobs under cache_dir/<token>
    int cpus = 0;            // 0: this machine's count
    // How workers confine model code: `maitre worker --sandbox` and
    // `--sandbox-user` (core/sandbox.h).
    std::string sandbox = "best-effort";
    std::string sandbox_user = "nobody";
    // The cluster's join token, handed to each worker in its environment
    // (not its command line, which every local user can read).
    std::string join_token;
    const Clock* clock = SteadyClock::Get();
    // Fault injection (`maitre serve --inject-interruption AFTER_S[:LEAD_S]`):
    // this long after Start, the oldest joined spot worker gets an
    // interruption notice `inject_lead` ahead (at the first moment one has
    // joined, if none has then).
    std::optional<Nanos> inject_after;
    Nanos inject_lead = 120 * kSecond;
  };

  explicit LocalProvider(Options options);
  ~LocalProvider();

  void OnEvent(std::function<void(const WorkerEvent&)> listener) override;
  void Start();
  // Stops every worker (SIGTERM, then SIGKILL after a grace period) and the
  // provider's thread. Idempotent.
  void Stop();

  // How many workers of `type` should run.
  void SetDesired(const WorkerType& type, int count) override;
  int Desired(const std::string& type) const override;
  // A launched worker registered under `worker_id`.
  void OnJoin(const std::string& worker_id, const std::string& token);
  // Kills the process behind `worker_id` if it is one of ours (the cluster
  // lost it, so it will be replaced).
  void Kill(const std::string& worker_id);
  // Stops the worker behind `worker_id` for good: one fewer of its type is
  // wanted, and it is that worker (not the newest) that goes. False if it is
  // not one of ours.
  bool Retire(const std::string& worker_id) override;
  // Launched workers that have not registered yet, by type.
  std::map<std::string, int> Starting() const override;
  // A replacement starts at once (the interrupted worker no longer counts
  // towards its type's desired number), and the worker is killed with
  // SIGKILL when the lead runs out, as a cloud takes a spot machine back.
  absl::Status Interrupt(const std::string& worker_id, Nanos lead) override;

 private:
  struct LaunchedWorker {
    std::string name;   // L<n>: its log file and cache directory
    std::string token;  // unguessable: what it joins with
    std::string type;
    pid_t pid = 0;
    std::vector<int> cores;
    std::string worker_id;  // set once it registered
    Nanos started = 0;
    // Set by an interruption notice: when it is killed. It no longer counts
    // towards its type's desired number.
    std::optional<Nanos> stops_at;
  };

  void Loop();
  void ReapExitedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Kills the interrupted workers whose lead ran out.
  void EndInterruptedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status InterruptLocked(LaunchedWorker& w, Nanos lead) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Options::inject_after's notice, once its time came.
  void InjectLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReconcileLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void LaunchLocked(const WorkerType& type) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<int> ChooseCoresLocked(int count) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  const int cpus_;
  mutable absl::Mutex mu_;
  std::map<std::string, std::pair<WorkerType, int>> desired_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, LaunchedWorker> launched_ ABSL_GUARDED_BY(mu_);  // by token
  std::map<std::string, Nanos> backoff_until_ ABSL_GUARDED_BY(mu_);      // by type
  std::map<std::string, int> quick_deaths_ ABSL_GUARDED_BY(mu_);         // by type
  // Events not yet told to the listeners (the provider's thread tells them).
  std::vector<WorkerEvent> events_ ABSL_GUARDED_BY(mu_);
  absl::Mutex listeners_mu_;
  std::vector<std::function<void(const WorkerEvent&)>> listeners_ ABSL_GUARDED_BY(listeners_mu_);
  std::set<std::string> retiring_ ABSL_GUARDED_BY(mu_);  // tokens stopped on purpose
  int64_t next_token_ ABSL_GUARDED_BY(mu_) = 1;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<Nanos> inject_at_ ABSL_GUARDED_BY(mu_);  // pending injected notice
  std::thread thread_;
};

}  // namespace maitre::controller
