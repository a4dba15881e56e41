// The selection half of Cluster: the live view the selection policy reads
// (policy/selection_live.h), kept in step with the cluster's own records,
// the instance state machine run on every report, and Select().
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "control/leaving.h"
#include "controller/dataplane/cluster.h"
#include "core/logging.h"

namespace maitre::controller {
namespace {

// Saturation is judged against the app's latency objective; an app without
// one is judged against this.
constexpr double kDefaultSloMs = 100;

}  // namespace

double Cluster::FreeMemoryLocked(const Worker& worker) const {
  // A leaving worker takes no new load, whichever router decides: less
  // than no room keeps every option (of any memory) off it, while its ready
  // instances still serve (BeginLeaving).
  if (worker.view.leaving_at.has_value()) return -1;
  double free = static_cast<double>(worker.view.type.memory_mb) - worker.view.memory_mb;
  // A load in progress will take its variant's memory: count it now, so the
  // next decision does not place a second load into the same room.
  for (const auto& [key, inst] : worker.instances) {
    if (inst.phase != InstancePhase::kLoading || index_ == nullptr) continue;
    policy::OptionId option = index_->FindOption(index_->FindVariant(key),
                                                 index_->FindType(worker.view.type.name));
    if (option != policy::kNoId) free -= index_->option(option).memory_mb;
  }
  return std::max(0.0, free);
}

void Cluster::LiveAddWorkerLocked(Worker& worker) {
  if (index_ == nullptr || worker.live != policy::kNoId) return;
  policy::WorkerTypeId type = index_->FindType(worker.view.type.name);
  if (type == policy::kNoId) return;
  worker.live = live_.AddWorker(
      {type, worker.view.cpu_utilisation, FreeMemoryLocked(worker), !worker.view.unreachable});
  worker_by_live_[worker.live] = worker.view.id;
}

void Cluster::LiveAddInstanceLocked(Worker& worker, const VariantKey& key, InstanceRecord& inst,
                                    policy::InstanceState state) {
  if (index_ == nullptr || worker.live == policy::kNoId || inst.live != policy::kNoId) return;
  policy::VariantId variant = index_->FindVariant(key);
  if (variant == policy::kNoId || !index_->variant(variant).present) return;
  policy::LiveInstance live;
  live.variant = variant;
  live.worker = worker.live;
  live.state = state;
  policy::OptionId option = index_->FindOption(variant, index_->FindType(worker.view.type.name));
  live.ready_at = options_.clock->Now() +
                  (option != policy::kNoId ? FromMillis(index_->option(option).load_ms) : 0);
  live.waiting = static_cast<int32_t>(inst.outstanding);
  auto id = live_.AddInstance(*index_, live);
  if (!id.ok()) return;
  inst.live = *id;
  inst.history.state = state;
  instance_by_live_[inst.live] = {worker.view.id, key};
  live_.UpdateWorker(worker.live, worker.view.cpu_utilisation, FreeMemoryLocked(worker));
}

void Cluster::LiveRemoveInstanceLocked(InstanceRecord& inst) {
  if (inst.live == policy::kNoId) return;
  live_.RemoveInstance(inst.live);
  instance_by_live_.erase(inst.live);
  inst.live = policy::kNoId;
}

void Cluster::LiveApplyReportLocked(Worker& worker) {
  if (worker.live == policy::kNoId) return;
  live_.UpdateWorker(worker.live, worker.view.cpu_utilisation, FreeMemoryLocked(worker));
  policy::WorkerTypeId type = index_->FindType(worker.view.type.name);
  for (auto& [key, inst] : worker.instances) {
    if (inst.phase != InstancePhase::kReady) continue;
    if (inst.live == policy::kNoId) {
      LiveAddInstanceLocked(worker, key, inst, policy::InstanceState::kActive);
      if (inst.live == policy::kNoId) continue;
    }
    const InstanceStats& s = inst.stats;
    live_.UpdateInstanceLoad(inst.live, s.mean_batch, s.replicas, s.served_qps, s.arrival_qps,
                             s.max_batch);
    policy::OptionId option = index_->FindOption(index_->FindVariant(key), type);
    if (option == policy::kNoId) continue;
    auto slo = slo_ms_.find(key.model);
    policy::InstanceObservation observation;
    observation.replicas = s.replicas;
    observation.queue_length = s.queue_length;
    observation.arrival_qps = s.arrival_qps;
    observation.served_qps = s.served_qps;
    observation.latency_p50_ms = s.latency_p50_ms;
    observation.latency_p99_ms = s.latency_p99_ms;
    observation.compute_p50_ms = s.compute_p50_ms;
    observation.mean_batch = s.mean_batch;
    observation.dropped_qps = s.dropped_qps;
    policy::InstanceStateStep step = policy::NextInstanceState(
        inst.history, observation, index_->option(option).profile,
        slo != slo_ms_.end() ? slo->second : kDefaultSloMs);
    if (step.history.state != inst.history.state) {
      spdlog::info("instance {} on {}: {} -> {}", key.ToString(), worker.view.id,
                   policy::InstanceStateName(inst.history.state),
                   policy::InstanceStateName(step.history.state));
    }
    inst.history = step.history;
    live_.SetState(inst.live, inst.history.state);
  }
}

void Cluster::SetSelectionIndex(std::shared_ptr<const policy::SelectionIndex> index,
                                std::map<std::string, double> slo_ms) {
  absl::MutexLock lock(&mu_);
  index_ = std::move(index);
  slo_ms_ = std::move(slo_ms);
  for (policy::InstanceId gone : live_.Sync(*index_)) {
    auto it = instance_by_live_.find(gone);
    if (it == instance_by_live_.end()) continue;
    auto w = workers_.find(it->second.first);
    if (w != workers_.end()) {
      auto inst = w->second.instances.find(it->second.second);
      if (inst != w->second.instances.end()) inst->second.live = policy::kNoId;
    }
    instance_by_live_.erase(it);
  }
  // Workers and instances that predate the index (or whose variant has just
  // been profiled) join the live view now.
  for (auto& [id, w] : workers_) {
    LiveAddWorkerLocked(w);
    for (auto& [key, inst] : w.instances) {
      LiveAddInstanceLocked(w, key, inst,
                            inst.phase == InstancePhase::kReady ? policy::InstanceState::kActive
                                                                : policy::InstanceState::kInactive);
    }
  }
}

std::shared_ptr<const policy::SelectionIndex> Cluster::selection_index() const {
  absl::MutexLock lock(&mu_);
  return index_;
}

void Cluster::SetRouteWeights(const std::vector<control::RouteWeight>& weights) {
  absl::MutexLock lock(&mu_);
  if (index_ == nullptr) return;
  std::vector<policy::LiveState::RouteWeight> live;
  for (const control::RouteWeight& w : weights) {
    auto worker = workers_.find(w.worker);
    policy::VariantId variant = index_->FindVariant(w.key);
    if (worker == workers_.end() || worker->second.live == policy::kNoId ||
        variant == policy::kNoId) {
      continue;
    }
    live.push_back({worker->second.live, variant, w.weight});
  }
  // The allocator is not shown leaving workers (BeginLeaving): each keeps
  // the weights it had, and with them its share of the queries until it
  // drains.
  std::vector<policy::WorkerId> leaving;
  for (const auto& [id, w] : workers_) {
    if (w.view.leaving_at.has_value() && w.live != policy::kNoId) leaving.push_back(w.live);
  }
  control::KeepLeavingWeights(live_, leaving, live);
  live_.SetRouteWeights(live);
}

SelectionResult Cluster::Select(const policy::SelectionRequest& request, LoadWaiter& waiter,
                                const std::vector<std::string>& avoid) {
  absl::MutexLock lock(&mu_);
  SelectionResult result;
  if (index_ == nullptr) {
    result.decision.outcome = policy::SelectionOutcome::kUnsatisfiable;
    return result;
  }
  // The workers the query was lost on are not accepting for this decision
  // (the lock keeps every other decision from seeing them so).
  std::vector<policy::WorkerId> hidden;
  for (const std::string& id : avoid) {
    auto w = workers_.find(id);
    if (w == workers_.end() || w->second.live == policy::kNoId || w->second.view.unreachable) {
      continue;  // gone, or not accepting anyway
    }
    live_.SetAccepting(w->second.live, false);
    hidden.push_back(w->second.live);
  }
  result.decision = RouteLocked(request, avoid);
  for (policy::WorkerId id : hidden) live_.SetAccepting(id, true);
  const policy::SelectionDecision& d = result.decision;
  if (d.serving != policy::kNoId) {
    result.variant = index_->variant(index_->option(d.serving).variant).key;
  }
  if (d.outcome == policy::SelectionOutcome::kUnsatisfiable ||
      (d.outcome == policy::SelectionOutcome::kUnavailable && !d.load.valid())) {
    result.explanation = policy::ExplainDecision(*index_, live_, request, d);
    return result;
  }
  // A load the decision asks for is marked now, under the same lock, so the
  // next query sees it under way rather than asking for it again.
  InstanceRecord* loading = nullptr;
  if (d.load.valid()) {
    auto wid = worker_by_live_.find(d.load.worker);
    const VariantKey& key = index_->variant(index_->option(d.load.option).variant).key;
    if (wid != worker_by_live_.end()) {
      Worker& w = workers_[wid->second];
      InstanceRecord& inst = w.instances[key];
      inst.phase = InstancePhase::kLoading;
      inst.error.clear();
      inst.phase_since = options_.clock->Now();
      inst.drained = nullptr;  // an instance being unloaded is taken back
      LiveAddInstanceLocked(w, key, inst, policy::InstanceState::kInactive);
      result.load = LoadOrder{w.view.id, key};
      loading = &inst;
      // Loads are rare (each is a state change), so each is logged with
      // the rule that chose the variant, and counted for the metric.
      const absl::string_view rule = policy::LoadRuleName(d.load_rule);
      ++selection_loads_[{key.ToString(), std::string(rule)}];
      spdlog::info("selection: loading {} on {} ({}) - {}", key.ToString(), w.view.id,
                   policy::SelectionOutcomeName(d.outcome),
                   policy::ExplainLoad(*index_, live_, request, d));
    }
  }
  if (d.outcome == policy::SelectionOutcome::kUnavailable) {
    result.explanation = policy::ExplainDecision(*index_, live_, request, d);
    return result;
  }
  if (d.outcome == policy::SelectionOutcome::kLoadAndServe && loading != nullptr) {
    loading->waiters.push_back(std::move(waiter));
    result.waiting_for_load = true;
    return result;
  }
  auto where = instance_by_live_.find(d.instance);
  if (where == instance_by_live_.end()) {
    result.decision.outcome = policy::SelectionOutcome::kUnavailable;
    result.explanation = "the chosen instance is gone; try again";
    return result;
  }
  Worker& w = workers_[where->second.first];
  InstanceRecord& inst = w.instances[where->second.second];
  result.variant = where->second.second;
  if (inst.phase == InstancePhase::kLoading) {
    // The policy may send a query to an instance that will be ready in
    // time; it waits for that load here rather than at the worker.
    inst.waiters.push_back(std::move(waiter));
    result.waiting_for_load = true;
    return result;
  }
  ++inst.outstanding;
  live_.Sent(*index_, inst.live, options_.clock->Now());
  result.route = Route{w.view.id, w.view.type.name, w.api, inst.generation, inst.outstanding};
  return result;
}

policy::SelectionDecision Cluster::RouteLocked(const policy::SelectionRequest& request,
                                               const std::vector<std::string>& avoid) {
  // A leaving worker serves like any other while more than the query's
  // margin is left, as MArk's spot instances serve through their notice
  // (docs/operations.md, "Spot interruptions"): taking its share away at
  // the notice would leave the others short while the replacement starts.
  const Nanos margin = control::LeavingMargin(options_.leaving_margin,
                                              request.requirements.latency_ms);
  std::vector<policy::WorkerId> serving;
  for (auto& [id, w] : workers_) {
    if (w.live == policy::kNoId || !ServesWhileLeaving(w, request.now, margin) ||
        std::find(avoid.begin(), avoid.end(), id) != avoid.end()) {
      continue;
    }
    serving.push_back(w.live);
  }
  return control::RouteBesideLeaving(*router_, *index_, live_, request, serving,
                                     [this](policy::InstanceId id) { return ReadyLocked(id); });
}

bool Cluster::ReadyLocked(policy::InstanceId id) const {
  auto where = instance_by_live_.find(id);
  if (where == instance_by_live_.end()) return false;
  auto w = workers_.find(where->second.first);
  if (w == workers_.end()) return false;
  auto inst = w->second.instances.find(where->second.second);
  return inst != w->second.instances.end() && inst->second.phase == InstancePhase::kReady;
}

std::map<std::pair<std::string, std::string>, int64_t> Cluster::SelectionLoadCounts() const {
  absl::MutexLock lock(&mu_);
  return selection_loads_;
}

const policy::VariantOption* Cluster::OptionOf(const VariantKey& key,
                                               const std::string& type) const {
  if (index_ == nullptr) return nullptr;
  policy::OptionId option = index_->FindOption(index_->FindVariant(key), index_->FindType(type));
  return option == policy::kNoId ? nullptr : &index_->option(option);
}

AdmissionView Cluster::AdmissionCandidates(const VariantKey& key,
                                           const std::string& worker_id) const {
  absl::MutexLock lock(&mu_);
  AdmissionView view;
  view.index = index_;
  const Nanos now = options_.clock->Now();
  for (const auto& [id, w] : workers_) {
    if (!worker_id.empty() && id != worker_id) continue;
    // A leaving worker's ready instances count while it serves
    // (BeginLeaving): routing sends queries there as to any other.
    const bool leaving = w.view.unreachable && ServesWhileLeaving(w, now, options_.leaving_margin);
    if (w.view.unreachable && !leaving) continue;
    for (const auto& [k, inst] : w.instances) {
      if (k.model != key.model || (!key.variant.empty() && k.variant != key.variant)) continue;
      if (inst.phase != InstancePhase::kReady &&
          (leaving || inst.phase != InstancePhase::kLoading)) {
        continue;
      }
      policy::AdmissionCandidate c;
      c.waiting = inst.outstanding;
      c.overhead = inst.overhead;
      c.slowdown = inst.slowdown;
      c.replicas = std::max(1, inst.stats.replicas);
      c.max_batch = inst.stats.max_batch;
      if (const policy::VariantOption* o = OptionOf(k, w.view.type.name); o != nullptr) {
        c.profile = &o->profile;
        if (inst.phase == InstancePhase::kLoading) {
          c.ready_in = std::max<Nanos>(0, inst.phase_since + FromMillis(o->load_ms) - now);
        }
      }
      view.candidates.push_back(c);
    }
  }
  return view;
}

}  // namespace maitre::controller
