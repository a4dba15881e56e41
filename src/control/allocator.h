// The allocation seam (docs/architecture.md, "One control plane"): a periodic
// planner that owns which variants are loaded where and how many workers
// exist. It reads an Observation and acts through an ActionSink, so the same
// allocator runs in the controller and in the simulator. Built in: "infaas"
// (the model autoscaler, consolidation and the cluster autoscaler;
// infaas_allocator.h), and "proteus" with its baselines "clipper-ht",
// "clipper-ha", "sommelier", "proteus-no-selection" and "infaas-accuracy"
// (proteus_allocator.h), and "mark" (provisioning ahead of predicted
// demand; mark_allocator.h).
// Others are added by name; one is chosen per server (`maitre serve
// --allocator NAME`) or per experiment (`policies.allocator`).
//
// Thread-safety: the named-allocator table is thread-safe. An Allocator's
// rounds are called from one thread at a time.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "control/action_sink.h"
#include "control/observation.h"
#include "core/worker_type.h"
#include "policy/selection.h"
#include "pipeline/tuner.h"
#include "policy/allocation_milp.h"
#include "policy/autoscaling_cluster.h"
#include "policy/autoscaling_consolidation.h"
#include "policy/autoscaling_model.h"
#include "policy/migration.h"
#include "policy/prediction/workload_prediction.h"

namespace maitre::control {

enum class ModelScaling { kOff, kInfaas, kHorizontal };
absl::string_view ModelScalingName(ModelScaling scaling);  // "off" | "infaas" | "horizontal"
absl::StatusOr<ModelScaling> ParseModelScaling(absl::string_view name);

// The Proteus allocator's rules (proteus_allocator.h).
struct ProteusOptions {
  // Re-solve this often under steady demand (the paper's 30 s).
  Nanos period = 30 * kSecond;
  // ... and at once when an app's demand leaves [s/(1+band), s·(1+band)]
  // around the demand s the plan was solved for. docs/policies.md says how
  // 0.25 was chosen.
  double band = 0.25;
  // Demand is the mean over this window of rounds: a Poisson stream of
  // λ qps measured over it varies by 1/sqrt(λ·window).
  Nanos demand_window = 5 * kSecond;
  // Every app is planned for at least this much, so an app without
  // traffic yet still has somewhere to go.
  double min_demand_qps = 1;
  // How far below an app's most accurate variant the plan may go, as a
  // fraction of its accuracy (the app's own min_accuracy also applies).
  double max_accuracy_drop = 1;
  // The plan loads no device past this share of its peak throughput P: at
  // P a device's queue holds a full batch all the time, and every burst or
  // slow batch then misses the objective (docs/policies.md).
  double max_utilisation = 0.8;
  // The lowest factor an observed overload may scale a worker type's
  // profiled peaks by: one bad second must not empty the plan. On the
  // 2-core development VM a one-core worker next to the front end and the
  // load generator sustained under half its idle profile, hence a quarter.
  double min_slowdown = 0.25;
  policy::AllocationOptions milp;
};

// The MArk allocator's rules (mark_allocator.h).
struct MarkOptions {
  // [P_u, P_w, P_s]: MArk's [1 min, 60, 5 s] (§4.2).
  policy::PredictionWindows windows;
  // policy::CreatePredictor's names: "last", "ewma[:ALPHA]",
  // "holt-winters[:SEASON_UNITS]", or "oracle", which reads each app's true
  // unit peaks from `known_peaks` (experiments: the bound on prediction).
  std::string predictor = "ewma";
  std::map<std::string, std::vector<double>> known_peaks;  // by app
  // From asking for a worker of a type until it serves: what a launch is
  // made ahead of demand by. The simulator fills it from its types' launch
  // delays; a type not named here takes the default.
  std::map<std::string, Nanos> launch_time;
  Nanos default_launch_time = 10 * kSecond;
  // Every forecast is multiplied by this (at least 1): capacity held beyond
  // the predicted peaks against prediction errors.
  double headroom = 1;
  // A worker the plan no longer uses goes only after it has been unneeded
  // this long (MArk's cool-down before destroying, §4.3), and only when its
  // paid block ends within `release_margin`; this long after its route
  // weights were withdrawn it is given back even if not idle yet.
  Nanos cool_down = 60 * kSecond;
  Nanos release_margin = 10 * kSecond;
  // The SLO monitor (MArk §4.4): each app's service level (the share of
  // its queries answered within its objective) is measured over the last
  // `slo_window`, once that holds `slo_min_queries`. Below the app's
  // SL_min (its own, else `sl_min`: the paper's 98%, §5.1) every forecast
  // of the app is raised by another `slo_step`, at most once a window and
  // to at most `slo_max_boost` over the headroom; after `slo_relax_after`
  // at or above SL_min since the last change, one step is taken back.
  double sl_min = 0.98;
  Nanos slo_window = 60 * kSecond;
  int64_t slo_min_queries = 100;
  double slo_step = 0.1;
  double slo_max_boost = 1;
  Nanos slo_relax_after = 300 * kSecond;
};

struct AllocatorOptions {
  std::vector<WorkerType> types;
  // Per type: never fewer workers than min (those the operator asked for)
  // nor more than max.
  std::map<std::string, int> min_workers;
  std::map<std::string, int> max_workers;
  // How often the world calls ModelRound: the refused rate of the first
  // round is taken over this long.
  Nanos model_period = kSecond;

  // The INFaaS allocator's rules.
  ModelScaling model_scaling = ModelScaling::kInfaas;
  policy::ModelAutoscalerOptions model;  // kHorizontal turns its upgrades and downgrades off
  // Giving a model up on a worker: the hysteresis after it spread
  // (policy/autoscaling_consolidation.h).
  policy::ConsolidationOptions consolidation;
  // Interference migration (policy/migration.h); off, Interfered instances
  // only have their capacity lowered.
  bool migrate_interfered = true;
  policy::MigrationOptions migration;
  bool cluster_scaling = true;
  // `types` and `max_workers` are taken from above.
  policy::ClusterAutoscalerOptions cluster;
  // An instance is not shrunk or given up until it has been ready this
  // long: selection loads instances for a reason, and removing them at
  // once would only make the two fight.
  Nanos min_instance_age = 30 * kSecond;
  // How long a capacity observed under overload is believed over the
  // profile's (the proteus allocator then lets it recover half-way to the
  // profile, and again after each further period without an overload).
  Nanos observed_capacity_memory = 30 * kSecond;
  // A worker whose last report says its process kept at least this share of
  // its cores busy is at its limit, whatever its instances' states say: the
  // instance carrying most of its queries is taken to sustain what it
  // served, on every worker of the type (docs/policies.md,
  // "How the control plane drives them", observed capacity). Above 1: off.
  double saturated_cpu_utilisation = 0.85;

  // The Proteus allocator and its baselines.
  ProteusOptions proteus;

  // The MArk allocator.
  MarkOptions mark;

  // The tuner of pipelines with an applied plan, which every allocator
  // made by name is wrapped with (pipeline_allocator.h).
  pipeline::TunerOptions pipeline_tuner;
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  // Every model period: what is loaded where.
  virtual absl::Status ModelRound(const Observation& observation, ActionSink& sink) = 0;
  // Every cluster period: how many workers of each type.
  virtual absl::Status ClusterRound(const Observation& observation, ActionSink& sink) = 0;
};

using AllocatorFactory =
    std::function<absl::StatusOr<std::unique_ptr<Allocator>>(const AllocatorOptions&)>;

// Makes `name` available to CreateAllocator; AlreadyExists if it is taken.
absl::Status AddAllocator(const std::string& name, AllocatorFactory factory);
// InvalidArgument, listing the names, for an unknown one. What it makes
// provisions planned pipelines too (pipeline_allocator.h).
absl::StatusOr<std::unique_ptr<Allocator>> CreateAllocator(const std::string& name,
                                                           const AllocatorOptions& options);
// InvalidArgument, listing the names, unless `name` is known.
absl::Status CheckAllocatorName(const std::string& name);
// The query router an allocator works with unless one is named: "weighted"
// for the plan-driven ones (proteus and its baselines, mark), whose plans
// route by weights and must not be undone by per-query loads; "infaas" otherwise.
std::string DefaultRouterFor(const std::string& allocator);
// The router's selection options an allocator works with: mark's plan has
// nothing for an app until it has seen its queries, so a query that finds
// its app without any instance loads one (SelectionOptions::
// load_on_cold_start); the Proteus family's plans leave apps unplaced on
// purpose, so theirs do not.
policy::SelectionOptions SelectionOptionsFor(const std::string& allocator);

}  // namespace maitre::control
