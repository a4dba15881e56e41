#include "controller/scaling_loop.h"

#include "absl/strings/str_cat.h"
#include "core/logging.h"
#include "core/status_macros.h"

namespace maitre::controller {
namespace {

using Kind = policy::ModelScaleAction::Kind;

// How long a capacity observed under overload is believed over the profile.
constexpr Nanos kObservedMemory = 30 * kSecond;
// An instance is not removed until it has been ready this long: the
// selection policy loads instances for a reason, and removing them at once
// would only make the two fight.
constexpr Nanos kMinInstanceAge = 30 * kSecond;

// Whether an instance's reported arrivals are load to scale for. One being
// unloaded (or that failed) takes no more queries: its last report's
// arrivals go elsewhere now, and counting them would load it again.
bool TakesQueries(const InstanceView& inst) {
  return inst.phase == InstancePhase::kReady || inst.phase == InstancePhase::kLoading;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ScalingLoop>> ScalingLoop::Create(Options options) {
  std::unique_ptr<ScalingLoop> loop(new ScalingLoop(options));
  loop->refused_taken_at_ = options.clock->Now();
  if (options.model_autoscaler != "off") {
    policy::ModelAutoscalerOptions model;
    if (options.model_autoscaler == "horizontal") {
      model.allow_upgrade = false;
      model.allow_downgrade = false;
    } else if (options.model_autoscaler != "infaas") {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown model autoscaler \"", options.model_autoscaler,
          "\"; use infaas, horizontal or off"));
    }
    MAITRE_ASSIGN_OR_RETURN(loop->model_autoscaler_, policy::ModelAutoscaler::Create(model));
  }
  if (options.cluster_autoscaler && options.provider != nullptr) {
    policy::ClusterAutoscalerOptions cluster;
    cluster.types = options.cluster->types().types();
    cluster.max_workers = options.max_workers;
    cluster.min_workers = 1;
    MAITRE_ASSIGN_OR_RETURN(loop->cluster_autoscaler_, policy::ClusterAutoscaler::Create(cluster));
  }
  return loop;
}

ScalingLoop::~ScalingLoop() {
  stop_.Request();
  if (thread_.joinable()) thread_.join();
}

void ScalingLoop::Start() {
  thread_ = std::thread([this] {
    const Clock* clock = options_.clock;
    Nanos next_model = clock->Now() + options_.model_period;
    Nanos next_cluster = clock->Now() + options_.cluster_period;
    while (!clock->SleepUntil(std::min(next_model, next_cluster), &stop_)) {
      Nanos now = clock->Now();
      if (now >= next_model) {
        RunModelRound();
        next_model = now + options_.model_period;
      }
      if (now >= next_cluster) {
        RunClusterRound();
        next_cluster = now + options_.cluster_period;
      }
    }
  });
}

void ScalingLoop::Record(absl::string_view action) {
  if (options_.metrics != nullptr) options_.metrics->RecordAutoscalerAction(action);
}

ScalingLoop::RefusedShares ScalingLoop::TakeRefusedShares(const std::vector<WorkerView>& workers,
                                                          const CatalogSnapshot& catalog,
                                                          Nanos now) {
  RefusedShares shares;
  if (options_.refused == nullptr) return shares;
  std::map<std::string, int64_t> rows = options_.refused->Take();
  const double seconds = ToSeconds(now - refused_taken_at_);
  refused_taken_at_ = now;
  if (rows.empty() || !(seconds > 0)) return shares;
  std::map<std::string, double> qps;
  for (const auto& [app, n] : rows) qps[app] = static_cast<double>(n) / seconds;
  std::vector<ServingInstance> serving;
  std::vector<std::pair<std::string, std::string>> where;  // (worker, model) of each
  for (const WorkerView& w : workers) {
    for (const InstanceView& inst : w.instances) {
      const CatalogModel* model = catalog.FindModel(inst.key.model);
      if (inst.phase != InstancePhase::kReady || model == nullptr) continue;
      serving.push_back({model->app, inst.stats.arrival_qps});
      where.emplace_back(w.id, inst.key.model);
    }
  }
  for (const auto& [i, share] : ShareRefused(qps, serving)) shares[where[i]] += share;
  return shares;
}

policy::ModelScalingSnapshot ScalingLoop::WorkerSnapshot(const WorkerView& worker,
                                                         const CatalogSnapshot& catalog,
                                                         const RefusedShares& refused) {
  Nanos now = options_.clock->Now();
  // Profiles are measured alone; on a busy host an instance sustains less.
  // When monitoring says an instance is past its limit, its capacity is
  // taken from what it does, for a while (long enough that relief does not
  // undo the scale-up at once): an Overloaded instance can do what it
  // served; an Interfered one, its profiled capacity slowed by the ratio of
  // its observed batch time to its profiled one.
  for (const InstanceView& inst : worker.instances) {
    double capacity = 0;
    if (inst.state == policy::InstanceState::kOverloaded && inst.stats.served_qps > 0) {
      capacity = inst.stats.served_qps / std::max(1, inst.stats.replicas);
    } else if (inst.state == policy::InstanceState::kInterfered &&
               inst.stats.compute_p50_ms > 0) {
      const CatalogModel* m = catalog.FindModel(inst.key.model);
      const CatalogVariant* v = m != nullptr ? m->FindVariant(inst.key.variant) : nullptr;
      const Profile* p = v != nullptr ? v->ProfileOn(worker.type.name) : nullptr;
      if (p == nullptr) continue;
      int batch = std::max(1, static_cast<int>(inst.stats.mean_batch + 0.5));
      double slowdown = std::max(1.0, inst.stats.compute_p50_ms / p->LatencyAt(batch));
      capacity = p->ThroughputAt(batch) / slowdown;
    }
    if (capacity > 0) {
      observed_[{worker.id, inst.key.ToString()}] = {capacity, now + kObservedMemory};
    }
  }
  policy::ModelScalingSnapshot snapshot;
  snapshot.cores = worker.type.cores;
  snapshot.memory_mb = static_cast<double>(worker.type.memory_mb);
  std::map<std::string, double> offered;  // by model: arrivals at this worker
  for (const InstanceView& inst : worker.instances) {
    if (TakesQueries(inst)) offered[inst.key.model] += inst.stats.arrival_qps;
  }
  for (const auto& [where, qps] : refused) {
    if (where.first == worker.id) offered[where.second] += qps;
  }
  for (const auto& [model_name, load] : offered) {
    const CatalogModel* model = catalog.FindModel(model_name);
    if (model == nullptr) continue;
    const CatalogApp* app = catalog.FindApp(model->app);
    const double slo = SloOf(catalog, *model);
    policy::ScalingModel m;
    m.model = model_name;
    m.load_qps = load;
    if (app != nullptr) m.min_accuracy = app->defaults.min_accuracy;
    for (const CatalogVariant& v : model->variants) {
      const Profile* profile = v.ProfileOn(worker.type.name);
      if (!v.ready() || profile == nullptr) continue;
      policy::ScalingVariant sv =
          policy::MakeScalingVariant(v.spec.key.variant, v.accuracy, *profile, slo, worker.type);
      auto seen = observed_.find({worker.id, v.spec.key.ToString()});
      if (seen != observed_.end() && seen->second.until > now) {
        sv.saturation_qps = std::min(sv.saturation_qps, seen->second.qps_per_replica);
      }
      HeldReplicas held = HeldOn(worker, v.spec.key);
      sv.replicas = held.ready;
      sv.loading = held.loading;
      m.variants.push_back(std::move(sv));
    }
    if (!m.variants.empty()) snapshot.models.push_back(std::move(m));
  }
  return snapshot;
}

void ScalingLoop::SetReplicas(const std::string& worker_id, const CatalogVariant& variant,
                              int replicas, std::function<void()> after) {
  std::string model = variant.spec.key.model;
  options_.placer->LoadOn(worker_id, variant, replicas,
                          [this, worker_id, model, after](absl::Status status) {
                            if (status.ok() && after) after();
                            absl::MutexLock lock(&mu_);
                            busy_.erase({worker_id, model});
                          });
}

void ScalingLoop::Carry(const WorkerView& worker, const CatalogSnapshot& catalog,
                        const policy::ModelScaleAction& action) {
  const CatalogModel* model = catalog.FindModel(action.model);
  if (model == nullptr) return;
  const std::string& wid = worker.id;
  if (action.kind == Kind::kRemoveReplica) {
    // Too young to shrink: the policy asks again next round; until then
    // nothing is done, logged or counted.
    const CatalogVariant* v = model->FindVariant(action.from_variant);
    if (v == nullptr) return;
    const Nanos now = options_.clock->Now();
    for (const InstanceView& inst : worker.instances) {
      if (inst.key == v->spec.key && now - inst.phase_since < kMinInstanceAge) return;
    }
  }
  spdlog::info("model autoscaler on {}: {} {}: {}", wid, policy::ModelScaleActionKindName(action.kind),
               action.model, action.reason);
  Record(policy::ModelScaleActionKindName(action.kind));
  // Replicas of `from` (and also_remove) to drop once the new ones serve.
  auto shrink = [this, wid, model, worker, action]() {
    std::vector<std::pair<std::string, int>> drops = action.also_remove;
    if (!action.from_variant.empty() && action.remove > 0) {
      drops.push_back({action.from_variant, action.remove});
    }
    for (const auto& [name, count] : drops) {
      const CatalogVariant* v = model->FindVariant(name);
      if (v == nullptr) continue;
      int left = HeldOn(worker, v->spec.key).ready - count;
      if (left > 0) {
        options_.placer->LoadOn(wid, *v, left, nullptr);
      } else {
        options_.placer->Unload(wid, v->spec.key);
      }
    }
  };
  switch (action.kind) {
    case Kind::kReplicate:
    case Kind::kAddVariant:
    case Kind::kUpgrade:
    case Kind::kDowngrade: {
      const CatalogVariant* to = model->FindVariant(action.to_variant);
      if (to == nullptr) return;
      {
        absl::MutexLock lock(&mu_);
        busy_.insert({wid, action.model});
      }
      int target = HeldOn(worker, to->spec.key).ready + action.add;
      SetReplicas(wid, *to, target, shrink);
      return;
    }
    case Kind::kRemoveReplica:
      shrink();
      return;
    case Kind::kNeedsPlacement: {
      // This worker lacks the cores or memory: the replicas the policy
      // suggests for this worker type go on the workers of that type with
      // room, by the placement policy, as in the simulator. (This worker is
      // a candidate too: the policy asks when the whole move does not fit
      // here, and part of it may.)
      const CatalogVariant* to = model->FindVariant(action.to_variant);
      if (to == nullptr) return;
      std::vector<Placer::ReplicaPlacement> placed =
          options_.placer->PlaceReplicas(*to, worker.type.name, std::max(1, action.add));
      if (placed.empty()) {
        spdlog::info("model autoscaler: no {} worker has room for {}; the cluster autoscaler "
                     "adds capacity when utilisation is high",
                     worker.type.name, to->spec.key.ToString());
        return;
      }
      for (const Placer::ReplicaPlacement& p : placed) {
        {
          absl::MutexLock lock(&mu_);
          busy_.insert({p.worker_id, action.model});
        }
        SetReplicas(p.worker_id, *to, p.replicas, nullptr);
      }
      return;
    }
  }
}

void ScalingLoop::RunModelRound() {
  if (model_autoscaler_ == nullptr) return;
  auto catalog = options_.catalog->Get();
  Nanos now = options_.clock->Now();
  const std::vector<WorkerView> workers = options_.cluster->Snapshot();
  const RefusedShares refused = TakeRefusedShares(workers, *catalog, now);
  std::vector<policy::WorkerScalingSnapshot> snapshots;
  {
    absl::MutexLock lock(&mu_);
    last_refused_ = refused;
    for (const WorkerView& worker : workers) {
      snapshots.push_back({worker.id, WorkerSnapshot(worker, *catalog, refused)});
    }
  }
  const std::set<std::pair<std::string, std::string>> vacated =
      Consolidate(workers, snapshots, now);
  for (size_t i = 0; i < workers.size(); ++i) {
    const WorkerView& worker = workers[i];
    policy::ModelScalingSnapshot& snapshot = snapshots[i].snapshot;
    {
      absl::MutexLock lock(&mu_);
      // Models with a move under way sit this round out.
      auto& models = snapshot.models;
      models.erase(std::remove_if(models.begin(), models.end(),
                                  [&](const policy::ScalingModel& m) {
                                    return busy_.count({worker.id, m.model}) > 0 ||
                                           vacated.count({worker.id, m.model}) > 0;
                                  }),
                   models.end());
    }
    if (snapshot.models.empty()) continue;
    policy::ModelAutoscalerState previous;
    {
      absl::MutexLock lock(&mu_);
      previous = model_state_[worker.id];
    }
    auto decision = model_autoscaler_->Decide(snapshot, previous, now);
    if (!decision.ok()) {
      spdlog::warn("model autoscaler on {}: {}", worker.id, decision.status().message());
      continue;
    }
    {
      absl::MutexLock lock(&mu_);
      model_state_[worker.id] = decision->state;
    }
    for (const policy::ModelScaleAction& action : decision->actions) Carry(worker, *catalog, action);
  }
}

std::set<std::pair<std::string, std::string>> ScalingLoop::Consolidate(
    const std::vector<WorkerView>& workers,
    const std::vector<policy::WorkerScalingSnapshot>& snapshots, Nanos now) {
  policy::ConsolidationState previous;
  {
    absl::MutexLock lock(&mu_);
    previous = consolidation_state_;
  }
  auto decision =
      policy::DecideConsolidation(snapshots, previous, now, model_autoscaler_->options());
  if (!decision.ok()) {
    spdlog::warn("consolidation: {}", decision.status().message());
    return {};
  }
  std::set<std::pair<std::string, std::string>> vacated;
  std::vector<std::pair<std::string, VariantKey>> unloads;  // (worker, instance)
  {
    absl::MutexLock lock(&mu_);
    consolidation_state_ = decision->state;
    for (const policy::VacateAction& action : decision->actions) {
      const WorkerView* worker = nullptr;
      bool settled = true;  // no move of the model under way anywhere, no young instance here
      for (const WorkerView& w : workers) {
        settled &= busy_.count({w.id, action.model}) == 0;
        if (w.id != action.worker) continue;
        worker = &w;
        for (const InstanceView& inst : w.instances) {
          settled &= inst.key.model != action.model || now - inst.phase_since >= kMinInstanceAge;
        }
      }
      if (worker == nullptr || !settled) continue;
      spdlog::info("model autoscaler: giving {} up on {}: {}", action.model, action.worker,
                   action.reason);
      for (const InstanceView& inst : worker->instances) {
        if (inst.key.model == action.model && inst.phase == InstancePhase::kReady) {
          unloads.emplace_back(worker->id, inst.key);
        }
      }
      vacated.insert({action.worker, action.model});
    }
  }
  for (size_t i = 0; i < vacated.size(); ++i) Record("vacate");
  for (const auto& [worker_id, key] : unloads) options_.placer->Unload(worker_id, key);
  return vacated;
}

double ScalingLoop::SloOf(const CatalogSnapshot& catalog, const CatalogModel& model) const {
  const CatalogApp* app = catalog.FindApp(model.app);
  return app != nullptr && app->defaults.latency_ms ? *app->defaults.latency_ms
                                                    : options_.default_slo_ms;
}

std::vector<policy::ClusterDemand> ScalingLoop::ClusterDemands(
    const std::vector<WorkerView>& workers, const CatalogSnapshot& catalog) {
  std::map<std::string, policy::ClusterDemand> by_model;
  for (const WorkerView& w : workers) {
    for (const InstanceView& inst : w.instances) {
      const CatalogModel* model = catalog.FindModel(inst.key.model);
      const CatalogVariant* v = model != nullptr ? model->FindVariant(inst.key.variant) : nullptr;
      const Profile* p = v != nullptr ? v->ProfileOn(w.type.name) : nullptr;
      if (p == nullptr || !TakesQueries(inst)) continue;
      const HeldReplicas held = HeldOn(w, inst.key);
      policy::ClusterDemand& d = by_model[model->name];
      d.model = model->name;
      d.unmet_qps += inst.stats.arrival_qps -
                     (held.ready + held.loading) * p->SaturationQps(SloOf(catalog, *model));
    }
  }
  for (const auto& [where, qps] : last_refused_) {
    auto it = by_model.find(where.second);
    if (it != by_model.end()) it->second.unmet_qps += qps;
  }
  std::vector<policy::ClusterDemand> demands;
  for (auto& [name, d] : by_model) {
    d.unmet_qps = std::max(0.0, d.unmet_qps);
    const CatalogModel* model = catalog.FindModel(name);
    for (const CatalogVariant& v : model->variants) {
      if (!v.ready()) continue;
      for (const WorkerType& type : options_.cluster->types().types()) {
        const Profile* p = v.ProfileOn(type.name);
        if (p == nullptr) continue;
        double& best = d.qps_per_worker[type.name];
        best = std::max(best, policy::WorkerCapacityQps(*p, SloOf(catalog, *model), type));
      }
    }
    demands.push_back(std::move(d));
  }
  return demands;
}

void ScalingLoop::RunClusterRound() {
  if (cluster_autoscaler_ == nullptr) return;
  auto catalog = options_.catalog->Get();
  Nanos now = options_.clock->Now();
  std::vector<WorkerView> workers = options_.cluster->Snapshot();
  policy::ClusterSnapshot snapshot;
  std::map<std::string, int> count;
  {
    absl::MutexLock lock(&mu_);
    for (const WorkerView& w : workers) {
      ++count[w.type.name];
      policy::ClusterWorker cw;
      cw.id = w.id;
      cw.type = w.type.name;
      cw.cpu_utilisation = w.cpu_utilisation;
      cw.memory_utilisation =
          w.type.memory_mb > 0 ? w.memory_mb / static_cast<double>(w.type.memory_mb) : 0;
      bool serving = false;
      for (const InstanceView& inst : w.instances) {
        serving |= inst.stats.served_qps > 0 || inst.outstanding > 0;
        policy::ClusterInstance ci;
        ci.variant = inst.key.ToString();
        ci.state = inst.state;
        ci.cores = 1;
        if (const CatalogModel* m = catalog->FindModel(inst.key.model)) {
          if (const CatalogVariant* v = m->FindVariant(inst.key.variant)) {
            if (const Profile* p = v->ProfileOn(w.type.name)) ci.memory_mb = p->memory_mb();
          }
        }
        cw.instances.push_back(std::move(ci));
      }
      if (serving) {
        idle_since_.erase(w.id);
      } else {
        cw.idle_since = idle_since_.emplace(w.id, now).first->second;
      }
      snapshot.workers.push_back(std::move(cw));
    }
    snapshot.demands = ClusterDemands(workers, *catalog);
  }
  for (const auto& [type, n] : options_.provider->Starting()) {
    for (int i = 0; i < n; ++i) {
      policy::ClusterWorker starting;
      starting.id = absl::StrCat("starting-", type, "-", i);
      starting.type = type;
      starting.starting = true;
      snapshot.workers.push_back(std::move(starting));
    }
  }
  policy::ClusterAutoscalerState previous;
  {
    absl::MutexLock lock(&mu_);
    previous = cluster_state_;
  }
  auto decision = cluster_autoscaler_->Decide(snapshot, previous, now);
  if (!decision.ok()) {
    spdlog::warn("cluster autoscaler: {}", decision.status().message());
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    cluster_state_ = decision->state;
  }
  for (const policy::ClusterAction& action : decision->actions) {
    const WorkerType* type = options_.cluster->types().Find(action.worker_type);
    if (type == nullptr) continue;
    if (action.kind == policy::ClusterAction::Kind::kAddWorker) {
      spdlog::info("cluster autoscaler: adding a {} worker: {}", action.worker_type, action.detail);
      options_.provider->SetDesired(*type, options_.provider->Desired(type->name) + 1);
      Record("add_worker");
    } else {
      // The workers the operator asked for stay.
      auto floor = options_.min_workers.find(action.worker_type);
      if (floor != options_.min_workers.end() && count[action.worker_type] <= floor->second) {
        continue;
      }
      spdlog::info("cluster autoscaler: retiring {}: {}", action.worker_id, action.detail);
      if (options_.provider->Retire(action.worker_id)) {
        --count[action.worker_type];
        Record("remove_worker");
      }
    }
  }
}

}  // namespace maitre::controller
