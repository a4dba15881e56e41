// The model autoscaler (INFaaS §4.2; docs/policies.md, "Model autoscaler"): the
// pure policy run every second for each worker (by the controller, and by the
// simulator) to decide, per model, whether to add replicas of a running variant
// (horizontal), switch to a faster variant (upgrade), switch to a cheaper one
// (downgrade), remove a replica, or ask the controller to place capacity
// elsewhere because this worker is full.
//
// Scale-up (a model's headroom below `slack`): among the moves that bring
// the headroom back to `slack` and fit in the worker (memory during the
// transition, cores once it is done), the cheapest by the cost below:
// replicate a running variant; add replicas of another variant alongside;
// top up k-1..k-64 replicas of one variant with a second; switch j of a
// variant's ready replicas to k of another (upgrade); or consolidate every
// other running variant into k of one. Moves of equal running cost whose
// loads are all quick (`capacity_tie_load_s`) go by the capacity they leave,
// not by their load times. Nothing fits: kNeedsPlacement. Scale-down: the
// move that saves the most among removing one replica, switching j replicas
// and consolidating into a cheaper setup, once that smaller setup would have
// kept `scale_down_headroom` over the whole wait (the load times involved,
// at least `min_scale_down_wait`). Capacity switch (neither of those, under
// high load): replace the replicas of variants that carry the load at
// `capacity_switch_gain` times the cost per unit of throughput of the best
// variant, for no more running cost, once the load has kept the model's
// replicas `capacity_switch_utilisation` busy over the wait (by their
// profiles, or as measured).
//
// Everything the policy knows comes in as arguments: the worker's snapshot,
// `now`, and the ModelAutoscalerState it returned last time (its load
// history). It reads no clock, keeps no globals and does no I/O, so the worker
// and the simulator run the same decisions. The rules, exactly as implemented,
// are in docs/policies.md, "Model autoscaler".
//
// Cost model (our reading of INFaaS §4.2). A move changes the number of
// replicas of some variants by δ_v (positive: load, negative: unload). Its
// cost is Σ_v C_v·(δ_v + λ·T_load,v·max(δ_v, 0)), where
//   C_v       is the hardware cost rate of one replica of v on this worker, in
//             $/s (by default its dominant share of the worker's price, see
//             ReplicaCostPerSecond);
//   δ_v       is the change in v's replica count the move makes;
//   T_load,v  is v's load time in seconds: capacity that is paid for but
//             serves nothing while it loads;
//   λ         (1/s) weighs that loading time against the running cost.
// Removing replicas has negative cost (it saves C_v per second); only loads
// pay the loading penalty.
//
// Thread-safety: ModelAutoscaler is immutable after Create; Decide() is const
// and may be called from several threads. The value types are not
// synchronised.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/profile.h"
#include "core/time.h"
#include "core/worker_type.h"

namespace maitre::policy {

// One variant of a model as it runs (or could run) on this worker: what one
// replica delivers and takes here, and how many replicas are there now.
struct ScalingVariant {
  std::string variant;  // the variant's name within its model (VariantKey::variant)
  double accuracy = 0;
  // One replica's throughput at the model's SLO on this worker type
  // (Profile::SaturationQps(slo)); 0 when it cannot meet the SLO here.
  double saturation_qps = 0;
  double load_s = 0;  // T_load
  double cores = 1;   // a replica runs one batch thread: one core by default
  double memory_mb = 0;
  double cost_per_s = 0;  // C
  int replicas = 0;       // ready on this worker
  int loading = 0;        // being loaded; they count as capacity and use resources
};

// C for one replica that takes `cores` and `memory_mb` of a worker of `type`:
// the worker's price times the replica's dominant share of its resources, so
// that the replicas filling a worker add up to its price.
double ReplicaCostPerSecond(const WorkerType& type, double cores, double memory_mb);

// A ScalingVariant from a variant's profile on `type` at a latency objective
// of `slo_ms` (no replicas yet).
ScalingVariant MakeScalingVariant(std::string variant, double accuracy, const Profile& profile,
                                  double slo_ms, const WorkerType& type,
                                  double cores_per_replica = 1);

// One model served (or to be served) by this worker.
struct ScalingModel {
  std::string model;
  // Offered load at this worker: queries per second that arrived for the
  // model, including those dropped or served late. (The served rate
  // saturates at the capacity and would hide how much more is needed.)
  double load_qps = 0;
  // Every variant that could serve the model here, running ones included.
  std::vector<ScalingVariant> variants;
  // When set, a variant that is not running may be loaded only if its
  // accuracy reaches this. When unset the floor is the least accuracy among
  // the running variants, less ModelAutoscalerOptions::max_accuracy_drop.
  std::optional<double> min_accuracy;
  // How busy serving the model kept its replicas' cores, as measured (the
  // worker's CPU, in proportion to what the model's instances served there),
  // 0..1; 0 when not measured. The capacity switch reads it beside
  // load / capacity: a profile is the model's compute alone, and where the
  // data path costs more per query than the model, load / capacity reads a
  // busy worker as idle.
  double busy = 0;
};

// What the worker looks like this second.
struct ModelScalingSnapshot {
  double cores = 0;      // the worker's capacity
  double memory_mb = 0;  // 0 means memory is not limited
  // Resources held by things the autoscaler does not manage (offline jobs,
  // the worker itself).
  double reserved_cores = 0;
  double reserved_memory_mb = 0;
  std::vector<ScalingModel> models;
};

struct ModelAutoscalerOptions {
  // Scale up a model when its headroom (Σ saturation qps of its ready and
  // loading replicas / offered load) is below this, back to at least this.
  double slack = 1.05;
  // A smaller setup "would have sufficed" when its capacity is at least this
  // times the load. At least `slack`, so a scale-down never re-triggers a
  // scale-up under the same load.
  double scale_down_headroom = 1.15;
  // λ in the cost, per second of load time.
  double lambda_per_s = 0.1;
  // A smaller setup must have sufficed for the load time of the variant it
  // unloads (the larger of the two load times for a switch), and for at
  // least this long, so that one quiet second cannot remove a replica.
  Nanos min_scale_down_wait = 3 * kSecond;
  // Never scale a model on this worker below this many replicas.
  int min_replicas_per_model = 1;
  // Giving a model up on a worker entirely (autoscaling_consolidation.h)
  // waits at least this long: getting it back can take a worker's launch
  // as well as a load, since the emptied worker may be retired.
  Nanos min_consolidation_wait = 30 * kSecond;
  // See ScalingModel::min_accuracy.
  double max_accuracy_drop = 0;
  // Vertical moves. `allow_upgrade` lets a scale-up add another variant or
  // switch replicas to one; `allow_downgrade` lets a scale-down switch
  // replicas to a variant that makes the setup cheaper. With both off the
  // policy is the horizontal-only baseline (replicate and remove only).
  bool allow_upgrade = true;
  bool allow_downgrade = true;
  // Load samples older than this are forgotten whatever the load times; it
  // also caps the scale-down wait.
  Nanos history_limit = 600 * kSecond;
  // Capacity under load (docs/policies.md, "Model autoscaler", "Capacity
  // under load"). Load times up to this are no reason to prefer a variant:
  // among moves with the same running cost Σ C_v·δ_v whose loads all take
  // at most this long, the one that leaves more capacity is taken (the
  // loading penalty λ·T·C of a 10 ms load is a thousandth of a second's
  // running cost). 0: load times always decide ties, as INFaaS's cost does.
  double capacity_tie_load_s = 1;
  // The capacity switch: once a model's offered load has kept its replicas
  // here at least this busy over the wait (the least load over the wait /
  // their capacity, or the least measured ScalingModel::busy, whichever is
  // higher), replicas of variants whose cost per unit of throughput
  // (C_v / saturation_qps) is at least `capacity_switch_gain` times the best
  // accurate-enough variant's are replaced by that variant, when that costs
  // no more to run. Needs `allow_upgrade`; infinity turns it off.
  double capacity_switch_utilisation = 0.25;
  // > 1: the gain that makes a switch worth its load, and the hysteresis
  // that keeps two variants of similar efficiency from trading places.
  double capacity_switch_gain = 1.5;
};

struct ModelScaleAction {
  enum class Kind {
    kReplicate,       // load `add` replicas of `to_variant` (a running variant, or
                      // the first variant when none runs)
    kAddVariant,      // load `add` replicas of `to_variant`, a variant not running
                      // here yet, alongside the running ones
    kUpgrade,         // load `add` replicas of the faster `to_variant`, then
                      // unload `remove` replicas of `from_variant`
    kDowngrade,       // the same towards a `to_variant` with less throughput per
                      // replica (the move makes the setup cheaper)
    kRemoveReplica,   // unload `remove` (1) replica of `from_variant`
    kNeedsPlacement,  // this worker lacks the resources: the controller should
                      // find `deficit_qps` of capacity for the model elsewhere;
                      // `add` replicas of `to_variant` would do on this worker type
  };
  Kind kind = Kind::kReplicate;
  std::string model;
  std::string from_variant;
  int remove = 0;
  // A kUpgrade/kDowngrade that consolidates several variants into
  // `to_variant`: these replicas are unloaded too, with `from_variant`'s,
  // once the new ones are ready.
  std::vector<std::pair<std::string, int>> also_remove;
  std::string to_variant;
  int add = 0;
  // What one replica of `to_variant` needs, for placement.
  double cores_per_replica = 0;
  double memory_mb_per_replica = 0;
  double deficit_qps = 0;  // kNeedsPlacement: capacity still missing
  double cost_per_s = 0;   // the move's C·(δ + λ·T_load·max(δ,0)), $/s
  std::string reason;      // one sentence for logs and the repository index
  // Which rule chose the move, for the variant-choice metric's label.
  enum class Cause {
    kHeadroom,  // scale-up: the cheapest move that restores the headroom
    kCapacity,  // capacity under load: the capacity tie decided a scale-up
                // or placement (a costlier load time bought more capacity),
                // or a capacity switch
    kSavings,   // scale-down: a smaller or cheaper setup suffices
  };
  Cause cause = Cause::kHeadroom;
};
absl::string_view ModelScaleActionKindName(ModelScaleAction::Kind kind);
absl::string_view ModelScaleCauseName(ModelScaleAction::Cause cause);  // "headroom", ...

// What the policy remembers between calls: each model's recent offered load.
struct ModelAutoscalerState {
  struct LoadSample {
    Nanos at = 0;
    double load_qps = 0;
    double busy = 0;  // ScalingModel::busy
  };
  std::map<std::string, std::vector<LoadSample>> history;  // by model, oldest first
};

struct ModelAutoscalerDecision {
  // At most one move per model: one action, or two kReplicate/kAddVariant
  // actions when a scale-up tops up with a second variant.
  std::vector<ModelScaleAction> actions;
  ModelAutoscalerState state;             // pass back on the next call
  // Σ saturation qps / Σ offered load over the worker (infinite when idle);
  // for metrics. Decisions use each model's own headroom (docs/policies.md,
  // "Model autoscaler", "Headroom").
  double headroom = 0;
};

class ModelAutoscaler {
 public:
  // InvalidArgument for inconsistent options (slack < 1, scale_down_headroom
  // < slack, negative λ, ...).
  static absl::StatusOr<std::unique_ptr<ModelAutoscaler>> Create(ModelAutoscalerOptions options);

  const ModelAutoscalerOptions& options() const { return options_; }

  // One round. `previous` is the state the last call returned (empty the
  // first time). InvalidArgument for a malformed snapshot (negative figures,
  // duplicate variants or models).
  absl::StatusOr<ModelAutoscalerDecision> Decide(const ModelScalingSnapshot& snapshot,
                                                 const ModelAutoscalerState& previous,
                                                 Nanos now) const;

  // Only the scale-up half, with no history: the moves for every model whose
  // headroom is below the slack. The benchmark compares this with the ILP.
  absl::StatusOr<std::vector<ModelScaleAction>> PlanScaleUp(
      const ModelScalingSnapshot& snapshot) const;

 private:
  explicit ModelAutoscaler(ModelAutoscalerOptions options) : options_(std::move(options)) {}
  ModelAutoscalerOptions options_;
};

// The snapshot after `actions`. With `completed` false, loads have started
// (their replicas count as `loading`) and nothing was unloaded yet: the
// transition's peak. With `completed` true, loads are ready and unloads done.
// kNeedsPlacement changes nothing here. Helps the simulator and the tests.
ModelScalingSnapshot ApplyModelScaleActions(const ModelScalingSnapshot& snapshot,
                                            const std::vector<ModelScaleAction>& actions,
                                            bool completed);

// Rules shared by the heuristic and the reference ILP.
// The least accuracy a variant that is not running must have to be loaded on
// this worker (see ScalingModel::min_accuracy).
double AccuracyFloor(const ScalingModel& model, double max_accuracy_drop);
// Whether replicas of `variant` may be added: it serves something at the SLO,
// and it is either running already or at least `accuracy_floor` accurate.
bool MayAddReplicas(const ScalingVariant& variant, double accuracy_floor);
// InvalidArgument for negative figures or duplicate models or variants.
absl::Status ValidateScalingSnapshot(const ModelScalingSnapshot& snapshot);

// The largest load in `history` over the last `window`, or nullopt when the
// history does not reach back that far yet.
std::optional<double> PeakLoadOver(const std::vector<ModelAutoscalerState::LoadSample>& history,
                                   Nanos now, Nanos window);
// `history` with `sample` appended, less the samples no wait of up to
// `horizon` will look at again. A sample at the time of the last replaces it;
// one older than the last clears the history (the clock went back).
std::vector<ModelAutoscalerState::LoadSample> AppendLoadSample(
    std::vector<ModelAutoscalerState::LoadSample> history,
    const ModelAutoscalerState::LoadSample& sample, Nanos horizon);

// Σ saturation qps of ready and loading replicas of `model`.
double ModelCapacityQps(const ScalingModel& model);
// Cores and memory the snapshot's replicas (ready and loading) and
// reservations take.
double UsedCores(const ModelScalingSnapshot& snapshot);
double UsedMemoryMb(const ModelScalingSnapshot& snapshot);

}  // namespace maitre::policy
