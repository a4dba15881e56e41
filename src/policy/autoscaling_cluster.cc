#include "policy/autoscaling_cluster.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/status_macros.h"
#include "policy/provisioning.h"

namespace maitre::policy {
namespace {

constexpr double kEps = 1e-9;

enum class Resource { kCpu, kMemory };

struct Figures {
  double cpu = 0;
  double memory = 0;
  double overloaded = 0;
};

bool HasOverloaded(const ClusterWorker& w) {
  for (const ClusterInstance& i : w.instances) {
    if (i.state == InstanceState::kOverloaded) return true;
  }
  return false;
}

class Rules {
 public:
  Rules(const ClusterAutoscalerOptions& o, const ClusterSnapshot& s) : o_(o), s_(s) {
    for (const WorkerType& t : o.types) types_[t.name] = &t;
    for (const ClusterWorker& w : s.workers) ++count_[w.type];
  }

  const WorkerType& TypeOf(const ClusterWorker& w) const { return *types_.at(w.type); }

  // Capacity-weighted utilisation and the share of workers with an Overloaded
  // instance, over the workers for which `keep` is true.
  template <typename Keep>
  Figures Measure(Keep keep) const {
    Figures f;
    double cores = 0, memory = 0, used_cores = 0, used_memory = 0;
    int workers = 0, overloaded = 0;
    for (const ClusterWorker& w : s_.workers) {
      if (!keep(w)) continue;
      const WorkerType& t = TypeOf(w);
      ++workers;
      cores += t.cores;
      memory += static_cast<double>(t.memory_mb);
      if (w.starting) continue;  // empty capacity
      used_cores += w.cpu_utilisation * t.cores;
      used_memory += w.memory_utilisation * static_cast<double>(t.memory_mb);
      if (HasOverloaded(w)) ++overloaded;
    }
    f.cpu = cores > 0 ? used_cores / cores : 0;
    f.memory = memory > 0 ? used_memory / memory : 0;
    f.overloaded = workers > 0 ? static_cast<double>(overloaded) / workers : 0;
    return f;
  }

  // Workers of `type` that may still be added.
  int Room(const std::string& type) const {
    auto it = o_.max_workers.find(type);
    int limit = it != o_.max_workers.end() ? it->second : o_.default_max_workers;
    auto n = count_.find(type);
    return std::max(0, limit - (n != count_.end() ? n->second : 0));
  }
  bool UnderLimit(const std::string& type) const { return Room(type) > 0; }

  // The cheapest type among `allowed` (all when empty) that is under its
  // limit and holds an instance of `cores` / `memory_mb`. Ties: more of
  // `resource`, then the name.
  const WorkerType* Cheapest(const std::set<std::string>& allowed, double cores, double memory_mb,
                             Resource resource) const {
    const WorkerType* best = nullptr;
    for (const WorkerType& t : o_.types) {
      if (!allowed.empty() && allowed.count(t.name) == 0) continue;
      if (!UnderLimit(t.name)) continue;
      if (t.cores + kEps < cores) continue;
      if (t.memory_mb > 0 && static_cast<double>(t.memory_mb) + kEps < memory_mb) continue;
      if (best == nullptr) {
        best = &t;
        continue;
      }
      auto amount = [resource](const WorkerType& x) {
        return resource == Resource::kCpu ? static_cast<double>(x.cores)
                                          : static_cast<double>(x.memory_mb);
      };
      if (t.price_per_hour != best->price_per_hour) {
        if (t.price_per_hour < best->price_per_hour) best = &t;
      } else if (amount(t) != amount(*best)) {
        if (amount(t) > amount(*best)) best = &t;
      } else if (t.name < best->name) {
        best = &t;
      }
    }
    return best;
  }

 private:
  const ClusterAutoscalerOptions& o_;
  const ClusterSnapshot& s_;
  std::map<std::string, const WorkerType*> types_;
  std::map<std::string, int> count_;
};

// A rule that holds: what it asks for.
struct Need {
  ClusterReason reason;
  std::set<std::string> allowed_types;  // empty: any
  double cores = 0;
  double memory_mb = 0;
  Resource resource = Resource::kCpu;
  std::string detail;
};

// Sizing by demand (see the header): the adds that serve the model with the
// most unmet demand at the least cost; empty when no demand or no type can.
std::vector<ClusterAction> AddsForDemand(const ClusterAutoscalerOptions& o, const Rules& rules,
                                         const ClusterSnapshot& snapshot, ClusterReason reason,
                                         const std::string& trigger) {
  // Workers still starting, or up with nothing loaded, will serve what the
  // demand does not show yet: count what each could serve as covering it,
  // or every round of a minute-long launch would buy again.
  auto unmet = [&](const ClusterDemand& d) {
    double coming = 0;
    for (const ClusterWorker& w : snapshot.workers) {
      if (!w.starting && !w.instances.empty()) continue;
      auto it = d.qps_per_worker.find(w.type);
      if (it != d.qps_per_worker.end()) coming += it->second;
    }
    return d.unmet_qps - coming;
  };
  const ClusterDemand* top = nullptr;
  double top_unmet = 0;
  for (const ClusterDemand& d : snapshot.demands) {
    const double u = unmet(d);
    if (!(u > kEps)) continue;
    if (top == nullptr || u > top_unmet || (u == top_unmet && d.model < top->model)) {
      top = &d;
      top_unmet = u;
    }
  }
  if (top == nullptr) return {};
  std::vector<ProvisioningVariant> offers;
  std::vector<const WorkerType*> offered_types;
  double best_qps = 0;
  for (const WorkerType& t : o.types) {
    auto it = top->qps_per_worker.find(t.name);
    if (it == top->qps_per_worker.end() || !(it->second > kEps) || !rules.UnderLimit(t.name)) {
      continue;
    }
    offers.push_back({t.name, t.name, 0, it->second, t.price_per_hour / 3600});
    offered_types.push_back(&t);
    best_qps = std::max(best_qps, it->second);
  }
  if (offers.empty()) return {};
  // No round adds more than max_adds_per_round workers, so demand beyond what
  // that many of the largest can serve is left to later rounds; it also
  // keeps the exact search small.
  const double want = std::min(top_unmet, o.max_adds_per_round * best_qps);
  ProvisioningOptions search;
  search.max_nodes = 200'000;
  std::vector<int> counts(offers.size(), 0);
  auto mix = CheapestConfiguration(offers, want, 1.0, search);
  if (mix.ok()) {
    counts = mix->counts;
  } else {
    // The search gave up: the type with the most qps per dollar.
    size_t best = 0;
    for (size_t k = 1; k < offers.size(); ++k) {
      if (offers[k].throughput_qps / offers[k].cost_per_s >
          offers[best].throughput_qps / offers[best].cost_per_s) {
        best = k;
      }
    }
    counts[best] = static_cast<int>(std::ceil(want / offers[best].throughput_qps));
  }
  std::vector<ClusterAction> adds;
  ProvisioningConfiguration bought{std::vector<int>(offers.size(), 0)};
  int budget = o.max_adds_per_round;
  double qps = 0;
  for (size_t k = 0; k < offers.size() && budget > 0; ++k) {
    int n = std::min({counts[k], rules.Room(offered_types[k]->name), budget});
    budget -= n;
    bought.counts[k] = n;
    qps += n * offers[k].throughput_qps;
    for (int i = 0; i < n; ++i) {
      ClusterAction add;
      add.kind = ClusterAction::Kind::kAddWorker;
      add.worker_type = offered_types[k]->name;
      add.reason = reason;
      add.for_model = top->model;
      adds.push_back(std::move(add));
    }
  }
  const std::string mix_text = FormatConfiguration(offers, bought);
  for (ClusterAction& a : adds) {
    a.detail = absl::StrFormat(
        "%s; %s has %.1f qps unmet: adding %s, the cheapest mix that serves %.1f qps of it",
        trigger, top->model, top_unmet, mix_text, std::min(qps, top_unmet));
  }
  return adds;
}

// Decide refuses a snapshot that names an unknown worker type or has a
// negative utilisation.
absl::Status CheckSnapshot(const ClusterAutoscalerOptions& o, const ClusterSnapshot& snapshot) {
  std::set<std::string> known;
  for (const WorkerType& t : o.types) known.insert(t.name);
  for (const ClusterWorker& w : snapshot.workers) {
    if (known.count(w.type) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("worker ", w.id, " has unknown type ", w.type));
    }
    if (!(w.cpu_utilisation >= 0) || !(w.memory_utilisation >= 0)) {
      return absl::InvalidArgumentError(absl::StrCat("worker ", w.id, " has negative utilisation"));
    }
  }
  return absl::OkStatus();
}

// Rules 1 and 2: the cluster's cpu (or memory) utilisation, `utilisation`,
// is over the threshold. The largest instance on a worker over the threshold
// sizes the worker to add.
Need UtilisationNeed(const ClusterAutoscalerOptions& o, const ClusterSnapshot& snapshot,
                     Resource r, double utilisation) {
  Need need;
  for (const ClusterWorker& w : snapshot.workers) {
    double u = r == Resource::kCpu ? w.cpu_utilisation : w.memory_utilisation;
    if (w.starting || u <= o.utilisation_threshold) continue;
    for (const ClusterInstance& i : w.instances) {
      need.cores = std::max(need.cores, i.cores);
      need.memory_mb = std::max(need.memory_mb, i.memory_mb);
    }
  }
  need.resource = r;
  const bool cpu = r == Resource::kCpu;
  need.reason = cpu ? ClusterReason::kCpuUtilisation : ClusterReason::kMemoryUtilisation;
  need.detail = absl::StrFormat("%s utilisation %.0f%% > %.0f%% across %d workers",
                                cpu ? "cpu" : "memory", 100 * utilisation,
                                100 * o.utilisation_threshold,
                                static_cast<int>(snapshot.workers.size()));
  return need;
}

// Rule 3: every active instance on the workers of one type is Interfered;
// a worker of that type is asked for. A type with a worker still starting
// is held back (in `held_back`): the new worker may be the relief.
void AddAllInterferedNeeds(const ClusterAutoscalerOptions& o, const ClusterSnapshot& snapshot,
                           std::vector<Need>& needs, std::vector<std::string>& held_back) {
  for (const WorkerType& t : o.types) {
    int counted = 0, interfered = 0;
    bool starting = false;
    Need need;
    need.reason = ClusterReason::kAllInterfered;
    need.allowed_types = {t.name};
    for (const ClusterWorker& w : snapshot.workers) {
      if (w.type != t.name) continue;
      starting |= w.starting;
      for (const ClusterInstance& i : w.instances) {
        if (i.state == InstanceState::kInactive) continue;
        ++counted;
        if (i.state == InstanceState::kInterfered) {
          ++interfered;
          need.cores = std::max(need.cores, i.cores);
          need.memory_mb = std::max(need.memory_mb, i.memory_mb);
        }
      }
    }
    if (counted == 0 || interfered < counted) continue;
    if (starting) {
      held_back.push_back(absl::StrCat("every instance on ", t.name,
                                       " is Interfered; a worker of it is starting"));
      continue;
    }
    need.detail = absl::StrFormat("all %d active instances on %s workers are Interfered", counted,
                                  t.name);
    needs.push_back(need);
  }
}

// Rule 4: too many workers have an Overloaded instance. The add may be of
// any type those workers are, sized by their largest Overloaded instance.
Need OverloadedNeed(const ClusterAutoscalerOptions& o, const ClusterSnapshot& snapshot,
                    double overloaded) {
  Need need;
  need.reason = ClusterReason::kOverloaded;
  for (const ClusterWorker& w : snapshot.workers) {
    if (w.starting || !HasOverloaded(w)) continue;
    need.allowed_types.insert(w.type);
    for (const ClusterInstance& i : w.instances) {
      if (i.state != InstanceState::kOverloaded) continue;
      need.cores = std::max(need.cores, i.cores);
      need.memory_mb = std::max(need.memory_mb, i.memory_mb);
    }
  }
  need.detail = absl::StrFormat("%.0f%% of workers have Overloaded instances (> %.0f%%)",
                                100 * overloaded, 100 * o.overloaded_fraction);
  return need;
}

// What the rules ask for, in rule order.
std::vector<Need> CapacityNeeds(const ClusterAutoscalerOptions& o, const ClusterSnapshot& snapshot,
                                const Figures& figures, std::vector<std::string>& held_back) {
  std::vector<Need> needs;
  if (figures.cpu > o.utilisation_threshold) {
    needs.push_back(UtilisationNeed(o, snapshot, Resource::kCpu, figures.cpu));
  }
  if (figures.memory > o.utilisation_threshold) {
    needs.push_back(UtilisationNeed(o, snapshot, Resource::kMemory, figures.memory));
  }
  AddAllInterferedNeeds(o, snapshot, needs, held_back);
  if (figures.overloaded > o.overloaded_fraction) {
    needs.push_back(OverloadedNeed(o, snapshot, figures.overloaded));
  }
  return needs;
}

// The adds for `needs`: sized by demand when the snapshot has demand
// figures, else one worker of the cheapest type that fits the first need
// that can be met. At most one add decision per round, none during the add
// cool-down; every need not acted on is explained in held_back.
void DecideAdds(const ClusterAutoscalerOptions& o, const Rules& rules,
                const ClusterSnapshot& snapshot, const std::vector<Need>& needs,
                const ClusterAutoscalerState& previous, Nanos now, ClusterDecision& decision) {
  bool cooling = previous.last_add.has_value() && now - *previous.last_add < o.add_cooldown;
  bool added = false;
  // With demand figures, rules 1 and 3 are sized by demand alone (the first
  // of them that holds names the trigger); when the demand is covered by
  // what is loading or starting, they add nothing.
  const bool by_demand = !snapshot.demands.empty();
  const Need* served = nullptr;
  if (by_demand && !cooling) {
    auto capacity = std::find_if(needs.begin(), needs.end(), [](const Need& n) {
      return n.reason != ClusterReason::kAllInterfered;
    });
    if (capacity != needs.end()) {
      std::vector<ClusterAction> adds =
          AddsForDemand(o, rules, snapshot, capacity->reason, capacity->detail);
      if (!adds.empty()) {
        for (ClusterAction& a : adds) decision.actions.push_back(std::move(a));
        decision.state.last_add = now;
        added = true;
        served = &*capacity;
      }
    }
  }
  for (const Need& need : needs) {
    if (&need == served) continue;
    if (by_demand && need.reason != ClusterReason::kAllInterfered && !added && !cooling) {
      decision.held_back.push_back(absl::StrCat(
          need.detail,
          " (no unmet demand beyond what is loading or starting, or no type left can serve it)"));
      continue;
    }
    if (added) {
      decision.held_back.push_back(absl::StrCat(need.detail, " (one add per round)"));
      continue;
    }
    if (cooling) {
      decision.held_back.push_back(absl::StrCat(need.detail, " (add cool-down)"));
      continue;
    }
    const WorkerType* type = rules.Cheapest(need.allowed_types, need.cores, need.memory_mb,
                                            need.resource);
    if (type == nullptr) {
      decision.held_back.push_back(
          absl::StrCat(need.detail, " (no type that fits is below its worker limit)"));
      continue;
    }
    ClusterAction add;
    add.kind = ClusterAction::Kind::kAddWorker;
    add.worker_type = type->name;
    add.reason = need.reason;
    add.detail = absl::StrFormat("%s: adding %s, the cheapest type that fits (%.4f $/h)",
                                 need.detail, type->name, type->price_per_hour);
    decision.actions.push_back(std::move(add));
    decision.state.last_add = now;
    added = true;
  }
}

// Removals: workers idle past the cool-down, the most expensive (then the
// longest idle) first, while the cluster keeps min_workers and what is left
// stays under the removal limits.
void DecideRemovals(const ClusterAutoscalerOptions& o, const Rules& rules,
                    const ClusterSnapshot& snapshot, Nanos now, ClusterDecision& decision) {
  std::vector<const ClusterWorker*> idle;
  for (const ClusterWorker& w : snapshot.workers) {
    if (!w.starting && w.idle_since.has_value() && now - *w.idle_since >= o.idle_cooldown) {
      idle.push_back(&w);
    }
  }
  std::sort(idle.begin(), idle.end(), [&](const ClusterWorker* a, const ClusterWorker* b) {
    double pa = rules.TypeOf(*a).price_per_hour, pb = rules.TypeOf(*b).price_per_hour;
    if (pa != pb) return pa > pb;
    if (*a->idle_since != *b->idle_since) return *a->idle_since < *b->idle_since;
    return a->id < b->id;
  });
  std::set<std::string> removed;
  int remaining = static_cast<int>(snapshot.workers.size());
  for (const ClusterWorker* w : idle) {
    if (remaining - 1 < o.min_workers) break;
    std::set<std::string> without = removed;
    without.insert(w->id);
    Figures after =
        rules.Measure([&](const ClusterWorker& x) { return without.count(x.id) == 0; });
    if (after.cpu > o.removal_utilisation_limit + kEps ||
        after.memory > o.removal_utilisation_limit + kEps ||
        after.overloaded > o.overloaded_fraction + kEps) {
      decision.held_back.push_back(absl::StrFormat(
          "%s is idle but removing it would leave cpu %.0f%% / memory %.0f%%", w->id,
          100 * after.cpu, 100 * after.memory));
      continue;
    }
    removed = std::move(without);
    --remaining;
    ClusterAction remove;
    remove.kind = ClusterAction::Kind::kRemoveWorker;
    remove.worker_type = w->type;
    remove.worker_id = w->id;
    remove.reason = ClusterReason::kIdle;
    remove.detail = absl::StrFormat("%s idle for %.0f s (cool-down %.0f s)", w->id,
                                    ToSeconds(now - *w->idle_since), ToSeconds(o.idle_cooldown));
    decision.actions.push_back(std::move(remove));
  }
}

}  // namespace

double WorkerCapacityQps(const Profile& profile, double slo_ms, const WorkerType& type,
                         double cores_per_replica) {
  double fit = std::floor(type.cores / std::max(cores_per_replica, 1e-9) + kEps);
  if (type.memory_mb > 0 && profile.memory_mb() > 0) {
    fit = std::min(fit, std::floor(static_cast<double>(type.memory_mb) / profile.memory_mb() + kEps));
  }
  return std::max(0.0, fit) * profile.SaturationQps(slo_ms);
}

absl::string_view ClusterReasonName(ClusterReason reason) {
  switch (reason) {
    case ClusterReason::kCpuUtilisation:
      return "cpu-utilisation";
    case ClusterReason::kMemoryUtilisation:
      return "memory-utilisation";
    case ClusterReason::kAllInterfered:
      return "all-interfered";
    case ClusterReason::kOverloaded:
      return "overloaded";
    case ClusterReason::kIdle:
      return "idle";
  }
  return "unknown";
}

absl::StatusOr<std::unique_ptr<ClusterAutoscaler>> ClusterAutoscaler::Create(
    ClusterAutoscalerOptions options) {
  if (options.types.empty()) return absl::InvalidArgumentError("no worker types");
  std::set<std::string> names;
  for (const WorkerType& t : options.types) {
    if (!names.insert(t.name).second) {
      return absl::InvalidArgumentError(absl::StrCat("worker type ", t.name, " appears twice"));
    }
  }
  auto fraction = [](double x) { return x > 0 && x <= 1; };
  if (!fraction(options.utilisation_threshold) || !fraction(options.overloaded_fraction)) {
    return absl::InvalidArgumentError("thresholds must be in (0, 1]");
  }
  if (!(options.removal_utilisation_limit >= 0) ||
      options.removal_utilisation_limit > options.utilisation_threshold) {
    return absl::InvalidArgumentError(
        "removal_utilisation_limit must be in [0, utilisation_threshold], or a removal could "
        "trigger an add");
  }
  if (options.min_workers < 0 || options.default_max_workers < 0 || options.add_cooldown < 0 ||
      options.idle_cooldown < 0) {
    return absl::InvalidArgumentError("limits and cool-downs must be non-negative");
  }
  return std::unique_ptr<ClusterAutoscaler>(new ClusterAutoscaler(std::move(options)));
}

absl::StatusOr<ClusterDecision> ClusterAutoscaler::Decide(const ClusterSnapshot& snapshot,
                                                          const ClusterAutoscalerState& previous,
                                                          Nanos now) const {
  const ClusterAutoscalerOptions& o = options_;
  MAITRE_RETURN_IF_ERROR(CheckSnapshot(o, snapshot));
  Rules rules(o, snapshot);
  ClusterDecision decision;
  decision.state = previous;
  Figures now_figures = rules.Measure([](const ClusterWorker&) { return true; });
  decision.cpu_utilisation = now_figures.cpu;
  decision.memory_utilisation = now_figures.memory;
  decision.overloaded_fraction = now_figures.overloaded;

  std::vector<Need> needs = CapacityNeeds(o, snapshot, now_figures, decision.held_back);
  DecideAdds(o, rules, snapshot, needs, previous, now, decision);
  // A round that wanted capacity removes none, even when the add was held
  // back.
  if (!needs.empty()) return decision;
  DecideRemovals(o, rules, snapshot, now, decision);
  return decision;
}

}  // namespace maitre::policy
