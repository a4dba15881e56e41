// The control plane of a managed cluster (routing "selection"): what the
// real controller and workers do around the data path, driven by the same
// policies. Every `report_interval` each worker reports (utilisation, and per
// instance its arrivals, served rate, queue, batch execution times), and the
// instance state machine moves each instance's state; every `model_interval`
// each worker runs the model autoscaler; every `cluster_interval` the
// cluster autoscaler runs. Mechanism choices the policies leave open are
// written where they are made.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "policy/placement.h"
#include "sim/selection_router.h"
#include "sim/simulator.h"

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
  if (c.model_autoscaling != ModelAutoscaling::kOff) {
    policy::ModelAutoscalerOptions options = c.model_autoscaler;
    if (c.model_autoscaling == ModelAutoscaling::kHorizontal) {
      options.allow_upgrade = false;
      options.allow_downgrade = false;
    }
    auto scaler = policy::ModelAutoscaler::Create(options);
    if (!scaler.ok()) return scaler.status();
    model_autoscaler_ = *std::move(scaler);
  }
  if (c.cluster_autoscaling) {
    policy::ClusterAutoscalerOptions options = c.cluster_autoscaler;
    options.types.clear();
    for (const SimWorkerType& t : setup_.worker_types) {
      options.types.push_back(t.type);
      options.max_workers[t.type.name] = t.max_workers;
    }
    auto scaler = policy::ClusterAutoscaler::Create(options);
    if (!scaler.ok()) return scaler.status();
    cluster_autoscaler_ = *std::move(scaler);
  }
  min_replica_cores_.assign(setup_.worker_types.size(), 0);
  for (const SimVariant& v : setup_.variants) {
    double& m = min_replica_cores_[v.worker_type];
    m = m == 0 ? v.cores_per_replica : std::min(m, v.cores_per_replica);
  }
  refused_.assign(setup_.apps.size(), 0);
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
  SelectionRouter::Route route = selection_->Decide(request);
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
      Log(absl::StrCat(w.id, " selection (", policy::SelectionOutcomeName(route.outcome),
                       "): load ", setup_.variants[route.load_variant].key.ToString()));
      if (route.outcome == policy::SelectionOutcome::kLoadAndServe) target = i;
    } else {
      ++control_.loads_refused;
      Log(absl::StrCat(w.id, " refused a load of ",
                       setup_.variants[route.load_variant].key.ToString(), ": no free cores"));
    }
  }
  if (route.action != SelectionRouter::Route::Action::kServe || target < 0) {
    // Demand the cluster could serve but not now: the workers never see it,
    // so the controller tells them (see AttributeRefused).
    if (route.outcome == policy::SelectionOutcome::kUnavailable ||
        route.outcome == policy::SelectionOutcome::kLoadAndServe) {
      ++refused_[request.app];
    }
    return -1;
  }
  selection_->AddWaiting(target, +1);
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
  placing_.emplace_back();
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
  }
}

void Simulator::RemoveWorker(int32_t w) {
  Worker& worker = workers_[w];
  worker.removed = true;
  worker.paid_until = now_;
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

double Simulator::UsedCores(const Worker& w) const {
  double cores = 0;
  for (int32_t i : w.instances) {
    const Instance& inst = instances_[i];
    cores +=
        static_cast<double>(inst.replicas.size()) * setup_.variants[inst.variant].cores_per_replica;
  }
  return cores;
}

double Simulator::UsedMemory(const Worker& w) const {
  double memory = 0;
  for (int32_t i : w.instances) {
    const Instance& inst = instances_[i];
    memory += static_cast<double>(inst.replicas.size()) *
              setup_.variants[inst.variant].profile.memory_mb();
  }
  return memory;
}

double Simulator::FreeMemoryForSelection(const Worker& w) const {
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
    const Instance& inst = instances_[i];
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
  Instance& inst = instances_[i];
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
  selection_->UpdateInstanceLoad(i, inst.mean_batch, inst.ready, inst.served_qps);
  if (rep.placed_from >= 0) {
    int32_t& pending = placing_[rep.placed_from][setup_.variants[inst.variant].key.model];
    pending = std::max(0, pending - 1);
  }
  if (rep.transition >= 0) {
    Transition& t = transitions_[rep.transition];
    if (--t.pending_loads == 0) {
      // Make before break: the new replicas are ready, the old ones go.
      for (const auto& [variant, n] : t.removals) {
        int32_t from = InstanceOf(t.worker, variant);
        if (from >= 0) RemoveReplicas(from, n);
      }
    }
  }
  RunDecisions(i);
}

void Simulator::CancelLoads(int32_t i) {
  Instance& inst = instances_[i];
  std::vector<int32_t> kept;
  for (int32_t r : inst.replicas) {
    Replica& rep = replicas_[r];
    if (rep.ready) {
      kept.push_back(r);
      continue;
    }
    rep.gone = true;
    --inst.loading;
    if (rep.placed_from >= 0) {
      int32_t& pending = placing_[rep.placed_from][setup_.variants[inst.variant].key.model];
      pending = std::max(0, pending - 1);
    }
  }
  inst.replicas = std::move(kept);
}

void Simulator::RemoveReplicas(int32_t i, int32_t count) {
  Instance& inst = instances_[i];
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
  selection_->UpdateInstanceLoad(i, inst.mean_batch, std::max(1, inst.ready), inst.served_qps);
}

void Simulator::DropReplica(int32_t r) {
  Replica& rep = replicas_[r];
  rep.gone = true;
  auto& list = instances_[rep.instance].replicas;
  list.erase(std::find(list.begin(), list.end(), r));
}

void Simulator::UnloadInstance(int32_t i) {
  Instance& inst = instances_[i];
  inst.draining = true;
  selection_->RemoveInstance(i);
  MaybeFinishDraining(i);
}

void Simulator::MaybeFinishDraining(int32_t i) {
  Instance& inst = instances_[i];
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

void Simulator::AttributeRefused() {
  // Queries selection answered "unavailable" never reach a worker, yet they
  // are demand the autoscalers must see (a worker's served rate saturates at
  // its capacity, and here even its arrivals would). The controller adds
  // each app's refused queries to the offered load of the instances serving
  // it, in proportion to the queries each was sent (evenly when none was).
  for (size_t a = 0; a < refused_.size(); ++a) {
    if (refused_[a] == 0) continue;
    int64_t sent = 0;
    int32_t serving = 0;
    for (const Worker& w : workers_) {
      if (!w.up || w.removed) continue;
      for (int32_t i : w.instances) {
        const Instance& inst = instances_[i];
        if (inst.app != static_cast<int32_t>(a) || inst.draining) continue;
        sent += inst.interval_arrivals;
        ++serving;
      }
    }
    const double refused = static_cast<double>(refused_[a]);
    refused_[a] = 0;  // nothing serves the app yet: selection plans its loads
    if (serving == 0) continue;
    for (const Worker& w : workers_) {
      if (!w.up || w.removed) continue;
      for (int32_t i : w.instances) {
        Instance& inst = instances_[i];
        if (inst.app != static_cast<int32_t>(a) || inst.draining) continue;
        inst.refused_share =
            refused *
            (sent > 0 ? static_cast<double>(inst.interval_arrivals) / sent : 1.0 / serving);
      }
    }
  }
}

void Simulator::OnControl() {
  const Nanos interval = now_ - last_report_;
  AttributeRefused();
  for (size_t w = 0; w < workers_.size(); ++w) {
    if (workers_[w].up && !workers_[w].removed) Report(static_cast<int32_t>(w), interval);
  }
  last_report_ = now_;
  if (model_autoscaler_ != nullptr && now_ >= next_model_round_) {
    next_model_round_ += setup_.control.model_interval;
    Consolidate();
    for (size_t w = 0; w < workers_.size() && status_.ok(); ++w) {
      if (workers_[w].up && !workers_[w].removed) RunModelAutoscaler(static_cast<int32_t>(w));
    }
  }
  if (cluster_autoscaler_ != nullptr && now_ >= next_cluster_round_ && status_.ok()) {
    next_cluster_round_ += setup_.control.cluster_interval;
    RunClusterAutoscaler();
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
    Instance& inst = instances_[i];
    queued |= inst.head < inst.queue.size();
    for (int32_t r : inst.replicas) {
      const Replica& rep = replicas_[r];
      if (!rep.busy) continue;
      worker.busy_core_ns += static_cast<Nanos>(
          std::llround(static_cast<double>(now_ - std::max(rep.batch_start, last_report_)) *
                       setup_.variants[inst.variant].cores_per_replica));
    }
  }
  worker.utilisation =
      std::min(1.0, static_cast<double>(worker.busy_core_ns) /
                        (static_cast<double>(type.cores) * static_cast<double>(interval)));
  worker.busy_core_ns = 0;

  for (int32_t i : worker.instances) {
    Instance& inst = instances_[i];
    inst.arrival_qps = static_cast<double>(inst.interval_arrivals) / seconds;
    inst.offered_qps = inst.arrival_qps + inst.refused_share / seconds;
    inst.refused_share = 0;
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
      selection_->UpdateInstanceLoad(i, inst.mean_batch, inst.ready, inst.served_qps);
    }
    inst.interval_arrivals = 0;
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

policy::ModelScalingSnapshot Simulator::ScalingSnapshot(int32_t w) const {
  const Worker& worker = workers_[w];
  const WorkerType& type = setup_.worker_types[worker.type].type;
  policy::ModelScalingSnapshot snapshot;
  snapshot.cores = type.cores;
  snapshot.memory_mb = static_cast<double>(type.memory_mb);
  std::vector<std::string> models;
  for (int32_t i : worker.instances) {
    const Instance& inst = instances_[i];
    const SimVariant& v = setup_.variants[inst.variant];
    // Draining instances and retiring replicas still hold their resources,
    // which the policy does not manage.
    int32_t held = inst.draining ? static_cast<int32_t>(inst.replicas.size()) : 0;
    if (!inst.draining) {
      for (int32_t r : inst.replicas) held += replicas_[r].retiring;
    }
    snapshot.reserved_cores += held * v.cores_per_replica;
    snapshot.reserved_memory_mb += held * v.profile.memory_mb();
    if (!inst.draining && std::find(models.begin(), models.end(), v.key.model) == models.end()) {
      models.push_back(v.key.model);
    }
  }
  for (const std::string& model : models) {
    policy::ScalingModel m;
    m.model = model;
    int32_t app = -1;
    for (size_t v = 0; v < setup_.variants.size(); ++v) {
      const SimVariant& sv = setup_.variants[v];
      if (sv.worker_type != worker.type || sv.key.model != model) continue;
      if (variant_app_[v] < 0) continue;  // not one the app may use
      if (app < 0) app = variant_app_[v];
      const double slo_ms = ToMillis(setup_.apps[std::max(0, variant_app_[v])].latency);
      policy::ScalingVariant scaling = policy::MakeScalingVariant(
          sv.key.variant, sv.accuracy, sv.profile, slo_ms, type, sv.cores_per_replica);
      int32_t i = InstanceOf(w, static_cast<int32_t>(v));
      if (i >= 0) {
        scaling.replicas = instances_[i].ready;
        scaling.loading = instances_[i].loading;
        m.load_qps += instances_[i].offered_qps;
      }
      m.variants.push_back(std::move(scaling));
    }
    if (app >= 0 && setup_.apps[app].min_accuracy > 0)
      m.min_accuracy = setup_.apps[app].min_accuracy;
    snapshot.models.push_back(std::move(m));
  }
  return snapshot;
}

void Simulator::Consolidate() {
  std::vector<policy::WorkerScalingSnapshot> snapshots;
  for (size_t w = 0; w < workers_.size(); ++w) {
    if (!workers_[w].up || workers_[w].removed) continue;
    snapshots.push_back({workers_[w].id, ScalingSnapshot(static_cast<int32_t>(w))});
  }
  auto decision = policy::DecideConsolidation(snapshots, consolidation_state_, now_,
                                              model_autoscaler_->options());
  if (!decision.ok()) {
    Fail(absl::InternalError(absl::StrCat("consolidation: ", decision.status().message())));
    return;
  }
  consolidation_state_ = std::move(decision->state);
  for (const policy::VacateAction& a : decision->actions) {
    ++control_.vacated;
    Log(absl::StrCat(a.worker, " model autoscaler: ", a.reason));
    for (size_t w = 0; w < workers_.size(); ++w) {
      if (workers_[w].id != a.worker) continue;
      for (const auto& [variant, count] : a.replicas) {
        const int32_t v = VariantOnType(a.model, variant, workers_[w].type);
        if (int32_t i = v >= 0 ? InstanceOf(static_cast<int32_t>(w), v) : -1; i >= 0) {
          RemoveReplicas(i, count);
        }
      }
    }
  }
}

void Simulator::RunModelAutoscaler(int32_t w) {
  Worker& worker = workers_[w];
  policy::ModelScalingSnapshot snapshot = ScalingSnapshot(w);
  if (snapshot.models.empty()) return;
  auto decision = model_autoscaler_->Decide(snapshot, worker.autoscaler_state, now_);
  if (!decision.ok()) {
    Fail(absl::InternalError(
        absl::StrCat("model autoscaler on ", worker.id, ": ", decision.status().message())));
    return;
  }
  worker.autoscaler_state = std::move(decision->state);
  bool asked = false;
  for (const ModelScaleAction& a : decision->actions) {
    ++control_.model_actions[static_cast<int>(a.kind)];
    // A worker that cannot fit its move asks every round; log the first.
    const bool placement = a.kind == ModelScaleAction::Kind::kNeedsPlacement;
    if (!placement || !worker.asked_placement) {
      Log(absl::StrCat(worker.id, " model autoscaler: ", a.reason));
    }
    asked |= placement;
    const int32_t to = VariantOnType(a.model, a.to_variant, worker.type);
    switch (a.kind) {
      case ModelScaleAction::Kind::kReplicate:
      case ModelScaleAction::Kind::kAddVariant:
        if (to >= 0 && a.add > 0) {
          StartLoad(w, to, a.add, -1);
          control_.loads_by_autoscaler += a.add;
        }
        break;
      case ModelScaleAction::Kind::kUpgrade:
      case ModelScaleAction::Kind::kDowngrade: {
        Transition t;
        t.worker = w;
        if (int32_t from = VariantOnType(a.model, a.from_variant, worker.type); from >= 0) {
          t.removals.push_back({from, a.remove});
        }
        for (const auto& [name, n] : a.also_remove) {
          if (int32_t v = VariantOnType(a.model, name, worker.type); v >= 0) {
            t.removals.push_back({v, n});
          }
        }
        if (to < 0 || a.add <= 0) {
          for (const auto& [v, n] : t.removals) {
            if (int32_t i = InstanceOf(w, v); i >= 0) RemoveReplicas(i, n);
          }
          break;
        }
        const int32_t id = static_cast<int32_t>(transitions_.size());
        transitions_.push_back(std::move(t));
        StartLoad(w, to, a.add, id);
        control_.loads_by_autoscaler += a.add;
        break;
      }
      case ModelScaleAction::Kind::kRemoveReplica:
        if (int32_t from = VariantOnType(a.model, a.from_variant, worker.type); from >= 0) {
          if (int32_t i = InstanceOf(w, from); i >= 0) RemoveReplicas(i, a.remove);
        }
        break;
      case ModelScaleAction::Kind::kNeedsPlacement:
        PlaceElsewhere(w, a);
        break;
    }
  }
  workers_[w].asked_placement = asked;
}

void Simulator::PlaceElsewhere(int32_t source, const ModelScaleAction& action) {
  // One request at a time per model: while replicas placed for an earlier
  // request load, this worker's load has not had the chance to move to them.
  int32_t& pending = placing_[source][action.model];
  if (pending > 0) return;
  const int32_t type = workers_[source].type;
  int32_t variant = VariantOnType(action.model, action.to_variant, type);
  if (variant < 0 || action.add <= 0) return;
  if (setup_.control.model_autoscaling == ModelAutoscaling::kHorizontal &&
      InstanceOf(source, variant) < 0) {
    // The policy suggests the cheapest variant to add whatever its options
    // say; a horizontal-only baseline adds replicas of what runs. Take the
    // running variant of the model with the most throughput per replica.
    int32_t best = -1;
    double best_qps = -1;
    for (int32_t i : workers_[source].instances) {
      const Instance& inst = instances_[i];
      const SimVariant& v = setup_.variants[inst.variant];
      if (inst.draining || v.key.model != action.model) continue;
      const double qps = v.profile.SaturationQps(ToMillis(setup_.apps[inst.app].latency));
      if (qps > best_qps) {
        best = inst.variant;
        best_qps = qps;
      }
    }
    if (best < 0) return;
    variant = best;
  }
  const double cores = setup_.variants[variant].cores_per_replica;
  const double memory = setup_.variants[variant].profile.memory_mb();
  // The suggestion is for this worker's type: place its replicas on the
  // workers of that type with room, by the placement policy. The asking
  // worker is a candidate too: the policy asks only when the whole move does
  // not fit there, and part of it may.
  std::vector<policy::PlacementWorker> candidates;
  std::vector<int32_t> ids;
  const WorkerType& t = setup_.worker_types[type].type;
  for (size_t w = 0; w < workers_.size(); ++w) {
    const Worker& worker = workers_[w];
    if (worker.type != type || !worker.up || worker.removed) continue;
    policy::PlacementWorker p;
    p.id = worker.id;
    p.total_cores = t.cores;
    p.total_memory_mb = static_cast<double>(t.memory_mb);
    p.free_cores = t.cores - UsedCores(worker);
    p.free_memory_mb = t.memory_mb > 0 ? t.memory_mb - UsedMemory(worker) : 0;
    candidates.push_back(p);
    ids.push_back(static_cast<int32_t>(w));
  }
  if (candidates.empty()) return;
  std::vector<policy::PlacementDemand> demands(action.add, {cores, memory});
  std::vector<std::optional<size_t>> placed = policy::PlaceAll(demands, candidates);
  for (const std::optional<size_t>& where : placed) {
    if (!where.has_value()) continue;
    const int32_t w = ids[*where];
    const int32_t i = StartLoad(w, variant, 1, -1);
    if (i < 0) continue;
    replicas_[instances_[i].replicas.back()].placed_from = source;
    ++pending;
    ++control_.loads_by_placement;
    Log(absl::StrCat(workers_[w].id, " placement for ", workers_[source].id, ": load ",
                     setup_.variants[variant].key.ToString()));
  }
}

std::vector<policy::ClusterDemand> Simulator::ClusterDemands() const {
  // Per model: the load offered to its instances (arrivals plus refused
  // shares, as the model autoscaler sees it) less what their ready and
  // loading replicas sustain at the app's objective.
  std::map<std::string, policy::ClusterDemand> by_model;
  for (const Worker& worker : workers_) {
    if (worker.removed) continue;
    for (int32_t i : worker.instances) {
      const Instance& inst = instances_[i];
      if (inst.draining) continue;
      const SimVariant& v = setup_.variants[inst.variant];
      const double slo_ms = ToMillis(setup_.apps[inst.app].latency);
      policy::ClusterDemand& d = by_model[v.key.model];
      d.model = v.key.model;
      d.unmet_qps += inst.offered_qps - static_cast<double>(inst.ready + inst.loading) *
                                            v.profile.SaturationQps(slo_ms);
    }
  }
  // What one empty worker of each type would serve of the model: replicas of
  // its best variant for that type that fit, times one replica's rate.
  std::vector<policy::ClusterDemand> demands;
  for (auto& [model, d] : by_model) {
    d.unmet_qps = std::max(0.0, d.unmet_qps);
    for (size_t v = 0; v < setup_.variants.size(); ++v) {
      const SimVariant& sv = setup_.variants[v];
      if (sv.key.model != model || variant_app_[v] < 0) continue;
      const WorkerType& type = setup_.worker_types[sv.worker_type].type;
      const double qps = policy::WorkerCapacityQps(
          sv.profile, ToMillis(setup_.apps[variant_app_[v]].latency), type, sv.cores_per_replica);
      double& best = d.qps_per_worker[type.name];
      best = std::max(best, qps);
    }
    demands.push_back(std::move(d));
  }
  return demands;
}

void Simulator::RunClusterAutoscaler() {
  policy::ClusterSnapshot snapshot;
  for (const Worker& worker : workers_) {
    if (worker.removed) continue;
    const WorkerType& type = setup_.worker_types[worker.type].type;
    policy::ClusterWorker cw;
    cw.id = worker.id;
    cw.type = type.name;
    cw.starting = !worker.up;
    cw.cpu_utilisation = worker.up ? worker.utilisation : 0;
    cw.memory_utilisation =
        type.memory_mb > 0 ? UsedMemory(worker) / static_cast<double>(type.memory_mb) : 0;
    for (int32_t i : worker.instances) {
      const Instance& inst = instances_[i];
      if (inst.draining) continue;
      const SimVariant& v = setup_.variants[inst.variant];
      policy::ClusterInstance ci;
      ci.variant = v.key.ToString();
      ci.state = inst.ready > 0 ? inst.history.state : InstanceState::kInactive;
      const double replicas = static_cast<double>(inst.ready + inst.loading);
      ci.cores = replicas * v.cores_per_replica;
      ci.memory_mb = replicas * v.profile.memory_mb();
      cw.instances.push_back(std::move(ci));
    }
    if (worker.up) cw.idle_since = worker.idle_since;
    snapshot.workers.push_back(std::move(cw));
  }
  snapshot.demands = ClusterDemands();
  auto decision = cluster_autoscaler_->Decide(snapshot, cluster_state_, now_);
  if (!decision.ok()) {
    Fail(absl::InternalError(absl::StrCat("cluster autoscaler: ", decision.status().message())));
    return;
  }
  cluster_state_ = decision->state;
  for (const policy::ClusterAction& a : decision->actions) {
    Log(absl::StrCat("cluster autoscaler: ", a.detail));
    if (a.kind == policy::ClusterAction::Kind::kAddWorker) {
      for (size_t t = 0; t < setup_.worker_types.size(); ++t) {
        if (setup_.worker_types[t].type.name != a.worker_type) continue;
        StartWorker(static_cast<int32_t>(t), now_ + setup_.worker_types[t].launch_delay);
        ++control_.workers_added;
        break;
      }
    } else {
      for (size_t w = 0; w < workers_.size(); ++w) {
        if (workers_[w].id != a.worker_id || workers_[w].removed) continue;
        RemoveWorker(static_cast<int32_t>(w));
        ++control_.workers_removed;
        break;
      }
    }
  }
}

}  // namespace maitre::sim
