// The cluster (worker-level) autoscaler (INFaaS §4.2):
// the pure policy the controller runs every 2 s to decide when to add a
// worker, of which type, and which idle workers to remove.
//
// Rules, in the order they are checked (docs/policies.md, "Cluster
// autoscaler", has the same list with the reasoning):
//   1. CPU (then memory) utilisation across workers, weighted by each
//      worker's capacity and counting workers still starting as empty, is
//      above `utilisation_threshold` (80%).
//   2. Every instance on the workers of some type is Interfered (instances
//      that are Inactive are not counted; at least one must be Interfered),
//      and no worker of that type is already starting.
//   3. More than `overloaded_fraction` (80%) of the workers have at least one
//      Overloaded instance.
// The first rule that holds (and is not held back by the add cool-down or
// the per-type limits) adds one worker, or, sized by demand (below), up to
// max_adds_per_round.
// Which type: the cheapest (price per hour) that fits the need: it can hold
// the largest instance that triggered the rule and is below its
// `max_workers`. Rule 1 may pick any type (ties: more of the pressured
// resource); rule 2 keeps the Interfered type (interference is relieved by
// the same hardware, less shared); rule 3 picks among the types that host the
// Overloaded instances (the hardware their variants are known to run on).
// Sizing by demand (when the snapshot carries `demands`): INFaaS's triggers
// say *when* to add, but "the cheapest type that fits" buys the cheapest
// machine, not the cheapest capacity: at 1000 qps it bought eight CPU
// workers before one accelerator. When rule 1 or 3 holds and some model has
// unmet demand, the policy instead buys, for the model with the most unmet
// demand, the cheapest mix of workers that covers it, by what one new
// worker of each type would serve for that model (CheapestConfiguration,
// the INFaaS Table 3 solver), up to `max_adds_per_round` workers and each
// type's limit. Any type may be bought: an Overloaded CPU variant is best
// relieved by an accelerator that runs a faster variant of the same model.
// Workers still starting, or up with nothing loaded, count as serving what
// one worker of their type serves of each demand (so a minute-long launch
// is not bought again every round).
// Rule 2 (interference) still adds one worker of the interfered type.
//
// Removal: a worker idle for `idle_cooldown` is removed when no worker is
// added this round, at least `min_workers` remain, and the remaining workers
// stay within `removal_utilisation_limit` and `overloaded_fraction` (so that
// a removal never triggers an add at the next round). The most expensive idle
// worker goes first.
//
// Thread-safety: ClusterAutoscaler is immutable after Create; Decide() is
// const. Value types are not synchronised.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/profile.h"
#include "core/time.h"
#include "core/worker_type.h"
#include "policy/instance_state.h"

namespace maitre::policy {

struct ClusterInstance {
  std::string variant;  // "model:variant", for the reasons
  // From the instance state machine (policy/instance_state.h).
  InstanceState state = InstanceState::kActive;
  double cores = 0;  // what it takes on its worker
  double memory_mb = 0;
};

struct ClusterWorker {
  std::string id;
  std::string type;                 // a name in ClusterAutoscalerOptions::types
  double cpu_utilisation = 0;       // 0..1 of its cores
  double memory_utilisation = 0;    // 0..1 of its memory
  std::vector<ClusterInstance> instances;
  // Since when it has served no query (or held no instance); nullopt while
  // busy.
  std::optional<Nanos> idle_since;
  // Launched but not yet serving: it counts as empty capacity, so the rules
  // do not add another worker for the same need while it starts.
  bool starting = false;
};

// Demand for one model that the instances loaded for it do not cover, and
// what one more worker of each type would serve for it (the mechanism works
// both out from the profiles: replicas of the model's best variant that fit
// on an empty worker of the type, times that variant's saturation rate at
// the model's objective).
struct ClusterDemand {
  std::string model;
  double unmet_qps = 0;
  std::map<std::string, double> qps_per_worker;  // by type; absent: cannot serve it
};

// What one empty worker of `type` serves with replicas of a variant that
// take `cores_per_replica` cores and the profile's memory each: the replicas
// that fit, times one replica's saturation rate at `slo_ms`.
double WorkerCapacityQps(const Profile& profile, double slo_ms, const WorkerType& type,
                         double cores_per_replica = 1);

struct ClusterSnapshot {
  std::vector<ClusterWorker> workers;
  // Empty: adds are sized by the rules alone (one worker of the cheapest
  // type that fits).
  std::vector<ClusterDemand> demands;
};

struct ClusterAutoscalerOptions {
  std::vector<WorkerType> types;
  // Per type; types not listed are limited by `default_max_workers`.
  std::map<std::string, int> max_workers;
  int default_max_workers = 8;
  int min_workers = 1;
  double utilisation_threshold = 0.8;
  double overloaded_fraction = 0.8;
  // After an add, no other add for this long (a new worker needs time to
  // start and take load).
  Nanos add_cooldown = 10 * kSecond;
  Nanos idle_cooldown = 60 * kSecond;
  double removal_utilisation_limit = 0.7;
  // Sizing by demand: at most this many workers per round.
  int max_adds_per_round = 4;
};

enum class ClusterReason {
  kCpuUtilisation,
  kMemoryUtilisation,
  kAllInterfered,
  kOverloaded,
  kIdle,
};
absl::string_view ClusterReasonName(ClusterReason reason);

struct ClusterAction {
  enum class Kind { kAddWorker, kRemoveWorker };
  Kind kind = Kind::kAddWorker;
  std::string worker_type;  // the type added, or the removed worker's type
  std::string worker_id;    // kRemoveWorker
  ClusterReason reason = ClusterReason::kCpuUtilisation;
  std::string detail;  // one sentence with the figures
  // kAddWorker sized by demand: the model whose unmet demand it serves.
  std::string for_model;
};

struct ClusterAutoscalerState {
  std::optional<Nanos> last_add;
};

struct ClusterDecision {
  std::vector<ClusterAction> actions;
  ClusterAutoscalerState state;  // pass back on the next call
  // The figures the rules saw, for metrics.
  double cpu_utilisation = 0;
  double memory_utilisation = 0;
  double overloaded_fraction = 0;
  // Needs that held but could not be acted on (limits, cool-down).
  std::vector<std::string> held_back;
};

class ClusterAutoscaler {
 public:
  // InvalidArgument for thresholds outside (0, 1], an empty or duplicated
  // type table, or removal_utilisation_limit above the threshold.
  static absl::StatusOr<std::unique_ptr<ClusterAutoscaler>> Create(
      ClusterAutoscalerOptions options);

  const ClusterAutoscalerOptions& options() const { return options_; }

  // InvalidArgument when a worker names an unknown type or has a negative
  // utilisation.
  absl::StatusOr<ClusterDecision> Decide(const ClusterSnapshot& snapshot,
                                         const ClusterAutoscalerState& previous,
                                         Nanos now) const;

 private:
  explicit ClusterAutoscaler(ClusterAutoscalerOptions options) : options_(std::move(options)) {}
  ClusterAutoscalerOptions options_;
};

}  // namespace maitre::policy
