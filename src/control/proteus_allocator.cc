#include "control/proteus_allocator.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "policy/allocation_infaas.h"

namespace maitre::control {
namespace {

// The static baselines plan for this many times the demand first seen, so
// that the common served fraction, not the demand, decides the placement
// and every device is given work.
constexpr double kStaticDemandScale = 1e6;

// Variants whose accuracies differ by less than this count as equally
// accurate when a baseline keeps only the most (or least) accurate: a
// variant generated from a model (quantised, optimised, another runtime)
// often gains or loses a handful of validation images, and the baselines
// mean "the most accurate model", not "its one variant that happened to
// classify one more image" (which may be the slowest).
constexpr double kSameAccuracy = 1e-3;

// An overloaded instance that serves within this fraction of what its
// profile says is taken to be as fast as its profile: measurement noise.
constexpr double kSlowdownDeadband = 0.9;

bool Static(ProteusMode mode) {
  return mode == ProteusMode::kClipperHighThroughput || mode == ProteusMode::kClipperHighAccuracy;
}

std::vector<std::string> Devices(const Observation& observation) {
  std::vector<std::string> ids;
  for (const ObservedWorker& w : observation.workers) {
    if (!w.starting) ids.push_back(w.id);
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

// Every profiled variant on every worker type: a plan is remade when this
// changes (a model registered or re-registered, a profile measured).
std::vector<std::string> Catalogue(const Observation& observation) {
  std::vector<std::string> entries;
  for (const ModelOption& m : observation.models) {
    for (const VariantOption& v : m.variants) {
      entries.push_back(absl::StrCat(m.app, "/", m.name, ":", v.variant, "@", v.worker_type));
    }
  }
  std::sort(entries.begin(), entries.end());
  return entries;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ProteusAllocator>> ProteusAllocator::Create(
    const AllocatorOptions& options, ProteusMode mode) {
  const ProteusOptions& p = options.proteus;
  if (p.period <= 0 || p.demand_window <= 0 || !(p.band > 0) || !(p.min_demand_qps > 0) ||
      !(p.max_accuracy_drop >= 0 && p.max_accuracy_drop <= 1) ||
      !(p.max_utilisation > 0 && p.max_utilisation <= 1) ||
      !(p.min_slowdown > 0 && p.min_slowdown <= 1)) {
    return absl::InvalidArgumentError(
        "proteus: period and demand_window must be > 0, band > 0, min_demand_qps > 0, "
        "max_accuracy_drop in [0, 1], max_utilisation and min_slowdown in (0, 1]");
  }
  return std::unique_ptr<ProteusAllocator>(new ProteusAllocator(options, mode));
}

absl::Status ProteusAllocator::ClusterRound(const Observation&, ActionSink&) {
  return absl::OkStatus();
}

void ProteusAllocator::MeasureDemand(const Observation& observation) {
  const double since_s =
      ToSeconds(last_round_.has_value() ? observation.now - *last_round_ : options_.model_period);
  last_round_ = observation.now;
  demand_.push_back({observation.now, OfferedByApp(observation, since_s)});
  while (!demand_.empty() &&
         demand_.front().at <= observation.now - options_.proteus.demand_window) {
    demand_.pop_front();
  }
}

std::map<std::string, double> ProteusAllocator::MeanDemand() const {
  std::map<std::string, double> mean;
  for (const DemandSample& s : demand_) {
    for (const auto& [app, qps] : s.qps) mean[app] += qps / demand_.size();
  }
  return mean;
}

void ProteusAllocator::LearnSlowdown(const Observation& observation) {
  // A factor no overload has renewed for its memory recovers half-way to 1,
  // not all the way: dropping it at once sends the plan back to the idle
  // profiles, which overloads the same workers again a few seconds later.
  for (auto it = slowdown_.begin(); it != slowdown_.end();) {
    Slowdown& s = it->second;
    if (s.until <= observation.now) {
      s.factor += (1 - s.factor) / 2;
      s.until = observation.now + options_.observed_capacity_memory;
    }
    it = s.factor >= kSlowdownDeadband ? slowdown_.erase(it) : std::next(it);
  }
  for (const ObservedWorker& w : observation.workers) {
    for (const ObservedInstance& inst : w.instances) {
      // An instance that has just loaded serves less while it warms up and
      // its queue drains: only one that has served for a demand window
      // tells what the worker sustains.
      if (inst.state != policy::InstanceState::kOverloaded || inst.served_qps <= 0 ||
          inst.ready <= 0 || inst.mean_batch <= 0 ||
          observation.now - inst.ready_since < options_.proteus.demand_window) {
        continue;
      }
      const ModelOption* model = observation.FindModel(inst.key.model);
      const VariantOption* option =
          model != nullptr ? model->Find(inst.key.variant, w.type) : nullptr;
      if (option == nullptr || option->profile == nullptr) continue;
      // Overloaded, it computes all the time: at the batches it runs, its
      // profile says it would serve `expected`. Compared at its own batch
      // size, not at P's, so that batching smaller than P assumes (which
      // the simulator shows with exact profiles) is not taken for a slow
      // worker.
      const int batch = std::max(1, static_cast<int>(std::lround(inst.mean_batch)));
      const double expected = inst.ready * option->profile->ThroughputAt(batch);
      if (expected <= 0) continue;
      const double ratio = inst.served_qps / expected;
      if (ratio >= kSlowdownDeadband) continue;
      const double factor = std::max(options_.proteus.min_slowdown, ratio);
      auto [it, added] = slowdown_.try_emplace(w.type);
      Slowdown& s = it->second;
      if (added || factor < s.factor) s.factor = factor;
      s.until = observation.now + options_.observed_capacity_memory;
    }
  }
}

double ProteusAllocator::SlowdownOf(const std::string& type, Nanos now) const {
  auto it = slowdown_.find(type);
  return it != slowdown_.end() && it->second.until > now ? it->second.factor : 1.0;
}

bool ProteusAllocator::ShouldSolve(const Observation& observation,
                                   const std::vector<std::string>& devices,
                                   const std::vector<std::string>& catalogue,
                                   const std::map<std::string, double>& demand) const {
  if (devices.empty() || catalogue.empty()) return false;
  double total = 0;
  for (const auto& [app, qps] : demand) total += qps;
  if (!summary_.has_value()) return !Static(mode_) || total > 0;
  if (devices != planned_devices_ || catalogue != planned_catalogue_) return true;
  if (Static(mode_)) return false;
  for (const ObservedWorker& w : observation.workers) {
    auto planned = planned_slowdown_.find(w.type);
    const double was = planned != planned_slowdown_.end() ? planned->second : 1.0;
    if (std::abs(SlowdownOf(w.type, observation.now) - was) > 0.1 * was) return true;
  }
  if (mode_ == ProteusMode::kInfaasAccuracy) return true;
  if (observation.now - summary_->solved_at >= options_.proteus.period) return true;
  const double band = 1 + options_.proteus.band;
  for (const auto& [app, qps] : demand) {
    auto planned = summary_->demand_qps.find(app);
    if (planned == summary_->demand_qps.end()) return true;
    double s = std::max(qps, options_.proteus.min_demand_qps);
    if (s > planned->second * band || s < planned->second / band) return true;
  }
  return false;
}

int ProteusAllocator::ReplicasOn(const Observation& observation, const VariantKey& key,
                                 const std::string& type) const {
  const ModelOption* model = observation.FindModel(key.model);
  const VariantOption* option = model != nullptr ? model->Find(key.variant, type) : nullptr;
  const WorkerType* t = observation.FindType(type);
  if (option == nullptr || option->profile == nullptr || t == nullptr) return 0;
  int replicas =
      std::max(1, static_cast<int>(t->cores / std::max(1e-9, option->cores_per_replica)));
  const double memory = option->profile->memory_mb();
  if (t->memory_mb > 0 && memory > 0) {
    replicas = std::min(replicas, static_cast<int>(t->memory_mb / memory));
  }
  return replicas;
}

absl::Status ProteusAllocator::Solve(const Observation& observation,
                                     const std::vector<std::string>& devices,
                                     const std::map<std::string, double>& demand,
                                     ActionSink& sink) {
  policy::AllocationProblem problem;
  std::vector<Candidate> candidates;
  // Apps and their eligible variants: at or above the app's floor, and for
  // the baselines only the least or most accurate.
  std::map<std::string, std::vector<const ModelOption*>> models_of;
  for (const ModelOption& m : observation.models) models_of[m.app].push_back(&m);
  auto planned = [&](const std::string& app) {
    auto it = demand.find(app);
    return std::max(it != demand.end() ? it->second : 0, options_.proteus.min_demand_qps);
  };
  double total = 0;
  for (const auto& [app, models] : models_of) total += planned(app);
  for (const auto& [app, models] : models_of) {
    double best = 0, lowest = 1e300;
    std::optional<double> floor;
    double max_drop = options_.proteus.max_accuracy_drop;
    for (const ModelOption* m : models) {
      if (m->min_accuracy.has_value()) floor = std::max(floor.value_or(0), *m->min_accuracy);
      if (m->max_accuracy_drop.has_value()) max_drop = std::min(max_drop, *m->max_accuracy_drop);
      for (const VariantOption& v : m->variants) best = std::max(best, v.accuracy);
    }
    const double limit = std::max(floor.value_or(0), best * (1 - max_drop));
    for (const ModelOption* m : models) {
      for (const VariantOption& v : m->variants) {
        if (v.accuracy >= limit - 1e-12) lowest = std::min(lowest, v.accuracy);
      }
    }
    const int q = static_cast<int>(problem.query_types.size());
    const double s = Static(mode_) ? planned(app) / total * kStaticDemandScale : planned(app);
    problem.query_types.push_back({app, s});
    std::set<std::string> seen;
    for (const ModelOption* m : models) {
      for (const VariantOption& v : m->variants) {
        if (v.accuracy < limit - 1e-12 || !seen.insert(m->name + ":" + v.variant).second) continue;
        const bool most = v.accuracy >= best - kSameAccuracy,
                   least = v.accuracy <= lowest + kSameAccuracy;
        if (mode_ == ProteusMode::kClipperHighThroughput && !least) continue;
        if ((mode_ == ProteusMode::kClipperHighAccuracy || mode_ == ProteusMode::kNoSelection) &&
            !most) {
          continue;
        }
        candidates.push_back({{m->name, v.variant}, app, best > 0 ? v.accuracy / best : 0});
        problem.variants.push_back({m->name + ":" + v.variant, q, candidates.back().accuracy});
      }
    }
  }
  if (candidates.empty()) {
    RecordFailure(observation, "no app has a variant within its accuracy floor", sink);
    return absl::OkStatus();
  }
  // Device classes: worker types, or for Sommelier (worker type, pinned app).
  std::map<std::string, int> class_index;
  std::vector<std::pair<std::string, std::string>> classes;  // (type, pinned app or "")
  for (const std::string& id : devices) {
    const ObservedWorker* w = observation.FindWorker(id);
    std::string pinned = mode_ == ProteusMode::kSommelier && pinned_app_.count(id)
                             ? pinned_app_.at(id)
                             : std::string();
    std::string name = pinned.empty() ? w->type : w->type + "/" + pinned;
    auto [it, added] = class_index.emplace(name, static_cast<int>(classes.size()));
    if (added) {
      classes.push_back({w->type, pinned});
      problem.device_types.push_back(name);
    }
    // What it hosts now: its largest instance that still takes queries.
    int current = -1, most = 0;
    for (const ObservedInstance& inst : w->instances) {
      if (!inst.takes_queries || inst.ready + inst.loading <= most) continue;
      for (size_t c = 0; c < candidates.size(); ++c) {
        if (candidates[c].key == inst.key) {
          current = static_cast<int>(c);
          most = inst.ready + inst.loading;
        }
      }
    }
    problem.devices.push_back({id, it->second, current});
  }
  problem.peak_qps.assign(classes.size(), std::vector<double>(candidates.size(), 0));
  for (size_t c = 0; c < classes.size(); ++c) {
    for (size_t m = 0; m < candidates.size(); ++m) {
      if (!classes[c].second.empty() && classes[c].second != candidates[m].app) continue;
      const ModelOption* model = observation.FindModel(candidates[m].key.model);
      const VariantOption* option = model->Find(candidates[m].key.variant, classes[c].first);
      if (option == nullptr || option->profile == nullptr) continue;
      problem.peak_qps[c][m] =
          options_.proteus.max_utilisation * SlowdownOf(classes[c].first, observation.now) *
          policy::PeakThroughputQps(*option->profile, model->slo_ms,
                                    ReplicasOn(observation, candidates[m].key, classes[c].first));
    }
  }

  absl::StatusOr<policy::AllocationPlan> plan;
  if (mode_ == ProteusMode::kInfaasAccuracy) {
    const policy::InfaasAccuracyOptions greedy{options_.model.slack,
                                               options_.model.scale_down_headroom};
    // The same pruning as the MILP's, so that only the allocation differs.
    const policy::AllocationProblem pruned = policy::WithoutDominatedVariants(problem);
    plan = policy::AssignForPlacement(pruned, policy::InfaasAccuracyPlacement(pruned, greedy),
                                      options_.proteus.milp);
  } else {
    plan = policy::SolveAllocation(problem, options_.proteus.milp);
  }
  if (!plan.ok()) {
    RecordFailure(observation, std::string(plan.status().message()), sink);
    return absl::OkStatus();
  }
  last_failure_.clear();
  targets_.clear();
  PlanSummary summary;
  summary.solved_at = observation.now;
  for (const auto& q : problem.query_types) summary.demand_qps[q.name] = q.demand_qps;
  summary.served_fraction = plan->served_fraction;
  summary.effective_accuracy = plan->effective_accuracy;
  summary.moves = plan->moves;
  summary.gap = plan->gap;
  summary.solve_s = plan->solve_s;
  for (size_t d = 0; d < devices.size(); ++d) {
    int m = plan->device_variant[d];
    if (m < 0) {
      summary.device_variant[devices[d]] = "";
      continue;
    }
    const ObservedWorker* w = observation.FindWorker(devices[d]);
    const int q = problem.variants[m].query_type;
    // A spare device (the plan sends it nothing) that loads anyway takes
    // its app's most accurate variant: the plan is just as good, and
    // queries beyond the planned demand are then served at full accuracy.
    if (plan->served_qps[d][q] <= 0 && m != problem.devices[d].current &&
        mode_ != ProteusMode::kInfaasAccuracy) {
      const int type = problem.devices[d].type;
      for (size_t other = 0; other < candidates.size(); ++other) {
        if (problem.variants[other].query_type == q && problem.peak_qps[type][other] > 0 &&
            candidates[other].accuracy > candidates[m].accuracy) {
          m = static_cast<int>(other);
        }
      }
    }
    summary.device_variant[devices[d]] = candidates[m].key.ToString();
    Target target{candidates[m].key, ReplicasOn(observation, candidates[m].key, w->type),
                  plan->served_qps[d][q]};
    targets_[devices[d]] = target;
    if (mode_ == ProteusMode::kSommelier && !pinned_app_.count(devices[d])) {
      pinned_app_[devices[d]] = candidates[m].app;
    }
  }
  planned_devices_ = devices;
  planned_catalogue_ = Catalogue(observation);
  planned_slowdown_.clear();
  for (const auto& [type, slowdown] : slowdown_) {
    planned_slowdown_[type] = SlowdownOf(type, observation.now);
  }
  const bool changed = !summary_.has_value() || summary.device_variant != summary_->device_variant;
  summary_ = std::move(summary);
  // INFaaS-Accuracy decides every round; only the rounds that change
  // something are worth a line.
  if (mode_ == ProteusMode::kInfaasAccuracy && !changed) return absl::OkStatus();
  std::string demands;
  for (const auto& q : problem.query_types) {
    absl::StrAppendFormat(&demands, "%s%s %.0f", demands.empty() ? "" : ", ", q.name, q.demand_qps);
  }
  std::string slowed;
  for (const auto& [type, factor] : planned_slowdown_) {
    if (factor < 1) absl::StrAppendFormat(&slowed, "; %s at %.2f of its profiles", type, factor);
  }
  sink.Record({observation.now, "plan", "", "", 0,
               absl::StrFormat("for %s qps: serves %.3f of it at accuracy %.4f; %d moves, "
                               "gap %.1e, solved in %.0f ms%s",
                               demands, plan->served_fraction, plan->effective_accuracy,
                               plan->moves, plan->gap, plan->solve_s * 1000, slowed),
               ""});
  return absl::OkStatus();
}

void ProteusAllocator::RecordFailure(const Observation& observation, const std::string& reason,
                                     ActionSink& sink) {
  if (reason == last_failure_) return;
  last_failure_ = reason;
  sink.Record({observation.now, "plan-failed", "", "", 0, reason, ""});
}

void ProteusAllocator::Apply(const Observation& observation, ActionSink& sink) {
  for (const std::string& id : planned_devices_) {
    const ObservedWorker* w = observation.FindWorker(id);
    if (w == nullptr || busy_.Contains(id)) continue;
    auto target = targets_.find(id);
    std::vector<std::pair<VariantKey, int>> others;
    const ObservedInstance* hosted = nullptr;
    for (const ObservedInstance& inst : w->instances) {
      if (!inst.takes_queries) continue;
      if (target != targets_.end() && inst.key == target->second.key) {
        hosted = &inst;
      } else {
        others.push_back({inst.key, inst.ready + inst.loading});
      }
    }
    auto unload_others = [&] {
      for (const auto& [key, replicas] : others) {
        sink.Remove(id, key, replicas);
        sink.Record(
            {observation.now, "unload", id, key.ToString(), replicas, "not in the plan", ""});
      }
    };
    if (target == targets_.end()) {
      unload_others();
      continue;
    }
    const Target& t = target->second;
    const int held = hosted != nullptr ? hosted->ready + hosted->loading : 0;
    if (hosted != nullptr && held >= t.replicas) {
      if (held > t.replicas) sink.Remove(id, t.key, held - t.replicas);
      unload_others();
      continue;
    }
    // Make before break when both fit in the worker's memory; otherwise
    // free the memory first.
    const ModelOption* model = observation.FindModel(t.key.model);
    const VariantOption* option = model != nullptr ? model->Find(t.key.variant, w->type) : nullptr;
    const WorkerType* type = observation.FindType(w->type);
    const double needed = option != nullptr && option->profile != nullptr
                              ? option->profile->memory_mb() * (t.replicas - held)
                              : 0;
    const bool room =
        type == nullptr || type->memory_mb <= 0 || w->memory_used_mb + needed <= type->memory_mb;
    if (!room) {
      for (const auto& [key, replicas] : others) sink.Remove(id, key, replicas);
      others.clear();
    }
    sink.Record({observation.now, "load", id, t.key.ToString(), t.replicas - held,
                 others.empty() ? "the plan" : "the plan; then unloads what it replaces", ""});
    sink.Load(id, t.key, t.replicas - held, std::move(others), busy_.Mark(id));
  }
}

void ProteusAllocator::PublishWeights(const Observation& observation, ActionSink& sink) {
  auto serves = [](const ObservedWorker& w, const VariantKey& key) {
    for (const ObservedInstance& inst : w.instances) {
      if (inst.key == key && inst.takes_queries && inst.ready > 0) return true;
    }
    return false;
  };
  for (auto it = serving_.begin(); it != serving_.end();) {
    it = targets_.count(it->first) ? std::next(it) : serving_.erase(it);
  }
  std::vector<RouteWeight> weights;
  for (const auto& [id, target] : targets_) {
    const ObservedWorker* w = observation.FindWorker(id);
    if (w == nullptr) continue;
    // A device the plan gives no share still takes a sliver, so that its
    // instance is not idle when demand turns out higher than planned.
    const double share = std::max(target.served_qps, 1e-3);
    weights.push_back({id, target.key, share});
    if (serves(*w, target.key)) {
      serving_[id] = {target.key, share};
    } else if (auto old = serving_.find(id);
               old != serving_.end() && serves(*w, old->second.first)) {
      weights.push_back({id, old->second.first, old->second.second});
    }
  }
  std::vector<std::tuple<std::string, std::string, double>> flat;
  for (const RouteWeight& w : weights) flat.emplace_back(w.worker, w.key.ToString(), w.weight);
  if (flat == published_) return;
  published_ = std::move(flat);
  sink.SetRouteWeights(std::move(weights));
}

absl::Status ProteusAllocator::ModelRound(const Observation& observation, ActionSink& sink) {
  MeasureDemand(observation);
  LearnSlowdown(observation);
  const std::vector<std::string> devices = Devices(observation);
  const std::map<std::string, double> demand = MeanDemand();
  if (ShouldSolve(observation, devices, Catalogue(observation), demand)) {
    if (absl::Status s = Solve(observation, devices, demand, sink); !s.ok()) return s;
  }
  Apply(observation, sink);
  PublishWeights(observation, sink);
  return absl::OkStatus();
}

}  // namespace maitre::control
