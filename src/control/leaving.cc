#include "control/leaving.h"

#include <algorithm>

namespace maitre::control {
namespace {

// Whether an instance in the query's scope (ready or loading) is on an
// accepting worker of the live view as it stands.
bool ScopeHeld(const policy::SelectionIndex& index, const policy::LiveState& live,
               const policy::SelectionRequest& request) {
  const policy::AppId app =
      request.model != policy::kNoId ? index.model(request.model).app : request.app;
  absl::Span<const policy::InstanceId> scope = request.pinned != policy::kNoId
                                                   ? live.instances_of_variant(request.pinned)
                                                   : live.instances_of_app(app);
  for (policy::InstanceId id : scope) {
    const policy::LiveInstance& in = live.instance(id);
    if (live.has_worker(in.worker) && live.worker(in.worker).accepting &&
        (request.model == policy::kNoId || live.instance_model(id) == request.model)) {
      return true;
    }
  }
  return false;
}

}  // namespace

Nanos LeavingMargin(Nanos floor, std::optional<double> latency_ms) {
  return std::max(floor, latency_ms.has_value() && *latency_ms > 0 ? FromMillis(*latency_ms) : 0);
}

policy::SelectionDecision RouteBesideLeaving(const QueryRouter& router,
                                             const policy::SelectionIndex& index,
                                             policy::LiveState& live,
                                             const policy::SelectionRequest& request,
                                             absl::Span<const policy::WorkerId> serving,
                                             absl::FunctionRef<bool(policy::InstanceId)> ready) {
  if (serving.empty()) return router.Route(index, live, request);
  for (policy::WorkerId id : serving) live.SetAccepting(id, true);
  policy::SelectionDecision d = router.Route(index, live, request);
  for (policy::WorkerId id : serving) live.SetAccepting(id, false);
  auto leaving = [serving](policy::WorkerId id) {
    return std::find(serving.begin(), serving.end(), id) != serving.end();
  };
  const bool there = d.instance != policy::kNoId && leaving(live.instance(d.instance).worker);
  // No load goes there, nor does a query wait on one begun before the
  // notice: it would not serve long, if at all.
  if ((d.load.valid() && leaving(d.load.worker)) || (there && !ready(d.instance))) {
    return router.Route(index, live, request);
  }
  // With nothing in the scope on a worker that stays, the others' load is
  // the replacement, which must be under way before the leaving ones drain.
  if (!there || d.load.valid() || ScopeHeld(index, live, request)) return d;
  const policy::SelectionDecision without = router.Route(index, live, request);
  if (without.load.valid()) {
    d.load = without.load;
    d.load_rule = without.load_rule;
    d.outcome = policy::SelectionOutcome::kServeAndLoad;
  }
  return d;
}

void KeepLeavingWeights(const policy::LiveState& live,
                        absl::Span<const policy::WorkerId> leaving,
                        std::vector<policy::LiveState::RouteWeight>& weights) {
  const size_t named = weights.size();
  for (policy::WorkerId worker : leaving) {
    for (policy::InstanceId id : live.instances_on_worker(worker)) {
      const double weight = live.route_weight(id);
      if (weight <= 0) continue;
      const policy::VariantId variant = live.instance(id).variant;
      auto same = [&](const policy::LiveState::RouteWeight& r) {
        return r.worker == worker && r.variant == variant;
      };
      if (std::none_of(weights.begin(), weights.begin() + named, same)) {
        weights.push_back({worker, variant, weight});
      }
    }
  }
}

}  // namespace maitre::control
