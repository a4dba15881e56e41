// The simulator's half of the one control plane (docs/architecture.md, "One
// control plane"): the Observation the allocator is shown, and the sink that
// carries its decisions out. Nothing here decides.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "sim/selection_router.h"
#include "sim/simulator.h"
#include "sim/simulator_sink.h"

namespace maitre::sim {

Simulator::~Simulator() = default;

int32_t Simulator::WorkerById(const std::string& id) const {
  for (size_t w = 0; w < workers_.size(); ++w) {
    // A worker under an interruption notice takes no decision.
    const Worker& worker = workers_[w];
    if (worker.id == id && !worker.removed && !worker.stops_at.has_value()) {
      return static_cast<int32_t>(w);
    }
  }
  return -1;
}

std::vector<control::ModelOption> Simulator::ModelOptions() const {
  std::vector<control::ModelOption> models;
  for (size_t v = 0; v < setup_.variants.size(); ++v) {
    if (variant_app_[v] < 0) continue;  // no app may use it
    const SimVariant& sv = setup_.variants[v];
    auto m = std::find_if(models.begin(), models.end(),
                          [&](const control::ModelOption& o) { return o.name == sv.key.model; });
    if (m == models.end()) {
      const SimApp& app = setup_.apps[variant_app_[v]];
      control::ModelOption option;
      option.name = sv.key.model;
      option.app = app.name;
      option.slo_ms = ToMillis(app.latency);
      if (app.min_accuracy > 0) option.min_accuracy = app.min_accuracy;
      option.max_accuracy_drop = app.max_accuracy_drop;
      option.sl_min = app.sl_min;
      models.push_back(std::move(option));
      m = models.end() - 1;
    }
    m->variants.push_back({sv.key.variant, setup_.worker_types[sv.worker_type].type.name,
                           sv.accuracy, &sv.profile, sv.cores_per_replica});
  }
  return models;
}

control::Observation Simulator::Observe(bool take_refused) {
  control::Observation o;
  o.now = now_;
  for (const SimWorkerType& t : setup_.worker_types) o.types.push_back(t.type);
  o.models = models_;
  for (const Worker& worker : workers_) {
    if (worker.removed) continue;
    // One under an interruption notice is not shown: plans count only the
    // workers that stay. What it is still offered is the app's demand all
    // the same (as the controller's scaling loop reports it).
    if (worker.stops_at.has_value()) {
      for (int32_t i : worker.instances) {
        const SimInstance& inst = instances_[i];
        control::CountLeaving(o, setup_.variants[inst.variant].key.model, inst.arrival_qps);
      }
      continue;
    }
    control::ObservedWorker ow;
    ow.id = worker.id;
    ow.type = setup_.worker_types[worker.type].type.name;
    ow.starting = !worker.up;
    ow.cpu_utilisation = worker.utilisation;
    ow.memory_used_mb = UsedMemory(worker);
    if (worker.up) ow.idle_since = worker.idle_since;
    for (int32_t i : worker.instances) {
      const SimInstance& inst = instances_[i];
      control::ObservedInstance oi;
      oi.key = setup_.variants[inst.variant].key;
      oi.ready = inst.ready;
      oi.loading = inst.loading;
      oi.takes_queries = !inst.draining;
      if (inst.draining) {
        oi.winding_down = static_cast<int>(inst.replicas.size());
      } else {
        for (int32_t r : inst.replicas) oi.winding_down += replicas_[r].retiring;
      }
      oi.state = inst.history.state;
      oi.arrival_qps = inst.arrival_qps;
      oi.served_qps = inst.served_qps;
      oi.queue_length = static_cast<int>(inst.queue.size() - inst.head);
      oi.mean_batch = inst.mean_batch;
      oi.compute_p50_ms = inst.compute_p50_ms;
      oi.ready_since = inst.ready_since;
      ow.instances.push_back(std::move(oi));
    }
    o.workers.push_back(std::move(ow));
  }
  if (take_refused) {
    for (size_t a = 0; a < refused_.size(); ++a) {
      if (refused_[a] > 0) o.refused_rows[setup_.apps[a].name] += refused_[a];
      refused_[a] = 0;
    }
    // What was resolved since the last model round: the per-app totals
    // less what the last round took.
    service_taken_.resize(setup_.apps.size());
    for (size_t a = 0; a < setup_.apps.size(); ++a) {
      const Counters& now = metrics_.per_app[a];
      Counters& taken = service_taken_[a];
      const int64_t answered = now.resolved() - taken.resolved();
      if (answered > 0) {
        o.service[setup_.apps[a].name] = {answered, now.on_time - taken.on_time};
      }
      taken = now;
    }
  }
  ObservePipelines(take_refused, o);
  return o;
}

// ---- the sink ----

void Simulator::ControlSink::Load(const std::string& worker, const VariantKey& key, int add,
                                  std::vector<std::pair<VariantKey, int>> then_remove,
                                  std::function<void()> done) {
  const int32_t w = sim_->WorkerById(worker);
  const int32_t variant =
      w >= 0 ? sim_->VariantOnType(key.model, key.variant, sim_->workers_[w].type) : -1;
  if (variant < 0 || add <= 0) {
    if (done) done();
    return;
  }
  Transition t;
  t.worker = w;
  for (const auto& [from, n] : then_remove) {
    if (int32_t v = sim_->VariantOnType(from.model, from.variant, sim_->workers_[w].type);
        v >= 0) {
      t.removals.push_back({v, n});
    }
  }
  t.done = std::move(done);
  const int32_t id = static_cast<int32_t>(sim_->transitions_.size());
  sim_->transitions_.push_back(std::move(t));
  if (sim_->StartLoad(w, variant, add, id) < 0) {
    Transition& failed = sim_->transitions_[id];
    if (failed.done) std::exchange(failed.done, nullptr)();
  }
}

void Simulator::ControlSink::Remove(const std::string& worker, const VariantKey& key,
                                    int replicas) {
  const int32_t w = sim_->WorkerById(worker);
  if (w < 0) return;
  const int32_t variant = sim_->VariantOnType(key.model, key.variant, sim_->workers_[w].type);
  if (int32_t i = variant >= 0 ? sim_->InstanceOf(w, variant) : -1; i >= 0) {
    sim_->RemoveReplicas(i, replicas);
  }
}

void Simulator::ControlSink::AddWorker(const std::string& type) {
  for (size_t t = 0; t < sim_->setup_.worker_types.size(); ++t) {
    const SimWorkerType& st = sim_->setup_.worker_types[t];
    if (st.type.name != type) continue;
    sim_->StartWorker(static_cast<int32_t>(t), sim_->now_ + st.launch_delay);
    ++sim_->control_.workers_added;
    return;
  }
}

bool Simulator::ControlSink::RetireWorker(const std::string& worker) {
  const int32_t w = sim_->WorkerById(worker);
  if (w < 0) return false;
  sim_->RemoveWorker(w);
  ++sim_->control_.workers_removed;
  return true;
}

void Simulator::ControlSink::SetRouteWeights(std::vector<control::RouteWeight> weights) {
  std::vector<SelectionRouter::RouteWeight> mapped;
  for (const control::RouteWeight& rw : weights) {
    const int32_t w = sim_->WorkerById(rw.worker);
    if (w < 0) continue;
    const int32_t variant =
        sim_->VariantOnType(rw.key.model, rw.key.variant, sim_->workers_[w].type);
    if (variant >= 0) mapped.push_back({w, variant, rw.weight});
  }
  sim_->selection_->SetRouteWeights(mapped);
}

void Simulator::ControlSink::Record(const control::Decision& decision) {
  ControlCounters& c = sim_->control_;
  using Kind = policy::ModelScaleAction::Kind;
  for (Kind kind : {Kind::kReplicate, Kind::kAddVariant, Kind::kUpgrade, Kind::kDowngrade,
                    Kind::kRemoveReplica}) {
    if (decision.kind != policy::ModelScaleActionKindName(kind)) continue;
    ++c.model_actions[static_cast<int>(kind)];
    if (kind != Kind::kRemoveReplica) c.loads_by_autoscaler += decision.replicas;
  }
  if (decision.kind == "place") {
    ++c.model_actions[static_cast<int>(Kind::kNeedsPlacement)];
    c.loads_by_placement += decision.replicas;
  }
  if (decision.cause == policy::ModelScaleCauseName(policy::ModelScaleAction::Cause::kCapacity)) {
    ++c.capacity_moves;
  }
  if (decision.kind == "vacate") ++c.vacated;
  if (decision.kind == "migrate") ++c.migrations;
  if (decision.kind == "migrate-retire") ++c.migrations_retired;
  sim_->Log(control::DecisionLine(decision));
}

}  // namespace maitre::sim
