// Workers under an interruption notice ("leaving"): the rules by which
// they serve until shortly before they stop, shared by the controller's
// Cluster and the simulator's SelectionRouter so that a spot notice means
// the same in both worlds (docs/operations.md, "Spot interruptions";
// docs/architecture.md, "The simulator's spot interruptions").
//
// A leaving worker stays in the live view, not accepting (so no router
// picks it unasked) and with no room for a load (its owner reports free
// memory below 0). For each query the owner opens the leaving workers that
// still serve it (ServesWhileLeaving with that query's LeavingMargin) and
// routes through RouteBesideLeaving, which closes them again.
//
// Thread-safety: plain functions; the live view is the caller's to guard.
#pragma once

#include <optional>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/types/span.h"
#include "control/query_router.h"
#include "core/time.h"
#include "policy/selection.h"
#include "policy/selection_index.h"
#include "policy/selection_live.h"

namespace maitre::control {

// The least time before its stop at which a leaving worker still takes a
// query: a query sent there must be answered before the process goes.
inline constexpr Nanos kLeavingMarginFloor = 1 * kSecond;

// The margin for a query with latency objective `latency_ms` (if any):
// max(floor, the objective).
Nanos LeavingMargin(Nanos floor, std::optional<double> latency_ms);

// Whether a worker that stops at `stops_at` still takes a query at `now`
// whose margin is `margin`.
inline bool ServesWhileLeaving(Nanos stops_at, Nanos now, Nanos margin) {
  return now + margin <= stops_at;
}

// The router's decision for `request` with the leaving workers in `serving`
// (those that still serve this query, not accepting in `live`) accepting
// like any other for it; `live` is left as it was. On top of the router:
//  - no load goes to a leaving worker, and a query the router would have
//    wait on a load there (one begun before the notice; `ready` says which
//    instances are ready) is routed as if the leaving workers were gone;
//  - while nothing in the query's scope is on a worker that stays, the
//    load the router would start without the leaving workers (their
//    replacement) is asked for with this query, so that it serves before
//    they drain; once it is under way the scope is held and no other query
//    asks again.
policy::SelectionDecision RouteBesideLeaving(const QueryRouter& router,
                                             const policy::SelectionIndex& index,
                                             policy::LiveState& live,
                                             const policy::SelectionRequest& request,
                                             absl::Span<const policy::WorkerId> serving,
                                             absl::FunctionRef<bool(policy::InstanceId)> ready);

// The allocator is not shown leaving workers, so the route weights it sets
// say nothing of them: appends to `weights` the weight each instance on a
// worker in `leaving` has in `live` (when above 0 and not named in
// `weights`), so that it keeps its share of the queries until it drains.
void KeepLeavingWeights(const policy::LiveState& live,
                        absl::Span<const policy::WorkerId> leaving,
                        std::vector<policy::LiveState::RouteWeight>& weights);

}  // namespace maitre::control
