#include "controller/dataplane/cluster.h"

#include <algorithm>
#include <utility>
#include <atomic>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "core/logging.h"

namespace maitre::controller {
namespace {

// Marks a status as a worker's loss (the payload's presence is the mark).
constexpr absl::string_view kWorkerLostPayload = "maitre.dev/worker-lost";

}  // namespace

absl::Status WorkerLostError(absl::string_view message) {
  absl::Status status = absl::UnavailableError(message);
  status.SetPayload(kWorkerLostPayload, absl::Cord());
  return status;
}

bool IsWorkerLost(const absl::Status& status) {
  return status.GetPayload(kWorkerLostPayload).has_value();
}

HeldReplicas HeldBy(const InstanceView& instance) {
  HeldReplicas held;
  if (instance.phase == InstancePhase::kReady) held.ready = std::max(1, instance.stats.replicas);
  held.loading = instance.loading_replicas;
  return held;
}

HeldReplicas HeldOn(const WorkerView& worker, const VariantKey& key) {
  HeldReplicas held;
  for (const InstanceView& inst : worker.instances) {
    if (!(inst.key == key)) continue;
    HeldReplicas here = HeldBy(inst);
    held.ready = std::max(held.ready, here.ready);
    held.loading = std::max(held.loading, here.loading);
  }
  return held;
}

absl::string_view InstancePhaseName(InstancePhase phase) {
  switch (phase) {
    case InstancePhase::kLoading:
      return "loading";
    case InstancePhase::kReady:
      return "ready";
    case InstancePhase::kUnloading:
      return "unloading";
    case InstancePhase::kFailed:
      break;
  }
  return "failed";
}

Cluster::Cluster(Options options) : options_(std::move(options)), router_(options_.router) {
  if (router_ == nullptr) router_ = *control::CreateQueryRouter("infaas", {});
  // Until the catalog is known, the index knows the worker types only, so
  // workers can join the live view.
  policy::SelectionCatalogue types_only;
  types_only.worker_types = options_.types.types();
  auto index = policy::SelectionIndex::Create(types_only);
  if (index.ok()) index_ = std::make_shared<const policy::SelectionIndex>(*std::move(index));
}

absl::StatusOr<std::string> Cluster::AddWorker(const std::string& type,
                                               const std::string& address, int pid,
                                               const std::string& launch_token,
                                               const std::string& call_token) {
  const WorkerType* worker_type = options_.types.Find(type);
  if (worker_type == nullptr) {
    std::string known;
    for (const WorkerType& t : options_.types.types()) absl::StrAppend(&known, " ", t.name);
    return absl::InvalidArgumentError(
        absl::StrCat("unknown worker type \"", type, "\"; this controller knows:", known));
  }
  if (address.empty()) return absl::InvalidArgumentError("a worker needs an address");
  std::shared_ptr<WorkerApi> api = options_.connect(address, call_token);
  absl::MutexLock lock(&mu_);
  std::string id = absl::StrCat(options_.id_prefix, next_worker_++);
  Worker& w = workers_[id];
  w.view.id = id;
  w.view.type = *worker_type;
  w.view.address = address;
  w.view.pid = pid;
  w.view.launch_token = launch_token;
  w.view.registered_at = w.view.last_report = options_.clock->Now();
  w.view.idle_since = w.view.registered_at;
  w.api = std::move(api);
  LiveAddWorkerLocked(w);
  spdlog::info("worker {} joined: {} at {} (pid {})", id, type, address, pid);
  return id;
}

bool Cluster::ApplyReport(const WorkerReport& report) {
  // Instances that drained for too long: their unloads go ahead (below,
  // outside the lock).
  std::vector<absl::AnyInvocable<void() &&>> overdue;
  absl::Cleanup run_overdue = [&overdue] {
    for (auto& drained : overdue) std::move(drained)();
  };
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(report.worker_id);
  if (it == workers_.end()) return false;
  Worker& w = it->second;
  if (w.view.unreachable && !w.view.leaving_at.has_value()) {
    w.view.unreachable = false;  // it answered after all
    if (w.live != policy::kNoId) live_.SetAccepting(w.live, true);
  }
  const Nanos previous_report = w.view.last_report;
  w.view.last_report = options_.clock->Now();
  w.view.cpu_utilisation = report.cpu_utilisation;
  w.view.memory_mb = report.memory_mb;
  for (const auto& [key, stats] : report.instances) {
    auto inst = w.instances.find(key);
    if (inst == w.instances.end()) {
      // The worker holds an instance this controller did not load (the
      // controller restarted): adopt it, the report is the source of truth.
      inst = w.instances.emplace(key, InstanceRecord{}).first;
      inst->second.phase = InstancePhase::kReady;
      inst->second.phase_since = w.view.last_report;
    }
    inst->second.stats = stats;
  }
  bool busy = false;
  for (const auto& [key, inst] : w.instances) {
    busy |= inst.outstanding > 0 || inst.stats.served_qps > 0 || inst.stats.arrival_qps > 0 ||
            inst.stats.queue_length > 0;
  }
  if (busy) {
    w.view.idle_since.reset();
  } else if (!w.view.idle_since.has_value()) {
    w.view.idle_since = previous_report;  // the report covers the time since
  }
  for (auto& [key, inst] : w.instances) {
    if (inst.phase == InstancePhase::kUnloading && inst.drained &&
        w.view.last_report - inst.phase_since >= options_.unload_drain_limit) {
      spdlog::warn("{} on {}: {} queries still in flight after {:.0f} s of draining; unloading",
                   key.ToString(), w.view.id, inst.outstanding,
                   ToSeconds(w.view.last_report - inst.phase_since));
      overdue.push_back(std::move(inst.drained));
      inst.drained = nullptr;
    }
  }
  LiveApplyReportLocked(w);
  return true;
}

WorkerView Cluster::ViewOf(const Worker& worker) const {
  WorkerView view = worker.view;
  for (const auto& [key, inst] : worker.instances) {
    InstanceView v{key, inst.phase, inst.history.state, inst.error,
                   inst.phase_since, inst.outstanding, inst.stats};
    if (inst.phase == InstancePhase::kLoading) {
      v.loading_replicas = std::max(1, inst.target_replicas);
    } else if (inst.resizing && inst.phase == InstancePhase::kReady) {
      v.loading_replicas = std::max(0, inst.target_replicas - std::max(1, inst.stats.replicas));
    }
    view.instances.push_back(std::move(v));
  }
  return view;
}

Cluster::Erased Cluster::EraseWorkerLocked(const std::string& worker_id) {
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) return {};
  Erased erased;
  erased.view = ViewOf(it->second);
  for (auto& [key, inst] : it->second.instances) {
    for (LoadWaiter& w : inst.waiters) erased.waiters.push_back(std::move(w));
    if (inst.drained) erased.drained.push_back(std::move(inst.drained));
    LiveRemoveInstanceLocked(inst);
  }
  if (it->second.live != policy::kNoId) {
    live_.RemoveWorker(it->second.live);
    worker_by_live_.erase(it->second.live);
  }
  workers_.erase(it);
  return erased;
}

void Cluster::NotifyRemoved(Erased erased, absl::string_view reason) {
  const WorkerView& view = erased.view;
  if (view.id.empty()) return;
  spdlog::warn("worker {} ({}) removed: {}", view.id, view.address, reason);
  for (LoadWaiter& w : erased.waiters) {
    std::move(w)(
        WorkerLostError(absl::StrCat("worker ", view.id, " was lost while loading: ", reason)));
  }
  // Nothing is left to unload there: the drains' callbacks go unused.
  erased.drained.clear();
  std::vector<std::function<void(const WorkerView&)>> callbacks;
  {
    absl::MutexLock lock(&mu_);
    callbacks = removed_callbacks_;
  }
  for (auto& callback : callbacks) callback(view);
}

void Cluster::RemoveWorker(const std::string& worker_id, absl::string_view reason) {
  Erased removed;
  {
    absl::MutexLock lock(&mu_);
    removed = EraseWorkerLocked(worker_id);
  }
  NotifyRemoved(std::move(removed), reason);
}

std::vector<std::string> Cluster::RemoveSilentWorkers() {
  std::vector<Erased> removed;
  {
    absl::MutexLock lock(&mu_);
    Nanos now = options_.clock->Now();
    std::vector<std::string> silent;
    for (const auto& [id, w] : workers_) {
      if (now - w.view.last_report > options_.silence_limit) silent.push_back(id);
    }
    for (const std::string& id : silent) removed.push_back(EraseWorkerLocked(id));
  }
  std::vector<std::string> ids;
  for (Erased& erased : removed) {
    ids.push_back(erased.view.id);
    NotifyRemoved(std::move(erased), "it stopped reporting");
  }
  return ids;
}

void Cluster::OnWorkerRemoved(std::function<void(const WorkerView&)> callback) {
  absl::MutexLock lock(&mu_);
  removed_callbacks_.push_back(std::move(callback));
}

void Cluster::MarkUnreachable(const std::string& worker_id) {
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(worker_id);
  if (it != workers_.end()) MarkUnreachableLocked(it->second);
}

bool Cluster::BeginLeaving(const std::string& worker_id, Nanos stops_at) {
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(worker_id);
  if (it == workers_.end()) return false;
  Worker& w = it->second;
  // A worker already unreachable (a call to it failed) serves no more; a
  // second notice changes only when it stops.
  if (!w.view.leaving_at.has_value()) w.serves_while_leaving = !w.view.unreachable;
  w.view.leaving_at = stops_at;
  if (!w.view.unreachable) {
    w.view.unreachable = true;
    if (w.live != policy::kNoId) live_.SetAccepting(w.live, false);
  }
  // It has no room for a load from now on (FreeMemoryLocked).
  if (w.live != policy::kNoId) {
    live_.UpdateWorker(w.live, w.view.cpu_utilisation, FreeMemoryLocked(w));
  }
  spdlog::warn(
      "worker {} leaves in {} s: no new loads go there, and it takes queries as before until "
      "{} s before it stops",
      worker_id, ToSeconds(stops_at - options_.clock->Now()), ToSeconds(options_.leaving_margin));
  return true;
}

bool Cluster::ServesWhileLeaving(const Worker& worker, Nanos now, Nanos margin) {
  return worker.serves_while_leaving && worker.view.leaving_at.has_value() &&
         control::ServesWhileLeaving(*worker.view.leaving_at, now, margin);
}

void Cluster::MarkUnreachableLocked(Worker& worker) {
  if (worker.serves_while_leaving) {
    worker.serves_while_leaving = false;  // a call to it failed: it serves no more
    spdlog::warn("worker {} is leaving and a call to it failed: no queries go there",
                 worker.view.id);
  }
  if (worker.view.unreachable) return;
  worker.view.unreachable = true;
  if (worker.live != policy::kNoId) live_.SetAccepting(worker.live, false);
  spdlog::warn("worker {} unreachable: no queries go there until it reports", worker.view.id);
}

std::optional<Route> Cluster::PickReady(const VariantKey& key,
                                        const std::vector<std::string>& avoid) {
  absl::MutexLock lock(&mu_);
  Worker* best = nullptr;
  InstanceRecord* best_instance = nullptr;
  std::pair<double, double> best_load;
  const Nanos now = options_.clock->Now();
  for (auto& [id, w] : workers_) {
    // A leaving worker serves like any other until its margin (BeginLeaving).
    const bool usable =
        !w.view.unreachable || ServesWhileLeaving(w, now, options_.leaving_margin);
    if (!usable || std::find(avoid.begin(), avoid.end(), id) != avoid.end()) continue;
    auto it = w.instances.find(key);
    if (it == w.instances.end() || it->second.phase != InstancePhase::kReady) continue;
    // Fewest in flight per replica, then the worker sent the least work
    // lately per replica, as selection's step 1 judges (policy/
    // selection_live.h, RecentLoad): the instances tie at 0 in flight
    // between most queries, and the reported queue that broke the ties
    // sent a report's worth of queries to one worker. The worker's
    // reported queue breaks the remaining ties.
    InstanceRecord& inst = it->second;
    const std::pair<double, double> load{
        static_cast<double>(inst.outstanding) / std::max(1, inst.stats.replicas),
        w.live != policy::kNoId ? live_.RecentLoad(*index_, w.live, now) : 0};
    if (best_instance == nullptr || load < best_load ||
        (load == best_load && inst.stats.queue_length < best_instance->stats.queue_length)) {
      best = &w;
      best_instance = &inst;
      best_load = load;
    }
  }
  if (best == nullptr) return std::nullopt;
  ++best_instance->outstanding;
  if (best_instance->live != policy::kNoId) {
    // A live instance exists only under an index.
    live_.Sent(*index_, best_instance->live, now);
  }
  return Route{best->view.id, best->view.type.name, best->api, best_instance->generation,
               best_instance->outstanding};
}

void Cluster::Release(const std::string& worker_id, const VariantKey& key, ReplyTimes times) {
  // The last query of an instance being unloaded: it has drained.
  absl::AnyInvocable<void() &&> drained;
  absl::Cleanup run_drained = [&drained] {
    if (drained) std::move(drained)();
  };
  absl::MutexLock lock(&mu_);
  auto w = workers_.find(worker_id);
  if (w == workers_.end()) return;
  auto inst = w->second.instances.find(key);
  if (inst == w->second.instances.end()) return;
  // An eighth of each new round trip: a few hundred replies a second follow
  // a change within tens of milliseconds, one slow reply moves it little.
  InstanceRecord& record = inst->second;
  if (times.overhead >= 0) record.overhead += (times.overhead - record.overhead) / 8;
  // A worker slowed by its host (other processes, a loaded controller beside
  // it) computes slower than its profile, which was measured alone.
  if (const policy::VariantOption* option = OptionOf(key, w->second.view.type.name);
      option != nullptr && times.compute > 0 && times.batch > 0) {
    record.slowdown = policy::NextSlowdown(record.slowdown, ToMillis(times.compute),
                                           option->profile.LatencyAt(times.batch));
    if (record.live != policy::kNoId) live_.SetSlowdown(record.live, record.slowdown);
  }
  if (record.outstanding > 0) {
    --record.outstanding;
    if (record.live != policy::kNoId) live_.AddWaiting(record.live, -1);
  }
  if (record.outstanding == 0 && record.phase == InstancePhase::kUnloading && record.drained) {
    drained = std::move(record.drained);
    record.drained = nullptr;
  }
}

bool Cluster::WaitForLoad(const VariantKey& key, LoadWaiter& waiter,
                          const std::vector<std::string>& avoid) {
  absl::MutexLock lock(&mu_);
  for (auto& [id, w] : workers_) {
    if (w.view.unreachable || std::find(avoid.begin(), avoid.end(), id) != avoid.end()) continue;
    auto it = w.instances.find(key);
    if (it != w.instances.end() && it->second.phase == InstancePhase::kLoading) {
      it->second.waiters.push_back(std::move(waiter));
      return true;
    }
  }
  return false;
}

absl::Status Cluster::BeginLoad(const std::string& worker_id, const VariantKey& key,
                                LoadWaiter waiter, int replicas) {
  {
    absl::MutexLock lock(&mu_);
    auto w = workers_.find(worker_id);
    if (w != workers_.end()) {
      InstanceRecord& inst = w->second.instances[key];
      inst.target_replicas = replicas;
      if (inst.phase == InstancePhase::kReady) {
        inst.resizing = true;
        if (waiter) inst.waiters.push_back(std::move(waiter));
        return absl::OkStatus();
      }
      inst.phase = InstancePhase::kLoading;
      inst.error.clear();
      inst.phase_since = options_.clock->Now();
      inst.drained = nullptr;  // an instance being unloaded is taken back
      LiveAddInstanceLocked(w->second, key, inst, policy::InstanceState::kInactive);
      if (waiter) inst.waiters.push_back(std::move(waiter));
      return absl::OkStatus();
    }
  }
  absl::Status gone = WorkerLostError(absl::StrCat("worker ", worker_id, " is gone"));
  if (waiter) std::move(waiter)(gone);
  return gone;
}

void Cluster::FinishLoad(const std::string& worker_id, const VariantKey& key,
                         absl::Status status) {
  std::vector<LoadWaiter> waiters;
  {
    absl::MutexLock lock(&mu_);
    auto w = workers_.find(worker_id);
    if (w == workers_.end()) return;  // the waiters were told when it went
    auto it = w->second.instances.find(key);
    if (it == w->second.instances.end()) return;
    InstanceRecord& inst = it->second;
    waiters.swap(inst.waiters);
    if (status.code() == absl::StatusCode::kUnavailable ||
        status.code() == absl::StatusCode::kUnauthenticated) {
      // The worker could not be reached, or could not reach this controller
      // with its session: its loss, not the variant's, so the variant is
      // not held back from other workers.
      MarkUnreachableLocked(w->second);
      status = WorkerLostError(
          absl::StrCat("loading ", key.ToString(), " on ", worker_id, ": ", status.message()));
      if (inst.resizing) {
        inst.resizing = false;
      } else if (inst.phase == InstancePhase::kLoading) {
        LiveRemoveInstanceLocked(inst);
        w->second.instances.erase(it);
      }
    } else if (inst.resizing) {
      // A ready instance changed its replicas (or kept the old ones if that
      // failed); it served throughout.
      inst.resizing = false;
      if (status.ok()) inst.stats.replicas = inst.target_replicas;
    } else if (inst.phase == InstancePhase::kUnloading) {
      // Unloaded while its load was under way: nothing more to record.
    } else if (status.ok()) {
      inst.phase_since = options_.clock->Now();
      inst.phase = InstancePhase::kReady;
      load_failures_.erase(key);
      inst.history = policy::InstanceHistory{policy::InstanceState::kActive};
      LiveAddInstanceLocked(w->second, key, inst, policy::InstanceState::kActive);
      if (inst.live != policy::kNoId) live_.SetState(inst.live, policy::InstanceState::kActive);
    } else {
      inst.phase_since = options_.clock->Now();
      inst.phase = InstancePhase::kFailed;
      inst.error = std::string(status.message());
      load_failures_[key] = {inst.phase_since, inst.error};
      LiveRemoveInstanceLocked(inst);
    }
  }
  for (LoadWaiter& waiter : waiters) std::move(waiter)(status);
}

void Cluster::BeginUnload(const std::string& worker_id, const VariantKey& key,
                          absl::AnyInvocable<void() &&> drained) {
  {
    absl::MutexLock lock(&mu_);
    auto w = workers_.find(worker_id);
    InstanceRecord* found = nullptr;
    if (w != workers_.end()) {
      auto inst = w->second.instances.find(key);
      if (inst != w->second.instances.end()) found = &inst->second;
    }
    if (found != nullptr) {
      InstanceRecord& record = *found;
      record.phase = InstancePhase::kUnloading;
      record.phase_since = options_.clock->Now();
      LiveRemoveInstanceLocked(record);
      if (record.outstanding > 0 && drained) {
        record.drained = std::move(drained);
        return;
      }
      record.drained = nullptr;
    }
  }
  // Nothing in flight there (or nothing to unload): go ahead at once.
  if (drained) std::move(drained)();
}

bool Cluster::Unloading(const std::string& worker_id, const VariantKey& key) const {
  absl::MutexLock lock(&mu_);
  auto w = workers_.find(worker_id);
  if (w == workers_.end()) return false;
  auto inst = w->second.instances.find(key);
  return inst != w->second.instances.end() && inst->second.phase == InstancePhase::kUnloading;
}

uint64_t Cluster::NextInstanceGeneration() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

void Cluster::RemoveInstance(const std::string& worker_id, const VariantKey& key) {
  RemoveInstanceIf(worker_id, key, std::nullopt);
}

void Cluster::ForgetInstance(const std::string& worker_id, const VariantKey& key,
                             uint64_t instance_generation) {
  RemoveInstanceIf(worker_id, key, instance_generation);
}

void Cluster::RemoveInstanceIf(const std::string& worker_id, const VariantKey& key,
                               std::optional<uint64_t> generation) {
  std::vector<LoadWaiter> waiters;
  {
    absl::MutexLock lock(&mu_);
    auto w = workers_.find(worker_id);
    if (w == workers_.end()) return;
    auto inst = w->second.instances.find(key);
    if (inst == w->second.instances.end()) return;
    if (generation.has_value() && inst->second.generation != *generation) return;
    waiters.swap(inst->second.waiters);
    LiveRemoveInstanceLocked(inst->second);
    w->second.instances.erase(inst);
  }
  // Queries waiting for this instance's load or resize choose again, as
  // FinishLoad lets them for an instance unloaded while loading: the load
  // they waited for will not finish here. Dropped uncalled, their answers
  // would be lost (the front end then has nothing to send but a 500).
  for (LoadWaiter& waiter : waiters) std::move(waiter)(absl::OkStatus());
}

std::optional<std::pair<Nanos, std::string>> Cluster::LastLoadFailure(
    const VariantKey& key) const {
  absl::MutexLock lock(&mu_);
  auto it = load_failures_.find(key);
  if (it == load_failures_.end()) return std::nullopt;
  return it->second;
}

std::shared_ptr<WorkerApi> Cluster::Api(const std::string& worker_id) const {
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(worker_id);
  return it == workers_.end() ? nullptr : it->second.api;
}

std::vector<WorkerView> Cluster::Snapshot() const {
  absl::MutexLock lock(&mu_);
  std::vector<WorkerView> views;
  views.reserve(workers_.size());
  for (const auto& [id, w] : workers_) views.push_back(ViewOf(w));
  return views;
}

size_t Cluster::worker_count() const {
  absl::MutexLock lock(&mu_);
  return workers_.size();
}

size_t Cluster::reachable_worker_count() const {
  absl::MutexLock lock(&mu_);
  size_t reachable = 0;
  for (const auto& [id, w] : workers_) reachable += w.view.unreachable ? 0 : 1;
  return reachable;
}

}  // namespace maitre::controller
