#include "policy/selection_weighted.h"

#include <vector>

#include "policy/selection_rules.h"

namespace maitre::policy {

using selection_internal::EstimateMs;
using selection_internal::Feasible;
using selection_internal::Limits;
using selection_internal::MakesDeadline;

SelectionDecision WeightedRoundRobin::Route(const SelectionIndex& index, const LiveState& live,
                                            const SelectionRequest& request,
                                            const SelectionOptions& options) {
  if (request.app == kNoId || request.model != kNoId || request.pinned != kNoId) {
    return Select(index, live, request, options);
  }
  const Limits limits = Limits::Of(request);
  std::vector<Candidate>& candidates = candidates_;
  candidates.clear();
  double total = 0;
  // The instance itself when it can take the query now: a serving one, or
  // a loading one ready before the deadline. A serving one is not judged by
  // the queue estimate: its batching policy (Proteus's drops what cannot
  // make it) knows better than an estimate from reports
  // (docs/accuracy-scaling.md).
  auto usable = [&](InstanceId id, OptionId& option) {
    const LiveInstance& in = live.instance(id);
    if (!live.has_worker(in.worker) || !live.worker(in.worker).accepting) return false;
    option = index.FindOption(in.variant, live.worker(in.worker).type);
    if (option == kNoId || !Feasible(index.option(option), limits)) return false;
    if (in.state != InstanceState::kInactive || in.ready_at <= request.now) return true;
    return !uniform_ &&
           MakesDeadline(ToMillis(in.ready_at - request.now), request.now, request.deadline);
  };
  for (InstanceId id : live.instances_of_app(request.app)) {
    const double weight = uniform_ ? 1.0 : live.route_weight(id);
    if (weight <= 0) continue;
    OptionId option = kNoId;
    InstanceId serving = kNoId;
    if (usable(id, option)) {
      serving = id;
    } else if (!uniform_ && live.has_worker(live.instance(id).worker)) {
      // Still loading: the plan's share of this worker goes to what the
      // load replaces there (make before break) until it is ready.
      for (InstanceId other : live.instances_on_worker(live.instance(id).worker)) {
        if (other != id && live.instance_app(other) == request.app &&
            live.route_weight(other) <= 0 &&
            live.instance(other).state != InstanceState::kInactive && usable(other, option)) {
          serving = other;
          break;
        }
      }
    }
    if (serving == kNoId) continue;
    candidates.push_back({serving, option, weight,
                          EstimateMs(index.option(option), live.instance(serving), request.now)});
    total += weight;
  }
  if (candidates.empty()) {
    SelectionDecision d = Select(index, live, request, options);
    // A cold start: the app has no instance anywhere, loaded or loading
    // (the allocator has placed nothing yet, or nothing is left). The query
    // loads what selection would, where there is room, rather than fail;
    // from then on loading is the allocator's again.
    if (options.load_on_cold_start && live.instances_of_app(request.app).empty()) return d;
    if (d.outcome == SelectionOutcome::kLoadAndServe) {
      d.outcome = SelectionOutcome::kUnavailable;
      d.unavailable = UnavailableReason::kDeadline;
      d.serving = kNoId;
    } else if (d.outcome == SelectionOutcome::kServeAndLoad) {
      d.outcome = SelectionOutcome::kUseInstance;
    }
    d.load = {};
    return d;
  }
  absl::flat_hash_map<InstanceId, double>& credit = credit_[request.app];
  const Candidate* chosen = nullptr;
  double best = 0;
  for (const Candidate& c : candidates) {
    double& mine = credit[c.id];
    mine += c.weight;
    if (chosen == nullptr || mine > best || (mine == best && c.id < chosen->id)) {
      chosen = &c;
      best = mine;
    }
  }
  credit[chosen->id] -= total;
  SelectionDecision d;
  d.outcome = SelectionOutcome::kUseInstance;
  d.instance = chosen->id;
  d.serving = chosen->option;
  d.estimated_ms = chosen->est;
  d.degraded = limits.has_latency && chosen->est > limits.latency_ms;
  return d;
}

}  // namespace maitre::policy
