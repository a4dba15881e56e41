// Consolidation across workers: the scale-down the per-worker model
// autoscaler cannot make. That policy sees one worker and keeps at least
// `min_replicas_per_model` replicas of every model the worker serves, so a
// model that spilled onto a second worker under a peak (kNeedsPlacement)
// would keep an instance on both for good, each half idle, and the load
// split between them. This policy, run in the same round over every
// worker's snapshot, lets a worker give a model up entirely once the
// model's other workers alone would have carried its whole load with the
// scale-down headroom over the wait (the load time of what goes, at least
// `min_scale_down_wait` and `min_consolidation_wait`) — the per-worker rule,
// applied to the model cluster-wide — and the load has fallen clearly below
// the load the model spread at (hysteresis, below).
//
// A worker's capacity for the model is its replicas' saturation throughput,
// scaled down when its replicas (of every model, and reservations) take
// more cores than it has: selection loads instances without counting cores.
//
// A worker may give the model up with all its replicas at once, however
// many: the per-worker policy could trim them one at a time, but it sees one
// worker's hardware only and can never move the load to another's (on a
// machine with CPU, Inferentia and GPU devices as three workers, a rule that
// let only a worker down to its last replica go kept four Inferentia engines
// and two CPU ones beside the GPU engine that alone carried 700 qps).
//
// Hysteresis. Selection and the autoscalers spread a model to another
// worker when the workers holding it could not keep up; under the same load
// that worker should keep it, or the give-up is undone within seconds
// (under a steady load the controller gave the zoo CNN up and reloaded it
// 34 times in 17 minutes, with bursts of 504s after each). So the policy
// remembers, per model, the load at which each worker was added while the
// model was already served elsewhere: the peak of its load over the wait
// then. The worker count goes back down only once the peak over the wait is
// at most that load / `scale_down_headroom` (a load that really fell), and
// the last worker added is the first such mark to go. A mark is forgotten
// after `ConsolidationOptions::spread_memory`, and a model held on several
// workers before the policy first saw it has none.
//
// At most one worker gives a model up per round; never while any replica of
// the model is loading (a transition is under way); never the model's last
// worker; and never a worker whose departure would lower the best accuracy
// the model is served at. Among the workers that qualify, the one whose
// replicas cost the most goes (ties: the one with less capacity, then by
// name), so the cluster keeps the cheapest setup that suffices; when that
// one is in the caller's `keep` (too young, say), nothing goes this round.
//
// Pure, like every policy: the caller passes the snapshots, the state the
// last call returned, and `now`. The rules are in docs/policies.md, "Model
// autoscaler", "Consolidation across workers".
//
// Thread-safety: a free function over value types.
#pragma once

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/time.h"
#include "policy/autoscaling_model.h"

namespace maitre::policy {

// One worker's snapshot, as the model autoscaler gets it, and its name.
struct WorkerScalingSnapshot {
  std::string worker;
  ModelScalingSnapshot snapshot;
  // Models this worker may not give up now (the caller's reasons: an
  // instance too young, say). Its capacity still counts for the others, and
  // while it is the one that should go, no other goes.
  std::set<std::string> keep;
};

// What the policy remembers: each model's load over the whole cluster, and
// how it spread over the workers.
struct ConsolidationState {
  std::map<std::string, std::vector<ModelAutoscalerState::LoadSample>> history;  // by model
  struct Spread {
    std::set<std::string> workers;  // holding replicas of the model at the last call
    bool served = false;            // one of them had a ready replica
    // One mark per worker added while the model was served elsewhere: the
    // load it was added at (the peak over the wait then), and when. The
    // last is the latest; one is dropped for every worker that goes.
    std::vector<ModelAutoscalerState::LoadSample> marks;
  };
  std::map<std::string, Spread> spread;  // by model
};

// The hysteresis's own settings (the rest come from ModelAutoscalerOptions).
struct ConsolidationOptions {
  // How long a spread mark holds a model on its workers at a steady load;
  // 0 turns the hysteresis off.
  Nanos spread_memory = 30 * 60 * kSecond;
};

// Unload every replica of `model` on `worker`: these (variant, ready replicas).
struct VacateAction {
  std::string model;
  std::string worker;
  std::vector<std::pair<std::string, int>> replicas;
  double saves_per_s = 0;  // Σ C of the replicas, $/s
  std::string reason;      // one sentence for logs
};

struct ConsolidationDecision {
  std::vector<VacateAction> actions;  // at most one per model, ordered by model
  ConsolidationState state;           // pass back on the next call
};

// Uses `options`' scale_down_headroom, min_scale_down_wait,
// min_consolidation_wait, min_replicas_per_model and history_limit. InvalidArgument for a malformed snapshot (as
// ValidateScalingSnapshot) or a worker named twice.
absl::StatusOr<ConsolidationDecision> DecideConsolidation(
    const std::vector<WorkerScalingSnapshot>& workers, const ConsolidationState& previous,
    Nanos now, const ModelAutoscalerOptions& options,
    const ConsolidationOptions& consolidation = {});

}  // namespace maitre::policy
