// Proteus's query assignment on the data path (ASPLOS'24 §4, the router's
// half of y_{d,q}; docs/policies.md, "Accuracy scaling (Proteus)"): each
// model-less query of an app goes to one of the app's instances in
// proportion to the weights the allocator's plan set (LiveState::
// SetRouteWeights), by smooth weighted round-robin: over any stretch of
// queries each instance's share stays within one query of its weight's,
// with no random draws to bunch them up.
//
// The rules, for a request naming an app (a model or a pinned variant goes
// to Select unchanged):
//  - Candidates: the app's instances with a weight > 0 on accepting
//    workers whose variant is feasible for the request (accuracy, cost,
//    and batch-1 latency within latency_ms: selection.h), serving or
//    loading but ready before the deadline. Unlike Select, a serving
//    instance is not judged by the estimated queue wait: the plan sized its
//    share, and its batching policy drops what cannot make the deadline
//    (Proteus routes the same way; judged by the estimate, then taken from
//    the last report's mean batch alone, it turned away queries the plan
//    carried: docs/accuracy-scaling.md).
//  - A weighted instance still loading lends its weight to the instance of
//    the same app it replaces on that worker (one without a weight, still
//    serving), so the worker's planned share keeps being served until the
//    load is done: load, then shift the traffic, then unload.
//  - Among them, each gains its weight, the one with the most credit is
//    chosen (ties: lower instance id) and pays the candidates' total.
//  - With no candidate (no plan yet, or its instances are still loading),
//    Select decides among what is loaded, but never loads: loading is the
//    allocator's, so a load Select would start becomes kUnavailable.
//    Except on a cold start with `load_on_cold_start` set (the mark
//    allocator's): when the app has no instance at all (ready, loading or
//    draining, on any worker), Select's decision stands, load included, as
//    under the "infaas" router, so that the first queries are served (late,
//    after the load) rather than refused while there is room; the
//    allocator takes over from its next round.
// `uniform` ignores the weights: every instance of the app counts 1 (the
// Fig. 7 ablation "without query assignment").
//
// Thread-safety: WeightedRoundRobin is not synchronised; callers that
// route from several threads hold a lock around Route.
#pragma once

#include <vector>

#include "absl/container/flat_hash_map.h"
#include "policy/selection.h"

namespace maitre::policy {

class WeightedRoundRobin {
 public:
  explicit WeightedRoundRobin(bool uniform = false) : uniform_(uniform) {}
  SelectionDecision Route(const SelectionIndex& index, const LiveState& live,
                          const SelectionRequest& request, const SelectionOptions& options);

 private:
  struct Candidate {
    InstanceId id;
    OptionId option;
    double weight, est;
  };

  const bool uniform_;
  // Credit per instance, per app. Stale ids (an instance gone, its id
  // reused) only carry a credit of less than one round over.
  absl::flat_hash_map<AppId, absl::flat_hash_map<InstanceId, double>> credit_;
  std::vector<Candidate> candidates_;  // reused by every Route, not to allocate per query
};

}  // namespace maitre::policy
