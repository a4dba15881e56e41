// What an allocator sees of the cluster at one moment, in the same terms in
// both worlds (docs/architecture.md, "One control plane"): the controller
// builds it from its live cluster, catalog and provider; the simulator from
// its simulated workers. Values only: an observation is built, handed to the
// allocator and dropped within one round.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/profile.h"
#include "core/time.h"
#include "core/variant.h"
#include "core/worker_type.h"
#include "pipeline/tuner.h"
#include "policy/instance_state.h"

namespace maitre::control {

// One variant of a model that may be loaded on one worker type, with its
// profile there.
struct VariantOption {
  std::string variant;  // VariantKey::variant
  std::string worker_type;
  double accuracy = 0;
  const Profile* profile = nullptr;  // owned by the world; outlives the round
  double cores_per_replica = 1;
};

// A model the cluster may serve: its app's objectives and its loadable
// variants on every worker type.
struct ModelOption {
  std::string name;
  std::string app;
  double slo_ms = 0;                   // the objective its instances are judged at
  std::optional<double> min_accuracy;  // the app's default floor, if it has one
  // The app's bound on accuracy scaling: the fraction of its best accuracy
  // an allocator that scales accuracy may give up (unset: its own option).
  std::optional<double> max_accuracy_drop;
  // The app's service level objective: at least this share of its queries
  // within `slo_ms` (MArk §4.1's SL_min); unset: the allocator's default.
  std::optional<double> sl_min;
  std::vector<VariantOption> variants;
  const VariantOption* Find(const std::string& variant, const std::string& worker_type) const;
};

// One instance (a variant's replicas on one worker).
struct ObservedInstance {
  VariantKey key;
  int ready = 0;    // replicas serving
  int loading = 0;  // replicas being loaded
  // Replicas that still hold cores and memory but take no queries (being
  // unloaded, or retiring after their batch).
  int winding_down = 0;
  // False once the instance is being unloaded (or failed): its last
  // arrivals are going elsewhere now.
  bool takes_queries = true;
  policy::InstanceState state = policy::InstanceState::kInactive;
  // Figures from the worker's last report.
  double arrival_qps = 0;
  double served_qps = 0;
  int queue_length = 0;
  double mean_batch = 0;
  double compute_p50_ms = 0;
  // When a load that made or grew it last finished: its age.
  Nanos ready_since = 0;
};

struct ObservedWorker {
  std::string id;
  std::string type;
  // Asked for but not serving yet: counts as capacity on the way.
  bool starting = false;
  double cpu_utilisation = 0;  // 0..1, the last report's
  double memory_used_mb = 0;
  // Since when it has neither received, served nor held a query; unset
  // while it is busy.
  std::optional<Nanos> idle_since;
  std::vector<ObservedInstance> instances;
};

// Queries of an app resolved since the last model round, every outcome
// included (refused, dropped, late), and how many of them were answered
// within their objective: the measured service level (MArk §4.1's SL).
struct ServiceCount {
  int64_t answered = 0;
  int64_t within = 0;
};

// A registered pipeline with an applied plan (docs/policies.md, "Pipelines
// under an end-to-end objective"): per plan stage, the model it runs and the
// worker type the plan put it on, and the tuner's starting point. Only
// pipelines with a plan are shown; their stage models are the pipeline
// allocator's, not the allocator's beside it.
// Rows of a pipeline's served traffic before both worlds show its measured
// scale factors: at 1,000 rows a share near 0.3 is known to about ±0.015.
inline constexpr int64_t kMeasuredScaleRows = 1000;

struct ObservedPipeline {
  std::string name;
  std::string app;
  // Changes whenever a plan is applied: the tuner then starts over from it.
  int64_t plan_id = 0;
  pipeline::TunerPlan plan;  // its stages' names are the pipeline's vertices
  std::vector<std::string> stage_models;  // per plan stage
  std::vector<std::string> stage_types;   // per plan stage
  // Per plan stage, the variant planned; empty: the model's first one
  // profiled on the stage's type.
  std::vector<std::string> stage_variants;
  // Per plan stage, its share of the pipeline's rows on served traffic
  // (s_m measured); empty until kMeasuredScaleRows rows were served.
  std::vector<double> measured_scale;
  // The pipeline's queries that arrived since the last model round, in
  // time order (model rounds only): what the tuner's envelopes are drawn on.
  std::vector<Nanos> arrivals;
};

struct Observation {
  Nanos now = 0;
  std::vector<WorkerType> types;
  std::vector<ModelOption> models;
  std::vector<ObservedWorker> workers;
  // Rows turned away before reaching any worker, by app, since the last
  // model round (the allocator divides by the time since then).
  std::map<std::string, int64_t> refused_rows;
  // Queries resolved by app since the last model round (model rounds only).
  std::map<std::string, ServiceCount> service;
  // Queries/s offered to the instances of workers left out of `workers`
  // because they are leaving (under an interruption notice), by app, from
  // their last reports: they serve until shortly before they stop, and then
  // this demand is the others' (docs/operations.md, "Spot interruptions").
  std::map<std::string, double> leaving_qps;
  std::vector<ObservedPipeline> pipelines;

  const ModelOption* FindModel(const std::string& name) const;
  const WorkerType* FindType(const std::string& name) const;
  const ObservedWorker* FindWorker(const std::string& id) const;
};

// What each app was offered: its instances' last reported arrivals, those
// of leaving workers' instances, and the rows turned away, spread over
// `refused_over_s` seconds (the time since the last model round; 0 leaves
// them out). Every app with a model is present.
std::map<std::string, double> OfferedByApp(const Observation& observation,
                                           double refused_over_s);

// Adds what an instance of `model` on a leaving worker was offered (its
// last report's arrivals) to its app's `leaving_qps`; `models` must be
// filled. Both worlds fill leaving_qps through it.
void CountLeaving(Observation& observation, const std::string& model, double arrival_qps);

}  // namespace maitre::control
