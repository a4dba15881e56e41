// One loaded variant on a worker: a deadline-ordered queue, a batching
// policy, and one batch thread per replica (each with its own executor).
//
// Data path: Submit() queues a task; an idle replica asks the policy what to
// do and runs batches (when only best-effort queries wait, it runs them at
// once: holding a query back only pays against a latency objective); a reaper answers queries whose deadline has passed
// with DEADLINE_EXCEEDED the moment it passes, even while every replica is
// busy, so nothing is ever served late. (An idle replica does this itself;
// the reaper wakes only while every replica is busy.)
//
// Thread-safety: thread-safe. Callbacks run on the instance's own threads and
// must not block for long.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/clock.h"
#include "core/profile.h"
#include "core/tensor.h"
#include "core/variant.h"
#include "policy/batching.h"
#include "runtime/executor.h"
#include "worker/deadline_queue.h"
#include "worker/interval_stats.h"

namespace maitre::worker {

struct InferResult {
  absl::Status status;
  std::vector<Tensor> outputs;
  Nanos queue = 0;    // arrival to batch start
  Nanos compute = 0;  // the batch's executor time
  Nanos total = 0;    // arrival to answer
  int32_t batch_rows = 0;
};

using InferCallback = absl::AnyInvocable<void(InferResult) &&>;

struct InferTask {
  std::vector<Tensor> inputs;  // already checked against the model's spec
  int32_t rows = 1;
  // The hard deadline: past it the query is answered DEADLINE_EXCEEDED.
  Nanos deadline = kInfiniteFuture;
  // What batching aims for (the latency objective); kInfiniteFuture or a
  // value past `deadline` means the deadline itself.
  Nanos objective = kInfiniteFuture;
  // No latency objective: never held back to build a batch (see Instance).
  bool best_effort = false;
  InferCallback done;  // called exactly once
};

struct InstanceReport {
  VariantKey key;
  int replicas = 0;
  int queue_length = 0;
  int max_batch = 0;  // the most rows one batch holds now
  IntervalSnapshot interval;
};

class Instance {
 public:
  struct Options {
    VariantKey key;
    std::vector<std::unique_ptr<runtime::Executor>> replicas;  // at least one
    std::unique_ptr<policy::BatchingPolicy> policy;
    const Clock* clock = SteadyClock::Get();
    // Submit answers RESOURCE_EXHAUSTED beyond this many waiting queries.
    size_t max_queue = 8192;
    // Largest batch handed to an executor, whatever the policy says.
    int32_t max_batch = 64;
    // What `policy` plans with (may be empty), kept so that a new batch
    // limit can rebuild the policy on it (SetBatching).
    Profile profile;
  };

  static absl::StatusOr<std::unique_ptr<Instance>> Create(Options options);
  ~Instance();

  const VariantKey& key() const { return key_; }

  void Submit(InferTask task);
  // Submits several tasks at once, as one queue change.
  void SubmitAll(std::vector<InferTask> tasks);

  // Adds a replica running `executor`. Used by the model autoscaler.
  void AddReplica(std::unique_ptr<runtime::Executor> executor);
  // Retires `n` replicas (never the last): each finishes the batch it is
  // running, releases its executor and stops taking work.
  void RemoveReplicas(int n);
  // Replicas serving now (retired ones excluded).
  int replicas() const;

  // The batch limit and the policy planning within it, replaced (a
  // pipeline stage's planned batch set by a later load); queued queries
  // are decided on afresh by the new policy.
  void SetBatching(int32_t max_batch, std::unique_ptr<policy::BatchingPolicy> policy);
  int32_t max_batch() const;
  const Profile& profile() const { return profile_; }

  // Returns this interval's figures and starts a new interval.
  InstanceReport TakeReport();

  // Unloading drains: from now on Submit answers NOT_FOUND (as for a
  // variant this worker does not hold; the controller chooses again), the
  // replicas run every query already queued at once, without waiting to
  // build batches (each within its deadline; the reaper still answers late
  // ones), and this returns once none is queued or running, or at
  // `deadline` on the instance's clock. Stop() answers what is left.
  void Drain(Nanos deadline);

  // Answers every queued task NOT_FOUND and joins the threads. Idempotent.
  void Stop();

 private:
  struct Pending {
    Nanos arrival = 0;
    InferTask task;
  };
  struct Waiter;
  struct ReaperWaiter;

  explicit Instance(Options options);
  void StartReplicaLocked(size_t index) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReplicaLoop(size_t index);
  void ReaperLoop();
  // Removes expired tasks from the queue (caller answers them unlocked).
  std::vector<Pending> TakeExpiredLocked(Nanos now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Every queue removal from the front goes through here to keep the
  // counters right.
  std::vector<Pending> PopLocked(size_t n) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The earliest hard deadline in the queue.
  Nanos EarliestExpiryLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AnswerExpired(std::vector<Pending> expired);
  // Answers `late` as expired with mu_ released while their callbacks run
  // (a callback may take other locks or submit again), then takes mu_ back.
  void AnswerLateLocked(std::vector<Pending> late) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes and answers every query whose hard deadline is at or before
  // `now`. Returns true if there were any: mu_ was released meanwhile, so
  // the caller looks at the queue afresh. The replicas and the reaper both
  // expire queries, through here alone.
  bool ExpireLocked(Nanos now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RunBatch(runtime::Executor& executor, std::vector<Pending> batch);

  const VariantKey key_;
  const Clock* const clock_;
  const size_t max_queue_;
  const Profile profile_;

  mutable absl::Mutex mu_;
  int32_t max_batch_ ABSL_GUARDED_BY(mu_);
  DeadlineQueue<Pending> queue_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<policy::BatchingPolicy> policy_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<runtime::Executor>> executors_ ABSL_GUARDED_BY(mu_);
  IntervalStats stats_ ABSL_GUARDED_BY(mu_);
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 0;  // bumped on every queue change
  int active_replicas_ ABSL_GUARDED_BY(mu_) = 0;
  int retiring_ ABSL_GUARDED_BY(mu_) = 0;  // replicas asked to retire, not yet gone
  size_t queued_with_objective_ ABSL_GUARDED_BY(mu_) = 0;
  // Replicas waiting for work. An idle replica expires queries itself, so
  // the reaper is only needed (and only woken) while none is idle.
  int idle_replicas_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  int running_batches_ ABSL_GUARDED_BY(mu_) = 0;

  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);  // one per replica
  std::thread reaper_;
};

}  // namespace maitre::worker
