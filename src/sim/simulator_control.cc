// The simulated world of a managed cluster (routing "selection"): what the
// real controller and workers do around the data path. Every
// `report_interval` each worker reports (utilisation, and per instance its
// arrivals, served rate, queue, batch execution times), and the instance
// state machine moves each instance's state; every `model_interval` and
// `cluster_interval` the allocator (control/allocator.h, the same one the
// controller runs) is shown the cluster (simulator_observe.cc) and its
// decisions are carried out here. Mechanism choices the policies leave open
// are written where they are made.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "policy/placement.h"
#include "sim/selection_router.h"
#include "sim/simulator.h"
#include "sim/simulator_sink.h"

namespace maitre::sim {
namespace {

using policy::InstanceState;
using policy::ModelScaleAction;

// Room for selection when a worker type does not limit memory.
constexpr double kUnlimitedMemoryMb = 1e12;

}  // namespace

absl::Status Simulator::SetUpControl() {
  const ControlSetup& c = setup_.control;
  if (c.report_interval <= 0 || c.model_interval <= 0 || c.cluster_interval <= 0) {
    return absl::InvalidArgumentError("control intervals must be > 0");
  }
  auto router = SelectionRouter::Create(setup_);
  if (!router.ok()) return router.status();
  selection_ = *std::move(router);
  control::AllocatorOptions options;
  for (const SimWorkerType& t : setup_.worker_types) {
    options.types.push_back(t.type);
    options.max_workers[t.type.name] = t.max_workers;
  }
  options.model_period = c.model_interval;
  options.model_scaling = c.model_autoscaling;
  options.model = c.model_autoscaler;
  options.cluster_scaling = c.cluster_autoscaling;
  options.cluster = c.cluster_autoscaler;
  options.min_instance_age = c.min_instance_age;
  options.observed_capacity_memory = c.observed_capacity_memory;
  options.saturated_cpu_utilisation = c.saturated_cpu_utilisation;
  options.consolidation = c.consolidation;
  options.migrate_interfered = c.migrate_interfered;
  options.migration = c.migration;
  options.proteus = c.proteus;
  options.mark = c.mark;
  for (const SimWorkerType& t : setup_.worker_types) {
    options.mark.launch_time.emplace(t.type.name, t.launch_delay);
  }
  auto allocator = control::CreateAllocator(c.allocator, options);
  if (!allocator.ok()) return allocator.status();
  allocator_ = *std::move(allocator);
  sink_ = std::make_unique<ControlSink>(this);
  models_ = ModelOptions();
  min_replica_cores_.assign(setup_.worker_types.size(), 0);
  for (const SimVariant& v : setup_.variants) {
    double& m = min_replica_cores_[v.worker_type];
    m = m == 0 ? v.cores_per_replica : std::min(m, v.cores_per_replica);
  }
  refused_.assign(setup_.apps.size(), 0);
  for (const SimJob& job : setup_.jobs) job_progress_.push_back({job.rows});
  next_model_round_ = c.model_interval;
  next_cluster_round_ = c.cluster_interval;
  return absl::OkStatus();
}

void Simulator::RecordShape(int32_t variant, int32_t type, int32_t delta) {
  shape_.push_back({now_, variant, type, delta});
}

void Simulator::Log(std::string line) {
  log_.push_back(absl::StrFormat("%10.3f %s", ToSeconds(now_), line));
}

// ---- routing ----

int32_t Simulator::Route(const RouteRequest& request) {
  SelectionRouter::Route route =
      selection_->Decide(request, [this](int32_t i) { return instances_[i].ready > 0; });
  int32_t target = route.instance;
  if (route.load_variant >= 0 && route.load_worker >= 0) {
    // Selection judges room by memory only; a simulated worker also refuses
    // a load it has no free cores for (it would oversubscribe them, which
    // the simulator does not model).
    const Worker& w = workers_[route.load_worker];
    const double free_cores = setup_.worker_types[w.type].type.cores - UsedCores(w);
    if (w.up && !w.removed &&
        free_cores + 1e-9 >= setup_.variants[route.load_variant].cores_per_replica) {
      int32_t i = StartLoad(route.load_worker, route.load_variant, 1, -1);
      ++control_.loads_by_selection;
      const bool for_capacity = route.load_rule == policy::LoadRule::kCapacity;
      control_.loads_by_selection_for_capacity += for_capacity;
      Log(absl::StrCat(w.id, " selection (", policy::SelectionOutcomeName(route.outcome),
                       for_capacity ? ", for capacity" : "", "): load ",
                       setup_.variants[route.load_variant].key.ToString()));
      if (route.outcome == policy::SelectionOutcome::kLoadAndServe) target = i;
    } else {
      ++control_.loads_refused;
      Log(absl::StrCat(w.id, " refused a load of ",
                       setup_.variants[route.load_variant].key.ToString(), ": no free cores"));
    }
  }
  if (route.action != SelectionRouter::Route::Action::kServe || target < 0) {
    // Demand the cluster could serve but not now: the workers never see it,
    // so the allocator is told (control/refused_share.h).
    if (route.outcome == policy::SelectionOutcome::kUnavailable ||
        route.outcome == policy::SelectionOutcome::kLoadAndServe) {
      ++refused_[request.app];
    }
    return -1;
  }
  selection_->Sent(target, now_);
  return target;
}

// ---- workers ----

int32_t Simulator::StartWorker(int32_t type, Nanos ready_at) {
  const int32_t w = static_cast<int32_t>(workers_.size());
  int32_t ordinal = 0;
  for (const Worker& x : workers_) ordinal += x.type == type;
  Worker worker;
  worker.type = type;
  worker.id = absl::StrCat(setup_.worker_types[type].type.name, "-", ordinal);
  worker.paid_from = now_;
  workers_.push_back(std::move(worker));
  RecordShape(-1, type, 1);
  if (ready_at <= now_) {
    OnWorkerUp(w);
  } else {
    events_.Push(ready_at, kWorkerUp, static_cast<uint32_t>(w));
  }
  return w;
}

void Simulator::OnWorkerUp(int32_t w) {
  Worker& worker = workers_[w];
  if (worker.removed) return;
  worker.up = true;
  if (now_ > 0) Log(absl::StrCat(worker.id, " is up"));
  worker.idle_since = now_;  // it holds nothing yet
  if (selection_ != nullptr) {
    selection_->AddWorker(w, worker.type, 0, FreeMemoryForSelection(worker));
    DrawInterruption(w);
  }
}

void Simulator::RemoveWorker(int32_t w) {
  Worker& worker = workers_[w];
  worker.removed = true;
  // Given back within a billing block, it is paid to the block's end.
  worker.paid_until = setup_.worker_types[worker.type].type.PaidUntil(worker.paid_from, now_);
  RecordShape(-1, worker.type, -1);
  // The cluster autoscaler removes idle workers only; anything still queued
  // there is answered before its instances go.
  std::vector<int32_t> instances = worker.instances;
  for (int32_t i : instances) {
    CancelLoads(i);
    if (instances_[i].alive) UnloadInstance(i);
  }
  selection_->RemoveWorker(w);
}

void Simulator::OnWorkerLost(int32_t loss) {
  const int32_t w = WorkerById(setup_.worker_losses[loss].worker);
  if (w < 0) {
    Log(absl::StrCat(setup_.worker_losses[loss].worker, " cannot be lost: no such worker"));
    return;
  }
  Log(absl::StrCat(workers_[w].id, " lost"));
  ++control_.workers_lost;
  LoseWorker(w);
}

void Simulator::LoseWorker(int32_t w) {
  Worker& worker = workers_[w];
  worker.removed = true;
  worker.paid_until = now_;
  RecordShape(-1, worker.type, -1);
  Counters& second = Second(now_);
  metrics_.end_time = now_;
  for (int32_t i : std::vector<int32_t>(worker.instances)) {
    SimInstance& inst = instances_[i];
    CancelLoads(i);
    // What was queued or running there is lost with it.
    DropPrefix(i, static_cast<int32_t>(inst.queue.size() - inst.head));
    for (int32_t r : inst.replicas) {
      Replica& rep = replicas_[r];
      if (rep.busy) {
        const int32_t n = static_cast<int32_t>(rep.batch.size());
        for (const InFlight& q : rep.batch) {
          if (q.tag.job_rows > 0) {
            OnJobChunkLost();
            continue;
          }
          if (q.tag.pipeline_query >= 0) {
            OnStageFailed(q.tag.pipeline_query, /*rejected=*/false);
            continue;
          }
          ++metrics_.total.dropped;
          ++metrics_.per_app[q.tag.app].dropped;
          ++second.dropped;
        }
        in_system_ -= n;
        selection_->AddWaiting(i, -n);
      }
      if (rep.ready && !rep.retiring) RecordShape(inst.variant, -1, -1);
      rep.gone = true;
    }
    inst.replicas.clear();
    inst.ready = inst.idle = inst.loading = inst.running_rows = 0;
    views_[i].running_rows = 0;
    if (!inst.draining) selection_->RemoveInstance(i);
    inst.draining = true;
    inst.alive = false;
  }
  worker.instances.clear();
  selection_->RemoveWorker(w);
}

double Simulator::UsedCores(const Worker& w) const {
  double cores = 0;
  for (int32_t i : w.instances) {
    const SimInstance& inst = instances_[i];
    cores +=
        static_cast<double>(inst.replicas.size()) * setup_.variants[inst.variant].cores_per_replica;
  }
  return cores;
}

double Simulator::UsedMemory(const Worker& w) const {
  double memory = 0;
  for (int32_t i : w.instances) {
    const SimInstance& inst = instances_[i];
    memory += static_cast<double>(inst.replicas.size()) *
              setup_.variants[inst.variant].profile.memory_mb();
  }
  return memory;
}

double Simulator::FreeMemoryForSelection(const Worker& w) const {
  // A leaving worker takes no new load, whichever router decides: less
  // than no room keeps every option (of any memory) off it, as the
  // controller's Cluster reports it (control/leaving.h).
  if (w.stops_at.has_value()) return -1;
  if (!setup_.control.selection_loads) return 0;
  const WorkerType& type = setup_.worker_types[w.type].type;
  // A worker without a free core for even the smallest replica has no room
  // for a new instance, whatever its memory says.
  if (type.cores - UsedCores(w) + 1e-9 < min_replica_cores_[w.type]) return 0;
  if (type.memory_mb <= 0) return kUnlimitedMemoryMb;
  return std::max(0.0, static_cast<double>(type.memory_mb) - UsedMemory(w));
}

// ---- instances and replicas ----

int32_t Simulator::InstanceOf(int32_t w, int32_t variant) const {
  for (int32_t i : workers_[w].instances) {
    const SimInstance& inst = instances_[i];
    if (inst.variant == variant && inst.alive && !inst.draining) return i;
  }
  return -1;
}

int32_t Simulator::VariantOnType(const std::string& model, const std::string& variant,
                                 int32_t type) const {
  for (size_t v = 0; v < setup_.variants.size(); ++v) {
    const SimVariant& sv = setup_.variants[v];
    if (sv.worker_type == type && sv.key.model == model && sv.key.variant == variant) {
      return static_cast<int32_t>(v);
    }
  }
  return -1;
}

int32_t Simulator::StartLoad(int32_t w, int32_t variant, int32_t count, int32_t transition) {
  int32_t i = InstanceOf(w, variant);
  const bool fresh = i < 0;
  if (fresh) {
    const int32_t app = variant_app_[variant];
    if (app < 0) return -1;
    auto added = AddInstance(app, variant, w);
    if (!added.ok()) {
      Fail(added.status());
      return -1;
    }
    i = *added;
  }
  const Nanos ready_at =
      now_ + static_cast<Nanos>(std::llround(setup_.variants[variant].profile.load_ms() *
                                             static_cast<double>(kMillisecond)));
  for (int32_t k = 0; k < count; ++k) {
    const int32_t r = static_cast<int32_t>(replicas_.size());
    Replica rep;
    rep.instance = i;
    rep.transition = transition;
    replicas_.push_back(std::move(rep));
    instances_[i].replicas.push_back(r);
    ++instances_[i].loading;
    events_.Push(ready_at, kLoadDone, static_cast<uint32_t>(r));
  }
  if (transition >= 0) transitions_[transition].pending_loads += count;
  if (fresh) {
    if (auto s = selection_->AddInstance(i, variant, w, ready_at); !s.ok()) Fail(s);
  }
  // The memory a load will take is taken out of the room selection sees at
  // once, so the next query does not plan a second load into it.
  const Worker& worker = workers_[w];
  selection_->UpdateWorker(w, worker.utilisation, FreeMemoryForSelection(worker));
  return i;
}

void Simulator::OnLoadDone(int32_t r) {
  Replica& rep = replicas_[r];
  if (rep.gone) return;  // cancelled with its worker
  const int32_t i = rep.instance;
  SimInstance& inst = instances_[i];
  rep.ready = true;
  --inst.loading;
  ++inst.ready;
  ++inst.idle;
  RecordShape(inst.variant, -1, 1);
  if (inst.history.state == InstanceState::kInactive) {
    // The load finished: the controller marks the instance Active at once;
    // reports move it on from there.
    inst.history = policy::InstanceHistory();
    inst.history.state = InstanceState::kActive;
    selection_->SetState(i, inst.history.state);
  }
  inst.ready_since = now_;
  selection_->UpdateInstanceLoad(i, inst.mean_batch, inst.ready, inst.served_qps,
                                 inst.arrival_qps, inst.max_batch);
  if (rep.transition >= 0) EndTransitionLoad(rep.transition, true);
  RunDecisions(i);
}

void Simulator::CancelLoads(int32_t i) {
  SimInstance& inst = instances_[i];
  std::vector<int32_t> kept;
  for (int32_t r : inst.replicas) {
    Replica& rep = replicas_[r];
    if (rep.ready) {
      kept.push_back(r);
      continue;
    }
    rep.gone = true;
    --inst.loading;
    if (rep.transition >= 0) EndTransitionLoad(rep.transition, false);
  }
  inst.replicas = std::move(kept);
}

void Simulator::EndTransitionLoad(int32_t id, bool ready) {
  Transition& t = transitions_[id];
  if (--t.pending_loads > 0) return;
  if (ready) {
    // Make before break: the new replicas are ready, the old ones go.
    for (const auto& [variant, n] : t.removals) {
      int32_t from = InstanceOf(t.worker, variant);
      if (from >= 0) RemoveReplicas(from, n);
    }
  }
  if (t.done) std::exchange(t.done, nullptr)();
}

void Simulator::RemoveReplicas(int32_t i, int32_t count) {
  SimInstance& inst = instances_[i];
  if (!inst.alive || inst.draining || count <= 0) return;
  if (count >= inst.ready && inst.loading == 0) {
    control_.replicas_removed += inst.ready;
    UnloadInstance(i);
    return;
  }
  count = std::min(count, inst.ready - (inst.loading == 0 ? 1 : 0));
  // Idle replicas go first (the newest first); busy ones finish their batch.
  std::vector<int32_t> order(inst.replicas.rbegin(), inst.replicas.rend());
  std::stable_partition(order.begin(), order.end(),
                        [this](int32_t r) { return !replicas_[r].busy; });
  for (int32_t r : order) {
    if (count == 0) break;
    Replica& rep = replicas_[r];
    if (!rep.ready || rep.retiring) continue;
    --count;
    --inst.ready;
    ++control_.replicas_removed;
    RecordShape(inst.variant, -1, -1);
    if (rep.busy) {
      rep.retiring = true;
    } else {
      --inst.idle;
      DropReplica(r);
    }
  }
  selection_->UpdateInstanceLoad(i, inst.mean_batch, std::max(1, inst.ready), inst.served_qps,
                                 inst.arrival_qps, inst.max_batch);
}

void Simulator::DropReplica(int32_t r) {
  Replica& rep = replicas_[r];
  rep.gone = true;
  auto& list = instances_[rep.instance].replicas;
  list.erase(std::find(list.begin(), list.end(), r));
}

void Simulator::UnloadInstance(int32_t i) {
  SimInstance& inst = instances_[i];
  inst.draining = true;
  selection_->RemoveInstance(i);
  MaybeFinishDraining(i);
}

void Simulator::MaybeFinishDraining(int32_t i) {
  SimInstance& inst = instances_[i];
  if (!inst.alive || inst.head < inst.queue.size() || inst.running_rows > 0) return;
  for (int32_t r : inst.replicas) {
    Replica& rep = replicas_[r];
    if (rep.busy) return;
    rep.gone = true;
    if (rep.ready && !rep.retiring) RecordShape(inst.variant, -1, -1);
  }
  inst.replicas.clear();
  inst.ready = inst.idle = inst.loading = 0;
  inst.alive = false;
  auto& list = workers_[inst.worker].instances;
  list.erase(std::find(list.begin(), list.end(), i));
  Worker& worker = workers_[inst.worker];
  if (!worker.removed) {
    selection_->UpdateWorker(inst.worker, worker.utilisation, FreeMemoryForSelection(worker));
  }
}

// ---- monitoring and autoscaling rounds ----

void Simulator::OnControl() {
  const Nanos interval = now_ - last_report_;
  for (size_t w = 0; w < workers_.size(); ++w) {
    if (workers_[w].up && !workers_[w].removed) Report(static_cast<int32_t>(w), interval);
  }
  last_report_ = now_;
  RunJobs();
  if (now_ >= next_model_round_) {
    next_model_round_ += setup_.control.model_interval;
    if (absl::Status s = allocator_->ModelRound(Observe(true), *sink_); !s.ok()) Fail(s);
  }
  if (now_ >= next_cluster_round_ && status_.ok()) {
    next_cluster_round_ += setup_.control.cluster_interval;
    if (absl::Status s = allocator_->ClusterRound(Observe(false), *sink_); !s.ok()) Fail(s);
  }
  // Rounds stop with the trace; queries still queued are answered without
  // them.
  if (has_arrival_ || now_ < setup_.horizon) {
    events_.Push(now_ + setup_.control.report_interval, kControl, 0);
  }
}

void Simulator::Report(int32_t w, Nanos interval) {
  Worker& worker = workers_[w];
  const WorkerType& type = setup_.worker_types[worker.type].type;
  const double seconds = std::max(1e-9, ToSeconds(interval));
  bool queued = false;
  for (int32_t i : worker.instances) {
    SimInstance& inst = instances_[i];
    queued |= inst.head < inst.queue.size();
    for (int32_t r : inst.replicas) {
      const Replica& rep = replicas_[r];
      if (!rep.busy) continue;
      worker.busy_core_ns += static_cast<Nanos>(
          std::llround(static_cast<double>(now_ - std::max(rep.batch_start, last_report_)) *
                       setup_.variants[inst.variant].cores_per_replica));
    }
  }
  const double core_ns = static_cast<double>(type.cores) * static_cast<double>(interval);
  worker.utilisation = std::min(1.0, static_cast<double>(worker.busy_core_ns) / core_ns);
  worker.job_utilisation =
      std::min(worker.utilisation, static_cast<double>(worker.job_busy_core_ns) / core_ns);
  worker.busy_core_ns = 0;
  worker.job_busy_core_ns = 0;

  for (int32_t i : worker.instances) {
    SimInstance& inst = instances_[i];
    inst.arrival_qps = static_cast<double>(inst.interval_arrivals) / seconds;
    inst.online_qps =
        static_cast<double>(inst.interval_arrivals - inst.interval_job_arrivals) / seconds;
    inst.served_qps = static_cast<double>(inst.interval_served) / seconds;
    if (inst.interval_batches > 0) {
      inst.mean_batch = static_cast<double>(inst.interval_rows) / inst.interval_batches;
    }
    if (!inst.draining && inst.ready > 0) {
      policy::InstanceObservation report;
      report.replicas = inst.ready;
      report.queue_length = static_cast<int32_t>(inst.queue.size() - inst.head);
      report.arrival_qps = inst.arrival_qps;
      report.served_qps = inst.served_qps;
      report.mean_batch = inst.interval_batches > 0 ? inst.mean_batch : 0;
      if (!inst.interval_compute.empty()) {
        auto mid = inst.interval_compute.begin() + inst.interval_compute.size() / 2;
        std::nth_element(inst.interval_compute.begin(), mid, inst.interval_compute.end());
        report.compute_p50_ms = ToMillis(*mid);
        inst.compute_p50_ms = report.compute_p50_ms;
      }
      const double slo_ms = ToMillis(setup_.apps[inst.app].latency);
      policy::InstanceStateStep step =
          policy::NextInstanceState(inst.history, report, setup_.variants[inst.variant].profile,
                                    slo_ms, setup_.control.instance_state);
      if (step.history.state != inst.history.state) {
        ++control_.state_changes;
        Log(absl::StrCat(worker.id, " ", setup_.variants[inst.variant].key.ToString(), ": ",
                         policy::InstanceStateName(inst.history.state), " -> ",
                         policy::InstanceStateName(step.history.state), " (",
                         policy::StateReasonName(step.reason), ")"));
      }
      inst.history = step.history;
      selection_->SetState(i, inst.history.state);
      selection_->UpdateInstanceLoad(i, inst.mean_batch, inst.ready, inst.served_qps,
                                     inst.arrival_qps, inst.max_batch);
    }
    inst.interval_arrivals = 0;
    inst.interval_job_arrivals = 0;
    inst.interval_served = 0;
    inst.interval_batches = 0;
    inst.interval_rows = 0;
    inst.interval_compute.clear();
  }
  if (worker.active_this_interval || queued) {
    worker.idle_since.reset();
  } else if (!worker.idle_since.has_value()) {
    worker.idle_since = last_report_;
  }
  worker.active_this_interval = false;
  selection_->UpdateWorker(w, worker.utilisation, FreeMemoryForSelection(worker));
}

}  // namespace maitre::sim
