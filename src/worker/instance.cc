#include "worker/instance.h"

#include "absl/strings/str_cat.h"
#include "core/batch.h"
#include "core/thread_name.h"

namespace maitre::worker {
namespace {

// Rows in a list of pending requests (the unit the interval stats count).
template <typename PendingList>
int64_t RowsOf(const PendingList& pending) {
  int64_t rows = 0;
  for (const auto& p : pending) rows += p.task.rows;
  return rows;
}

}  // namespace

// A waiter wakes when the queue changed since it last looked, or on Stop.
struct Instance::Waiter {
  const Instance* self;
  uint64_t seen;
  bool Ready() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) {
    return self->stopping_ || self->version_ != seen;
  }
};

// The reaper wakes only when queued queries have no idle replica to watch
// their deadlines: waking it on every queue change would put a second thread
// in the way of each query reaching a replica.
struct Instance::ReaperWaiter {
  const Instance* self;
  uint64_t seen;
  bool Ready() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) {
    return self->stopping_ ||
           (self->version_ != seen && self->idle_replicas_ == 0 && !self->queue_.empty());
  }
};

absl::StatusOr<std::unique_ptr<Instance>> Instance::Create(Options options) {
  if (options.replicas.empty()) return absl::InvalidArgumentError("an instance needs a replica");
  if (options.policy == nullptr) return absl::InvalidArgumentError("an instance needs a policy");
  if (options.clock == nullptr) return absl::InvalidArgumentError("an instance needs a clock");
  std::unique_ptr<Instance> instance(new Instance(std::move(options)));
  return instance;
}

Instance::Instance(Options options)
    : key_(std::move(options.key)),
      clock_(options.clock),
      max_queue_(options.max_queue),
      profile_(std::move(options.profile)),
      max_batch_(options.max_batch),
      policy_(std::move(options.policy)),
      stats_(options.clock->Now()) {
  absl::MutexLock lock(&mu_);
  for (auto& executor : options.replicas) {
    executors_.push_back(std::move(executor));
    StartReplicaLocked(executors_.size() - 1);
  }
  reaper_ = std::thread([this] {
    NameThisThread("reaper");
    ReaperLoop();
  });
}

Instance::~Instance() { Stop(); }

void Instance::StartReplicaLocked(size_t index) {
  ++active_replicas_;
  threads_.emplace_back([this, index] {
    NameThisThread("replica");
    ReplicaLoop(index);
  });
}

void Instance::RemoveReplicas(int n) {
  absl::MutexLock lock(&mu_);
  retiring_ = std::min(retiring_ + std::max(0, n), active_replicas_ - 1);
  ++version_;  // wake idle replicas so one of them retires
}

void Instance::AddReplica(std::unique_ptr<runtime::Executor> executor) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return;
  executors_.push_back(std::move(executor));
  StartReplicaLocked(executors_.size() - 1);
}

int Instance::replicas() const {
  absl::MutexLock lock(&mu_);
  return active_replicas_;
}

void Instance::SetBatching(int32_t max_batch, std::unique_ptr<policy::BatchingPolicy> policy) {
  absl::MutexLock lock(&mu_);
  max_batch_ = max_batch;
  policy_ = std::move(policy);
  ++version_;  // waiting replicas decide again under the new policy
}

int32_t Instance::max_batch() const {
  absl::MutexLock lock(&mu_);
  return max_batch_;
}

void Instance::Submit(InferTask task) {
  std::vector<InferTask> tasks;
  tasks.push_back(std::move(task));
  SubmitAll(std::move(tasks));
}

void Instance::SubmitAll(std::vector<InferTask> tasks) {
  Nanos now = clock_->Now();
  std::vector<std::pair<InferTask, absl::Status>> refused;
  {
    // One lock and one wake-up for the whole group: a replica that wakes
    // sees every query of it at once and can batch them together.
    absl::MutexLock lock(&mu_);
    for (InferTask& task : tasks) {
      stats_.OnArrival(task.rows);
      absl::Status why;
      if (stopping_ || draining_) {
        why = absl::NotFoundError(absl::StrCat(key_.ToString(), " is being unloaded"));
      } else if (task.deadline <= now) {
        why = absl::DeadlineExceededError("the deadline passed before the query was queued");
        stats_.OnDropped(task.rows);
      } else if (queue_.size() >= max_queue_) {
        why = absl::ResourceExhaustedError(
            absl::StrCat(key_.ToString(), " has ", queue_.size(), " queries waiting; try later"));
      } else {
        // The policy plans with the objective; expiry uses the hard deadline.
        policy::QueuedQuery meta{now, std::min(task.objective, task.deadline), task.rows};
        if (!task.best_effort) ++queued_with_objective_;
        queue_.Push(meta, Pending{now, std::move(task)});
        continue;
      }
      refused.emplace_back(std::move(task), std::move(why));
    }
    if (refused.size() < tasks.size()) ++version_;
  }
  for (auto& [task, why] : refused) {
    InferResult result;
    result.status = why;
    std::move(task.done)(std::move(result));
  }
}

std::vector<Instance::Pending> Instance::PopLocked(size_t n) {
  std::vector<Pending> popped = queue_.PopFront(n);
  for (const Pending& p : popped) queued_with_objective_ -= p.task.best_effort ? 0 : 1;
  if (!popped.empty()) ++version_;
  return popped;
}

std::vector<Instance::Pending> Instance::TakeExpiredLocked(Nanos now) {
  std::vector<Pending> expired =
      queue_.TakeWhere([now](const Pending& p) { return p.task.deadline <= now; });
  if (expired.empty()) return expired;
  for (const Pending& p : expired) queued_with_objective_ -= p.task.best_effort ? 0 : 1;
  ++version_;
  stats_.OnDropped(RowsOf(expired));
  return expired;
}

Nanos Instance::EarliestExpiryLocked() const {
  Nanos earliest = kInfiniteFuture;
  queue_.ForEach([&](const Pending& p) { earliest = std::min(earliest, p.task.deadline); });
  return earliest;
}

void Instance::AnswerExpired(std::vector<Pending> expired) {
  Nanos now = clock_->Now();
  for (Pending& p : expired) {
    InferResult result;
    result.status = absl::DeadlineExceededError(absl::StrCat(
        "the query could not run on ", key_.ToString(), " before its deadline; it waited ",
        (now - p.arrival) / kMicrosecond, " us"));
    result.queue = result.total = now - p.arrival;
    std::move(p.task.done)(std::move(result));
  }
}

void Instance::AnswerLateLocked(std::vector<Pending> late) {
  if (late.empty()) return;
  mu_.Unlock();
  AnswerExpired(std::move(late));
  mu_.Lock();
}

bool Instance::ExpireLocked(Nanos now) {
  std::vector<Pending> expired = TakeExpiredLocked(now);
  if (expired.empty()) return false;
  AnswerLateLocked(std::move(expired));
  return true;
}

void Instance::ReaperLoop() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    if (ExpireLocked(clock_->Now())) continue;
    Nanos wake = EarliestExpiryLocked();
    ReaperWaiter waiter{this, version_};
    clock_->AwaitWithDeadline(&mu_, absl::Condition(&waiter, &ReaperWaiter::Ready), wake);
  }
}

void Instance::ReplicaLoop(size_t index) {
  absl::MutexLock lock(&mu_);
  runtime::Executor& executor = *executors_[index];
  while (!stopping_) {
    if (retiring_ > 0) {
      // Retire between batches: release the executor's memory now; the
      // thread is joined when the instance stops.
      --retiring_;
      --active_replicas_;
      std::unique_ptr<runtime::Executor> retired = std::move(executors_[index]);
      mu_.Unlock();
      retired.reset();
      mu_.Lock();
      return;
    }
    Nanos now = clock_->Now();
    if (ExpireLocked(now)) continue;
    policy::BatchDecision decision = policy::DecideForInstance(
        *policy_, queue_.View(), queued_with_objective_, max_batch_, now);
    if (draining_ && !queue_.empty() &&
        decision.action == policy::BatchDecision::Action::kWait) {
      // Nothing more will come to batch with: run what is here, up to the
      // largest batch.
      int32_t rows = 0, take = 0;
      for (const policy::QueuedQuery& q : queue_.View()) {
        if (take > 0 && rows + q.rows > max_batch_) break;
        rows += q.rows;
        ++take;
      }
      decision = policy::BatchDecision::Dispatch(take);
    }
    const int32_t count = std::min<int32_t>(decision.count, static_cast<int32_t>(queue_.size()));
    if (decision.action == policy::BatchDecision::Action::kDispatch && count > 0) {
      std::vector<Pending> batch = PopLocked(count);
      ++running_batches_;
      mu_.Unlock();
      RunBatch(executor, std::move(batch));
      mu_.Lock();
      --running_batches_;  // a drain's condition sees it as this unlocks
      continue;
    }
    if (decision.action == policy::BatchDecision::Action::kDrop && count > 0) {
      // The policy gives up on these queries' objective.
      std::vector<Pending> late;
      for (Pending& p : PopLocked(count)) {
        if (policy::ServeDroppedBestEffort(p.task.best_effort, p.task.deadline, now)) {
          p.task.best_effort = true;
          queue_.Push({p.arrival, p.task.deadline, p.task.rows}, std::move(p));
        } else {
          late.push_back(std::move(p));
        }
      }
      stats_.OnDropped(RowsOf(late));
      AnswerLateLocked(std::move(late));
      continue;
    }
    Nanos wake = std::min(decision.wake_at, EarliestExpiryLocked());
    Waiter waiter{this, version_};
    ++idle_replicas_;
    clock_->AwaitWithDeadline(&mu_, absl::Condition(&waiter, &Waiter::Ready), wake);
    --idle_replicas_;
  }
}

void Instance::RunBatch(runtime::Executor& executor, std::vector<Pending> batch) {
  Nanos start = clock_->Now();
  std::vector<const std::vector<Tensor>*> parts;
  std::vector<int64_t> rows;
  parts.reserve(batch.size());
  rows.reserve(batch.size());
  int32_t total_rows = 0;
  for (const Pending& p : batch) {
    parts.push_back(&p.task.inputs);
    rows.push_back(p.task.rows);
    total_rows += p.task.rows;
  }
  absl::StatusOr<std::vector<std::vector<Tensor>>> split;
  if (batch.size() == 1) {
    // The common case at low load: no copy into a joined batch.
    auto out = executor.Run(batch[0].task.inputs);
    if (out.ok()) {
      split = std::vector<std::vector<Tensor>>{*std::move(out)};
    } else {
      split = out.status();
    }
  } else {
    auto joined = ConcatRows(parts);
    auto out = joined.ok() ? executor.Run(*joined)
                           : absl::StatusOr<std::vector<Tensor>>(joined.status());
    split = out.ok() ? SplitRows(*out, rows)
                     : absl::StatusOr<std::vector<std::vector<Tensor>>>(out.status());
  }
  Nanos finish = clock_->Now();

  int32_t missed = 0;
  for (const Pending& p : batch) missed += finish > p.task.deadline ? 1 : 0;
  {
    absl::MutexLock lock(&mu_);
    stats_.OnBatch(total_rows, finish - start);
    if (!split.ok()) stats_.OnFailed(total_rows);
    for (const Pending& p : batch) {
      if (split.ok()) stats_.OnServed(finish - p.arrival, p.task.rows);
    }
    policy_->Observe({total_rows, start, finish, missed});
  }
  for (size_t i = 0; i < batch.size(); ++i) {
    InferResult result;
    if (split.ok()) {
      result.outputs = std::move((*split)[i]);
    } else {
      result.status = absl::InternalError(
          absl::StrCat(key_.ToString(), " failed to run: ", split.status().message()));
    }
    result.queue = start - batch[i].arrival;
    result.compute = finish - start;
    result.total = finish - batch[i].arrival;
    result.batch_rows = total_rows;
    std::move(batch[i].task.done)(std::move(result));
  }
}

InstanceReport Instance::TakeReport() {
  absl::MutexLock lock(&mu_);
  InstanceReport report;
  report.key = key_;
  report.replicas = active_replicas_;
  report.queue_length = static_cast<int>(queue_.size());
  report.max_batch = max_batch_;
  report.interval = stats_.TakeAndReset(clock_->Now());
  if (report.interval.length > 0) {
    policy_->ObserveDemand(static_cast<double>(report.interval.arrivals) /
                           ToSeconds(report.interval.length));
    ++version_;  // idle replicas decide again: a lower demand may end a wait
  }
  return report;
}

void Instance::Drain(Nanos deadline) {
  absl::MutexLock lock(&mu_);
  draining_ = true;
  ++version_;  // waiting replicas decide again, and dispatch
  auto drained = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopping_ || (queue_.empty() && running_batches_ == 0);
  };
  clock_->AwaitWithDeadline(&mu_, absl::Condition(&drained), deadline);
}

void Instance::Stop() {
  std::vector<Pending> orphans;
  std::vector<std::thread> threads;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
    ++version_;
    orphans = PopLocked(queue_.size());
    threads.swap(threads_);
  }
  // Answer the waiting queries before joining: a replica may be in the
  // middle of a long batch, and they should not wait for it. NOT_FOUND, as
  // for a variant this worker does not hold: the controller then sends them
  // to another instance. UNAVAILABLE would read as "the worker cannot be
  // reached" and stop all its traffic until it next reports.
  for (Pending& p : orphans) {
    InferResult result;
    result.status = absl::NotFoundError(absl::StrCat(key_.ToString(), " was unloaded"));
    std::move(p.task.done)(std::move(result));
  }
  for (std::thread& t : threads) t.join();
  if (reaper_.joinable()) reaper_.join();
}

}  // namespace maitre::worker
