#include "control/infaas_allocator.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "control/refused_share.h"
#include "policy/placement.h"

namespace maitre::control {
namespace {

using Kind = policy::ModelScaleAction::Kind;

const ObservedInstance* FindInstance(const ObservedWorker& worker, const VariantKey& key) {
  for (const ObservedInstance& inst : worker.instances) {
    if (inst.key == key && inst.takes_queries) return &inst;
  }
  return nullptr;
}

double CoresPerReplica(const ModelOption* model, const ObservedWorker& worker,
                       const std::string& variant) {
  const VariantOption* v = model != nullptr ? model->Find(variant, worker.type) : nullptr;
  return v != nullptr ? v->cores_per_replica : 1;
}

double MemoryPerReplica(const ModelOption* model, const ObservedWorker& worker,
                        const std::string& variant) {
  const VariantOption* v = model != nullptr ? model->Find(variant, worker.type) : nullptr;
  return v != nullptr && v->profile != nullptr ? v->profile->memory_mb() : 0;
}

// Cores held on `worker` by every replica there, loading and winding down
// included.
double CoresHeld(const Observation& observation, const ObservedWorker& worker) {
  double cores = 0;
  for (const ObservedInstance& inst : worker.instances) {
    cores += (inst.ready + inst.loading + inst.winding_down) *
             CoresPerReplica(observation.FindModel(inst.key.model), worker, inst.key.variant);
  }
  return cores;
}

// Whether an instance of another model than the one being placed leaves
// its cores to the placement: Active, fully loaded, and with nothing
// offered, served or queued by the last report. It keeps its memory (it
// stays loaded, warm for its model's next query), not its cores: on the
// 2-core host the zoo's CNN, idle on one worker after its load had moved
// on, held that worker's one core, and the wide CNN, at its capacity on the
// other worker, was refused a place there ("no-room") until selection found
// its instance Overloaded. The rule is selection's (selection_rules.h,
// Busy: an Active idle instance holds no core); Interfered ones count
// however idle, as there.
bool LeavesItsCores(const ObservedInstance& inst, const std::string& placing_model) {
  return inst.key.model != placing_model && inst.takes_queries &&
         inst.state == policy::InstanceState::kActive && inst.loading == 0 &&
         inst.winding_down == 0 && inst.arrival_qps <= 0 && inst.served_qps <= 0 &&
         inst.queue_length <= 0;
}

// Cores a placement of `model` finds taken on `worker`: CoresHeld less
// those of other models' idle instances (LeavesItsCores).
double CoresTakenFor(const Observation& observation, const ObservedWorker& worker,
                     const std::string& model) {
  double cores = CoresHeld(observation, worker);
  for (const ObservedInstance& inst : worker.instances) {
    if (!LeavesItsCores(inst, model)) continue;
    cores -= inst.ready * CoresPerReplica(observation.FindModel(inst.key.model), worker,
                                          inst.key.variant);
  }
  return cores;
}

// How busy serving `model` kept its ready replicas' cores on `worker`
// (policy::ScalingModel::busy): the worker's CPU, in proportion to what the
// model's instances served of everything served there, over the cores its
// replicas hold. The worker's CPU counts its half of the data path
// (receiving, decoding and answering queries), which the profiles do not;
// on the 2-core host one opencv replica answering 2,227 q/s kept its worker
// 78% busy while its profile (11,336 q/s) read 20% (docs/policies.md,
// "Capacity under load").
double MeasuredBusy(const ObservedWorker& worker, const ModelOption& model,
                    double worker_cores) {
  double served = 0, of_model = 0, cores = 0;
  for (const ObservedInstance& inst : worker.instances) {
    served += inst.served_qps;
    if (inst.key.model != model.name) continue;
    of_model += inst.served_qps;
    if (inst.takes_queries) cores += inst.ready * CoresPerReplica(&model, worker, inst.key.variant);
  }
  if (!(served > 0) || !(cores > 0) || !(worker.cpu_utilisation > 0)) return 0;
  return std::min(1.0, worker.cpu_utilisation * worker_cores * (of_model / served) / cores);
}

}  // namespace

absl::StatusOr<std::unique_ptr<InfaasAllocator>> InfaasAllocator::Create(
    AllocatorOptions options) {
  std::unique_ptr<InfaasAllocator> allocator(new InfaasAllocator(options));
  if (options.model_scaling != ModelScaling::kOff) {
    policy::ModelAutoscalerOptions model = options.model;
    if (options.model_scaling == ModelScaling::kHorizontal) {
      model.allow_upgrade = false;
      model.allow_downgrade = false;
    }
    auto scaler = policy::ModelAutoscaler::Create(model);
    if (!scaler.ok()) return scaler.status();
    allocator->model_autoscaler_ = *std::move(scaler);
  }
  if (options.cluster_scaling) {
    policy::ClusterAutoscalerOptions cluster = options.cluster;
    cluster.types = options.types;
    for (const auto& [type, n] : options.max_workers) cluster.max_workers[type] = n;
    auto scaler = policy::ClusterAutoscaler::Create(cluster);
    if (!scaler.ok()) return scaler.status();
    allocator->cluster_autoscaler_ = *std::move(scaler);
  }
  return allocator;
}

std::function<void()> InfaasAllocator::MarkBusy(std::vector<Where> places, int loads) {
  {
    absl::MutexLock lock(&mu_);
    for (const Where& w : places) busy_.insert(w);
  }
  auto left = std::make_shared<std::atomic<int>>(loads);
  return [this, places = std::move(places), left] {
    if (left->fetch_sub(1) != 1) return;
    absl::MutexLock lock(&mu_);
    for (const Where& w : places) busy_.erase(busy_.find(w));
  };
}

bool InfaasAllocator::Busy(const Where& place) const {
  absl::MutexLock lock(&mu_);
  return busy_.count(place) > 0;
}

// ---- what the round sees ----

void InfaasAllocator::ForgetGoneWorkers(const Observation& observation) {
  std::set<std::string> present;
  for (const ObservedWorker& w : observation.workers) present.insert(w.id);
  auto gone = [&](const std::string& id) { return present.count(id) == 0; };
  for (auto it = model_state_.begin(); it != model_state_.end();) {
    it = gone(it->first) ? model_state_.erase(it) : std::next(it);
  }
  for (auto it = asked_placement_.begin(); it != asked_placement_.end();) {
    it = gone(*it) ? asked_placement_.erase(it) : std::next(it);
  }
}

void InfaasAllocator::ShareRefusedDemand(const Observation& observation) {
  const Nanos since = refused_taken_at_.value_or(observation.now - options_.model_period);
  refused_taken_at_ = observation.now;
  refused_share_.clear();
  const double seconds = ToSeconds(observation.now - since);
  // What leaving workers are offered is shared out the same way: the
  // instances that stay take it once those workers drain.
  std::map<std::string, double> qps = observation.leaving_qps;
  if (seconds > 0) {
    for (const auto& [app, rows] : observation.refused_rows) {
      qps[app] += static_cast<double>(rows) / seconds;
    }
  }
  if (qps.empty()) return;
  std::vector<ServingInstance> serving;
  std::vector<Where> where;
  for (const ObservedWorker& w : observation.workers) {
    if (w.starting) continue;
    for (const ObservedInstance& inst : w.instances) {
      const ModelOption* model = observation.FindModel(inst.key.model);
      if (!inst.takes_queries || model == nullptr) continue;
      serving.push_back({model->app, inst.arrival_qps});
      where.emplace_back(w.id, inst.key.ToString());
    }
  }
  for (const auto& [i, share] : ShareRefused(qps, serving)) refused_share_[where[i]] += share;
}

double InfaasAllocator::Offered(const ObservedWorker& worker, const ObservedInstance& inst) const {
  auto share = refused_share_.find({worker.id, inst.key.ToString()});
  return inst.arrival_qps + (share != refused_share_.end() ? share->second : 0);
}

policy::ModelScalingSnapshot InfaasAllocator::WorkerSnapshot(
    const Observation& observation, const ObservedWorker& worker,
    DeliveredCapacity::Reading reading) const {
  const WorkerType* type = observation.FindType(worker.type);
  policy::ModelScalingSnapshot snapshot;
  if (type == nullptr) return snapshot;
  snapshot.cores = type->cores;
  snapshot.memory_mb = static_cast<double>(type->memory_mb);
  std::map<std::string, double> offered;  // by model: the load its instances here were offered
  for (const ObservedInstance& inst : worker.instances) {
    const ModelOption* model = observation.FindModel(inst.key.model);
    // Replicas winding down still hold their resources, which the policy
    // does not manage.
    snapshot.reserved_cores +=
        inst.winding_down * CoresPerReplica(model, worker, inst.key.variant);
    snapshot.reserved_memory_mb +=
        inst.winding_down * MemoryPerReplica(model, worker, inst.key.variant);
    if (inst.takes_queries) offered[inst.key.model] += Offered(worker, inst);
  }
  for (const auto& [model_name, load] : offered) {
    const ModelOption* model = observation.FindModel(model_name);
    if (model == nullptr) continue;
    policy::ScalingModel m;
    m.model = model_name;
    m.load_qps = load;
    m.busy = MeasuredBusy(worker, *model, type->cores);
    m.min_accuracy = model->min_accuracy;
    for (const VariantOption& v : model->variants) {
      if (v.worker_type != worker.type || v.profile == nullptr) continue;
      policy::ScalingVariant sv = policy::MakeScalingVariant(
          v.variant, v.accuracy, *v.profile, model->slo_ms, *type, v.cores_per_replica);
      sv.saturation_qps = delivered_.PerReplica(worker, *model, v, observation.now, reading);
      const VariantKey key{model_name, v.variant};
      if (const ObservedInstance* inst = FindInstance(worker, key)) {
        sv.replicas = inst->ready;
        sv.loading = inst->loading;
      }
      m.variants.push_back(std::move(sv));
    }
    if (!m.variants.empty()) snapshot.models.push_back(std::move(m));
  }
  return snapshot;
}

bool InfaasAllocator::Young(const Observation& observation, const ObservedWorker& worker,
                            const std::string& model, const std::string& variant) const {
  for (const ObservedInstance& inst : worker.instances) {
    if (inst.key.model != model || (!variant.empty() && inst.key.variant != variant)) continue;
    if (!inst.takes_queries) continue;
    if (inst.loading > 0 || observation.now - inst.ready_since < options_.min_instance_age) {
      return true;
    }
  }
  return false;
}

// ---- the model round ----

absl::Status InfaasAllocator::ModelRound(const Observation& observation, ActionSink& sink) {
  ForgetGoneWorkers(observation);
  ShareRefusedDemand(observation);
  delivered_.Remember(observation);
  if (options_.migrate_interfered) {
    FinishMoves(observation, sink);
    Migrate(observation, sink);
  }
  if (model_autoscaler_ == nullptr) return absl::OkStatus();
  // Consolidation asks whether the workers that stay carry what one gives
  // up; the model autoscaler whether each worker has enough. They read the
  // delivered capacity each its own way.
  using Reading = DeliveredCapacity::Reading;
  std::vector<const ObservedWorker*> workers;
  std::vector<policy::WorkerScalingSnapshot> snapshots;  // to give up
  std::vector<policy::ModelScalingSnapshot> kept;         // to keep
  for (const ObservedWorker& w : observation.workers) {
    if (w.starting) continue;
    workers.push_back(&w);
    kept.push_back(WorkerSnapshot(observation, w, Reading::kToKeep));
    policy::WorkerScalingSnapshot snapshot{w.id, WorkerSnapshot(observation, w, Reading::kToGiveUp),
                                           {}};
    // A model with an instance too young here is not given up yet.
    for (const policy::ScalingModel& m : snapshot.snapshot.models) {
      if (Young(observation, w, m.model)) snapshot.keep.insert(m.model);
    }
    snapshots.push_back(std::move(snapshot));
  }
  // A model with a move under way on any worker is given up nowhere this
  // round (as if every worker kept it): consolidation then decides nothing
  // for it, rather than deciding a give-up that would not be carried out
  // and that its memory would take for done.
  std::set<std::string> moving;
  for (const policy::WorkerScalingSnapshot& s : snapshots) {
    for (const policy::ScalingModel& m : s.snapshot.models) {
      if (Busy({s.worker, m.model})) moving.insert(m.model);
    }
  }
  for (policy::WorkerScalingSnapshot& s : snapshots) {
    for (const policy::ScalingModel& m : s.snapshot.models) {
      if (moving.count(m.model) > 0) s.keep.insert(m.model);
    }
  }
  absl::StatusOr<std::set<Where>> vacated = Consolidate(observation, snapshots, sink);
  if (!vacated.ok()) return vacated.status();
  absl::Status status;
  for (size_t i = 0; i < workers.size(); ++i) {
    const ObservedWorker& worker = *workers[i];
    policy::ModelScalingSnapshot& snapshot = kept[i];
    // Models with a move under way, or just given up here, sit this round out.
    auto& models = snapshot.models;
    models.erase(std::remove_if(models.begin(), models.end(),
                                [&](const policy::ScalingModel& m) {
                                  const Where place{worker.id, m.model};
                                  return Busy(place) || vacated->count(place) > 0;
                                }),
                 models.end());
    if (models.empty()) continue;
    auto decision = model_autoscaler_->Decide(snapshot, model_state_[worker.id], observation.now);
    if (!decision.ok()) {
      status.Update(absl::InternalError(
          absl::StrCat("model autoscaler on ", worker.id, ": ", decision.status().message())));
      continue;
    }
    model_state_[worker.id] = std::move(decision->state);
    bool asked = false;
    for (const policy::ModelScaleAction& action : decision->actions) {
      asked |= action.kind == Kind::kNeedsPlacement;
      Carry(observation, worker, action, sink);
    }
    if (!asked) asked_placement_.erase(worker.id);
  }
  return status;
}

absl::StatusOr<std::set<InfaasAllocator::Where>> InfaasAllocator::Consolidate(
    const Observation& observation, const std::vector<policy::WorkerScalingSnapshot>& snapshots,
    ActionSink& sink) {
  auto decision = policy::DecideConsolidation(snapshots, consolidation_state_, observation.now,
                                              model_autoscaler_->options(),
                                              options_.consolidation);
  if (!decision.ok()) {
    return absl::InternalError(absl::StrCat("consolidation: ", decision.status().message()));
  }
  consolidation_state_ = std::move(decision->state);
  std::set<Where> vacated;
  for (const policy::VacateAction& action : decision->actions) {
    const ObservedWorker* worker = nullptr;
    bool settled = true;  // no move of the model under way anywhere
    for (const ObservedWorker& w : observation.workers) {
      settled &= !Busy({w.id, action.model});
      if (w.id == action.worker) worker = &w;
    }
    if (worker == nullptr || !settled) continue;
    for (const auto& [variant, replicas] : action.replicas) {
      sink.Remove(worker->id, {action.model, variant}, replicas);
    }
    vacated.insert({action.worker, action.model});
    sink.Record({observation.now, "vacate", action.worker, action.model, 0, action.reason});
  }
  return vacated;
}

void InfaasAllocator::Carry(const Observation& observation, const ObservedWorker& worker,
                            const policy::ModelScaleAction& action, ActionSink& sink) {
  const ModelOption* model = observation.FindModel(action.model);
  if (model == nullptr) return;
  const std::string kind(policy::ModelScaleActionKindName(action.kind));
  const VariantKey to{action.model, action.to_variant};
  const VariantKey from{action.model, action.from_variant};
  switch (action.kind) {
    case Kind::kReplicate:
    case Kind::kAddVariant:
    case Kind::kUpgrade:
    case Kind::kDowngrade: {
      // Replicas of `from` (and also_remove) go once the new ones serve.
      std::vector<std::pair<VariantKey, int>> removals;
      if (!action.from_variant.empty() && action.remove > 0) {
        removals.push_back({from, action.remove});
      }
      for (const auto& [name, n] : action.also_remove) removals.push_back({{action.model, name}, n});
      if (model->Find(action.to_variant, worker.type) == nullptr || action.add <= 0) {
        for (const auto& [key, n] : removals) sink.Remove(worker.id, key, n);
      } else {
        sink.Load(worker.id, to, action.add, std::move(removals),
                  MarkBusy({{worker.id, action.model}}, 1));
      }
      Decision record{observation.now, kind, worker.id, to.ToString(), action.add, action.reason};
      record.cause = std::string(policy::ModelScaleCauseName(action.cause));
      sink.Record(record);
      return;
    }
    case Kind::kRemoveReplica:
      // Too young to shrink: the policy asks again next round; until then
      // nothing is done or recorded.
      if (Young(observation, worker, action.model, action.from_variant)) return;
      sink.Remove(worker.id, from, action.remove);
      sink.Record(
          {observation.now, kind, worker.id, from.ToString(), action.remove, action.reason});
      return;
    case Kind::kNeedsPlacement:
      PlaceElsewhere(observation, worker, action, sink);
      return;
  }
}

// ---- interference migration ----

void InfaasAllocator::FinishMoves(const Observation& observation, ActionSink& sink) {
  for (auto it = pending_moves_.begin(); it != pending_moves_.end();) {
    PendingMove& move = *it;
    if (!move.load_ended->load()) {
      ++it;
      continue;
    }
    const ObservedWorker* target = observation.FindWorker(move.to);
    const ObservedWorker* source = observation.FindWorker(move.from);
    const ObservedInstance* serving = target != nullptr ? FindInstance(*target, move.key) : nullptr;
    const ObservedInstance* slow = source != nullptr ? FindInstance(*source, move.key) : nullptr;
    if (serving != nullptr && serving->ready > 0) {
      // The target serves: the slow copy goes, answering what it holds.
      if (slow != nullptr && slow->ready > 0) {
        sink.Remove(move.from, move.key, slow->ready);
        sink.Record({observation.now, "migrate-unload", move.from, move.key.ToString(),
                     slow->ready, "the copy on " + move.to + " serves", move.to});
      }
    } else if (++move.rounds_since_ended < 3 && target != nullptr) {
      ++it;  // the observation may lag the load's end by a round or two
      continue;
    } else {
      sink.Record({observation.now, "migrate-failed", move.to, move.key.ToString(), 0,
                   "the load on the target did not come to serve; the source stays", move.from});
    }
    move.release();
    it = pending_moves_.erase(it);
  }
}

void InfaasAllocator::Migrate(const Observation& observation, ActionSink& sink) {
  std::vector<policy::MigrationWorker> workers;
  for (const ObservedWorker& w : observation.workers) {
    const WorkerType* type = observation.FindType(w.type);
    if (type == nullptr) continue;
    policy::MigrationWorker mw;
    mw.id = w.id;
    mw.type = w.type;
    mw.starting = w.starting;
    mw.cpu_utilisation = w.cpu_utilisation;
    mw.free_cores = type->cores - CoresHeld(observation, w);
    mw.memory_limited = type->memory_mb > 0;
    mw.free_memory_mb = mw.memory_limited ? type->memory_mb - w.memory_used_mb : 0;
    for (const ObservedInstance& inst : w.instances) {
      if (!inst.takes_queries) continue;
      const ModelOption* model = observation.FindModel(inst.key.model);
      policy::MigrationInstance mi;
      mi.model = inst.key.model;
      mi.variant = inst.key.variant;
      // A model with a move under way is not judged again until it ends.
      mi.state = Busy({w.id, inst.key.model}) ? policy::InstanceState::kActive : inst.state;
      mi.replicas = inst.ready;
      mi.loading = inst.loading;
      mi.cores_per_replica = CoresPerReplica(model, w, inst.key.variant);
      mi.memory_mb_per_replica = MemoryPerReplica(model, w, inst.key.variant);
      mi.offered_qps = Offered(w, inst);
      // What the replicas deliver here, not their profile: a copy on a
      // worker at its CPU limit carries no more than it was seen to serve.
      // With the profile, a real run at 70% of capacity retired w1's slow
      // copy for w2's, whose profile said 38,911 qps while the worker, at
      // its limit, carried the rest of the run's 6,243, and selection
      // loaded it back 2 s later.
      const VariantOption* v = model != nullptr ? model->Find(inst.key.variant, w.type) : nullptr;
      if (v != nullptr && v->profile != nullptr) {
        mi.capacity_qps = inst.ready * delivered_.PerReplica(w, *model, *v, observation.now,
                                                             DeliveredCapacity::Reading::kToGiveUp);
      }
      mw.instances.push_back(std::move(mi));
    }
    workers.push_back(std::move(mw));
  }
  policy::MigrationDecision decision =
      policy::DecideMigrations(workers, migration_state_, observation.now, options_.migration);
  migration_state_ = std::move(decision.state);
  // Logged every round, a hold would flood the log while it lasts (minutes,
  // on a host whose copies flip between Interfered and Active); logged once,
  // its changing reasons would be lost, and they are what explains it.
  // A copy that flips between Interfered and Active leaves the held lines
  // for a round now and then; it is remembered until its next line is due.
  constexpr Nanos kHeldLogEvery = 30 * kSecond;
  for (auto it = held_migrations_.begin(); it != held_migrations_.end();) {
    it = observation.now - it->second >= kHeldLogEvery ? held_migrations_.erase(it)
                                                       : std::next(it);
  }
  for (const auto& [where, line] : decision.held) {
    if (held_migrations_.emplace(where, observation.now).second) {
      sink.Record({observation.now, "migrate-held", "", "", 0, line});
    }
  }
  for (const policy::MigrationAction& action : decision.actions) {
    const VariantKey key{action.model, action.variant};
    if (action.kind == policy::MigrationAction::Kind::kRetire) {
      sink.Remove(action.from_worker, key, action.replicas);
      sink.Record({observation.now, "migrate-retire", action.from_worker, key.ToString(),
                   action.replicas, action.reason, action.to_worker});
      continue;
    }
    PendingMove move;
    move.from = action.from_worker;
    move.to = action.to_worker;
    move.key = key;
    move.load_ended = std::make_shared<std::atomic<bool>>(false);
    move.release = MarkBusy({{action.from_worker, action.model}, {action.to_worker, action.model}},
                            /*loads=*/1);
    sink.Load(action.to_worker, key, action.replicas, {},
              [ended = move.load_ended] { ended->store(true); });
    sink.Record({observation.now, "migrate", action.to_worker, key.ToString(), action.replicas,
                 action.reason, action.from_worker});
    pending_moves_.push_back(std::move(move));
  }
}

void InfaasAllocator::PlaceElsewhere(const Observation& observation, const ObservedWorker& source,
                                     const policy::ModelScaleAction& action, ActionSink& sink) {
  const ModelOption* model = observation.FindModel(action.model);
  const WorkerType* type = observation.FindType(source.type);
  if (model == nullptr || type == nullptr || action.add <= 0) return;
  std::string variant = action.to_variant;
  if (!model_autoscaler_->options().allow_upgrade &&
      FindInstance(source, {action.model, variant}) == nullptr) {
    // The policy suggests the cheapest variant to add whatever its options
    // say; a horizontal-only baseline adds replicas of what runs: the
    // running variant of the model with the most throughput per replica.
    double best_qps = -1;
    variant.clear();
    for (const ObservedInstance& inst : source.instances) {
      const VariantOption* v = model->Find(inst.key.variant, source.type);
      if (inst.key.model != action.model || !inst.takes_queries || v == nullptr) continue;
      const double qps = v->profile->SaturationQps(model->slo_ms);
      if (qps > best_qps) {
        best_qps = qps;
        variant = inst.key.variant;
      }
    }
  }
  const VariantOption* option = model->Find(variant, source.type);
  if (option == nullptr || option->profile == nullptr) return;
  const VariantKey key{action.model, variant};
  // The suggestion is for this worker's type: its replicas go on the workers
  // of that type with room, by the placement policy. The asking worker is a
  // candidate too: the policy asks only when the whole move does not fit
  // there, and part of it may.
  std::vector<policy::PlacementWorker> candidates;
  std::vector<const ObservedWorker*> ids;
  for (const ObservedWorker& w : observation.workers) {
    if (w.type != source.type || w.starting) continue;
    policy::PlacementWorker p;
    p.id = w.id;
    p.total_cores = type->cores;
    p.total_memory_mb = static_cast<double>(type->memory_mb);
    p.free_cores = type->cores - CoresTakenFor(observation, w, action.model);
    p.free_memory_mb = type->memory_mb > 0 ? type->memory_mb - w.memory_used_mb : 0;
    const ObservedInstance* there = FindInstance(w, key);
    p.accepting = there == nullptr || there->loading == 0;  // a load there would be replaced
    candidates.push_back(p);
    ids.push_back(&w);
  }
  const std::vector<policy::PlacementDemand> demands(
      static_cast<size_t>(action.add), {option->cores_per_replica, option->profile->memory_mb()});
  std::map<size_t, int> added;  // by candidate
  for (const std::optional<size_t>& where : policy::PlaceAll(demands, candidates)) {
    if (where.has_value()) ++added[*where];
  }
  if (added.empty()) {
    // A worker that cannot fit its move asks every round; record the first.
    if (asked_placement_.insert(source.id).second) {
      sink.Record({observation.now, "no-room", source.id, key.ToString(), action.add,
                   action.reason});
    }
    return;
  }
  asked_placement_.erase(source.id);
  // The source and every target sit out until all the placed loads end.
  std::vector<Where> places = {{source.id, action.model}};
  for (const auto& [index, n] : added) places.push_back({ids[index]->id, action.model});
  std::function<void()> done = MarkBusy(places, static_cast<int>(added.size()));
  for (const auto& [index, n] : added) {
    sink.Load(ids[index]->id, key, n, {}, done);
    Decision record{observation.now, "place", ids[index]->id, key.ToString(), n, action.reason,
                    source.id};
    record.cause = std::string(policy::ModelScaleCauseName(action.cause));
    sink.Record(record);
  }
}

// ---- the cluster round ----

std::vector<policy::ClusterDemand> InfaasAllocator::ClusterDemands(
    const Observation& observation) const {
  // Per model: the load offered to its instances (arrivals plus refused
  // shares, as the model autoscaler sees it) less what their ready and
  // loading replicas sustain at the app's objective.
  std::map<std::string, policy::ClusterDemand> by_model;
  for (const ObservedWorker& w : observation.workers) {
    if (w.starting) continue;
    for (const ObservedInstance& inst : w.instances) {
      const ModelOption* model = observation.FindModel(inst.key.model);
      const VariantOption* v = model != nullptr ? model->Find(inst.key.variant, w.type) : nullptr;
      if (v == nullptr || v->profile == nullptr || !inst.takes_queries) continue;
      policy::ClusterDemand& d = by_model[model->name];
      d.model = model->name;
      d.unmet_qps += Offered(w, inst) -
                     (inst.ready + inst.loading) * v->profile->SaturationQps(model->slo_ms);
    }
  }
  // What one empty worker of each type would serve of the model: replicas of
  // its best variant for that type that fit, times one replica's rate.
  std::vector<policy::ClusterDemand> demands;
  for (auto& [name, d] : by_model) {
    d.unmet_qps = std::max(0.0, d.unmet_qps);
    const ModelOption* model = observation.FindModel(name);
    for (const VariantOption& v : model->variants) {
      const WorkerType* type = observation.FindType(v.worker_type);
      if (type == nullptr || v.profile == nullptr) continue;
      double& best = d.qps_per_worker[type->name];
      best = std::max(best, policy::WorkerCapacityQps(*v.profile, model->slo_ms, *type,
                                                      v.cores_per_replica));
    }
    demands.push_back(std::move(d));
  }
  return demands;
}

absl::Status InfaasAllocator::ClusterRound(const Observation& observation, ActionSink& sink) {
  if (cluster_autoscaler_ == nullptr) return absl::OkStatus();
  policy::ClusterSnapshot snapshot;
  std::map<std::string, int> serving;  // workers up, by type
  for (const ObservedWorker& w : observation.workers) {
    const WorkerType* type = observation.FindType(w.type);
    if (type == nullptr) continue;
    if (!w.starting) ++serving[w.type];
    policy::ClusterWorker cw;
    cw.id = w.id;
    cw.type = w.type;
    cw.starting = w.starting;
    cw.cpu_utilisation = w.starting ? 0 : w.cpu_utilisation;
    cw.memory_utilisation =
        type->memory_mb > 0 ? w.memory_used_mb / static_cast<double>(type->memory_mb) : 0;
    for (const ObservedInstance& inst : w.instances) {
      if (!inst.takes_queries) continue;
      const ModelOption* model = observation.FindModel(inst.key.model);
      policy::ClusterInstance ci;
      ci.variant = inst.key.ToString();
      ci.state = inst.ready > 0 ? inst.state : policy::InstanceState::kInactive;
      const int replicas = inst.ready + inst.loading;
      ci.cores = replicas * CoresPerReplica(model, w, inst.key.variant);
      ci.memory_mb = replicas * MemoryPerReplica(model, w, inst.key.variant);
      cw.instances.push_back(std::move(ci));
    }
    if (!w.starting) cw.idle_since = w.idle_since;
    snapshot.workers.push_back(std::move(cw));
  }
  snapshot.demands = ClusterDemands(observation);
  auto decision = cluster_autoscaler_->Decide(snapshot, cluster_state_, observation.now);
  if (!decision.ok()) {
    return absl::InternalError(
        absl::StrCat("cluster autoscaler: ", decision.status().message()));
  }
  cluster_state_ = decision->state;
  for (const policy::ClusterAction& action : decision->actions) {
    if (action.kind == policy::ClusterAction::Kind::kAddWorker) {
      sink.AddWorker(action.worker_type);
      sink.Record({observation.now, "add-worker", action.worker_type, action.for_model, 0,
                   action.detail});
      continue;
    }
    // The workers the operator asked for stay.
    auto floor = options_.min_workers.find(action.worker_type);
    if (floor != options_.min_workers.end() && serving[action.worker_type] <= floor->second) {
      continue;
    }
    if (sink.RetireWorker(action.worker_id)) {
      --serving[action.worker_type];
      sink.Record({observation.now, "remove-worker", action.worker_id, "", 0, action.detail});
    }
  }
  return absl::OkStatus();
}

}  // namespace maitre::control
