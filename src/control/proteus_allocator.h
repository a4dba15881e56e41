// The Proteus allocator (ASPLOS'24 §4; docs/policies.md, "Accuracy scaling
// (Proteus)"), for a fixed cluster: each worker is one device, each app one
// query type, and the allocation MILP (policy/allocation_milp.h) chooses
// which variant every device hosts and what share of each app's queries it
// takes. Each model round it
//  - measures each app's demand: its instances' arrivals plus what was
//    turned away, averaged over `demand_window`;
//  - re-solves every `period`, at once when an app's demand leaves the band
//    around what the plan was solved for, and when the devices or the
//    profiled variants change;
//  - carries the plan out: a device whose variant changes loads the new one
//    first and then unloads the old one (unloading first only when the
//    worker lacks the memory for both); a device the plan keeps is not
//    touched;
//  - learns how much less than its profile a worker type sustains: an
//    Overloaded instance's served rate over what its profile gives at the
//    batches it runs sets that type's factor (never below `min_slowdown`),
//    and every P of the type is scaled by it. Profiles are measured on an
//    idle worker; next to a busy front end the same worker does less, and a
//    plan made on the idle figures overloads it. Each
//    `observed_capacity_memory` without a new overload the factor recovers
//    half-way to 1. A factor that moves by more than 10% re-solves at once;
//  - publishes the plan's query assignment as route weights for the
//    "weighted" router. While a worker loads the plan's new variant, the
//    variant it replaces keeps its old share there, whatever app it
//    serves: the worker's capacity is not lost to both apps during the load.
// The paper's baselines (§6.1.1, §6.5) are modes of the same driver:
//  - "clipper-ht" / "clipper-ha": one MILP placement, made once, with each
//    app's least / most accurate variants only, for the demand mix first
//    seen scaled past what the cluster carries (so every device is used);
//  - "sommelier": the first placement as Proteus makes it, then each device
//    may only swap to another variant of the app it was given;
//  - "proteus-no-selection": re-solved like Proteus, most accurate variants
//    only (Fig. 7 "without model selection");
//  - "infaas-accuracy": INFaaS's greedy autoscaling with accuracy drop as
//    its cost and the cluster as its budget (policy/allocation_infaas.h,
//    with the model autoscaler's slack and scale-down headroom), run every
//    round, as INFaaS reacts on the query path rather than every period.
// Worker counts are never changed (ClusterRound does nothing).
//
// Thread-safety: rounds are called from one thread; the sink's `done`
// callbacks may come from any thread.
#pragma once

#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "control/allocator.h"
#include "control/busy_workers.h"
#include "policy/allocation_milp.h"

namespace maitre::control {

enum class ProteusMode {
  kProteus,
  kClipperHighThroughput,
  kClipperHighAccuracy,
  kSommelier,
  kNoSelection,
  kInfaasAccuracy
};

class ProteusAllocator : public Allocator {
 public:
  static absl::StatusOr<std::unique_ptr<ProteusAllocator>> Create(const AllocatorOptions& options,
                                                                  ProteusMode mode);

  absl::Status ModelRound(const Observation& observation, ActionSink& sink) override;
  absl::Status ClusterRound(const Observation& observation, ActionSink& sink) override;

  // What the plan in force says, for logs, metrics and tests.
  struct PlanSummary {
    Nanos solved_at = 0;
    std::map<std::string, double> demand_qps;  // by app, what it was solved for
    double served_fraction = 0;
    double effective_accuracy = 0;  // normalised, 1 = every app's best
    int moves = 0;
    double gap = 0;
    double solve_s = 0;
    std::map<std::string, std::string> device_variant;  // worker → "model:variant" or ""
  };
  const std::optional<PlanSummary>& plan() const { return summary_; }

 private:
  ProteusAllocator(const AllocatorOptions& options, ProteusMode mode)
      : options_(options), mode_(mode) {}

  // One variant the plan may choose, with what it is planned from.
  struct Candidate {
    VariantKey key;
    std::string app;
    double accuracy = 0;  // normalised in its app
  };
  struct Target {
    VariantKey key;
    int replicas = 0;
    double served_qps = 0;
  };

  void MeasureDemand(const Observation& observation);
  // Updates slowdown_ from the Overloaded instances (see above).
  void LearnSlowdown(const Observation& observation);
  // The factor now in force for a worker type (1 when nothing is known).
  double SlowdownOf(const std::string& type, Nanos now) const;
  std::map<std::string, double> MeanDemand() const;
  bool ShouldSolve(const Observation& observation, const std::vector<std::string>& devices,
                   const std::vector<std::string>& catalogue,
                   const std::map<std::string, double>& demand) const;
  // Records a plan that could not be made, once per distinct reason.
  void RecordFailure(const Observation& observation, const std::string& reason, ActionSink& sink);
  absl::Status Solve(const Observation& observation, const std::vector<std::string>& devices,
                     const std::map<std::string, double>& demand, ActionSink& sink);
  // Replicas of `key` one worker of `type` holds (cores, then memory).
  int ReplicasOn(const Observation& observation, const VariantKey& key,
                 const std::string& type) const;
  void Apply(const Observation& observation, ActionSink& sink);
  // Route weights from the plan and what the workers hold now; sent when
  // they change.
  void PublishWeights(const Observation& observation, ActionSink& sink);

  const AllocatorOptions options_;
  const ProteusMode mode_;

  struct DemandSample {
    Nanos at = 0;
    std::map<std::string, double> qps;
  };
  std::deque<DemandSample> demand_;
  std::optional<Nanos> last_round_;

  std::map<std::string, Target> targets_;  // by worker; absent: host nothing
  std::vector<std::string> planned_devices_;
  struct Slowdown {
    double factor = 1;
    Nanos until = 0;
  };
  std::map<std::string, Slowdown> slowdown_;        // by worker type
  std::map<std::string, double> planned_slowdown_;  // what the plan in force used
  // What the plan was made from: every "model:variant@type" with a profile.
  std::vector<std::string> planned_catalogue_;
  std::string last_failure_;
  std::optional<PlanSummary> summary_;
  std::map<std::string, std::string> pinned_app_;  // sommelier: worker → app
  // Per worker, the variant that last served its planned share and that
  // share: it keeps them while the plan's new variant there is loading.
  std::map<std::string, std::pair<VariantKey, double>> serving_;
  std::vector<std::tuple<std::string, std::string, double>> published_;
  BusyWorkers busy_;
};

}  // namespace maitre::control
