// SelectBruteForce (declared in selection.h): the selection rules applied by
// exhaustive scans, with none of the index's lists or orderings. It is the
// oracle of selection_property_test.cc and the baseline of selection_bench.
// It shares only the per-item arithmetic (selection_rules.h) with Select().
#include "policy/selection.h"

#include <algorithm>
#include <limits>

#include "policy/selection_rules.h"

namespace maitre::policy {
namespace {

using selection_internal::Limits;

bool InScope(const SelectionIndex& index, const SelectionRequest& r, VariantId v) {
  if (v < 0 || v >= static_cast<VariantId>(index.variants().size())) return false;
  const SelectionIndex::Variant& var = index.variant(v);
  if (!var.present) return false;
  if (r.pinned != kNoId) return v == r.pinned;
  if (r.model != kNoId) return var.model == r.model;
  return r.app != kNoId && var.app == r.app;
}

}  // namespace

SelectionDecision SelectBruteForce(const SelectionIndex& index, const LiveState& live,
                                   const SelectionRequest& request, const SelectionOptions& options,
                                   BruteForceScan scan) {
  const Limits limits = Limits::Of(request);
  const Nanos now = request.now;

  // Every option in scope, and the instance slots to look at.
  std::vector<OptionId> scope;
  std::vector<InstanceId> instances;
  if (scan == BruteForceScan::kEverything) {
    for (OptionId id = 0; id < static_cast<OptionId>(index.options().size()); ++id) {
      if (InScope(index, request, index.option(id).variant)) scope.push_back(id);
    }
    for (InstanceId id = 0; id < live.instance_slots(); ++id) {
      if (live.has_instance(id)) instances.push_back(id);
    }
  } else {
    // The app's (or model's) lists used as plain sets: every candidate is
    // still examined, with no ordering to stop early.
    AppId app = request.app;
    if (request.pinned != kNoId && InScope(index, request, request.pinned)) {
      app = index.variant(request.pinned).app;
    } else if (request.model != kNoId && request.model >= 0 &&
               request.model < static_cast<ModelId>(index.models().size())) {
      app = index.model(request.model).app;
    }
    if (app >= 0 && app < static_cast<AppId>(index.apps().size())) {
      for (OptionId id : index.app(app).cold_order) {
        if (InScope(index, request, index.option(id).variant)) scope.push_back(id);
      }
      for (InstanceId id : live.instances_of_app(app)) instances.push_back(id);
    }
  }

  // Step 1: healthy instances, and Interfered ones at their measured speed.
  InstanceId healthy = kNoId;
  selection_internal::HealthyKey healthy_key{};
  bool have_interfered = false;
  selection_internal::FastestKey interfered_key{};
  // Step 2: loading instances.
  InstanceId loading = kNoId;
  selection_internal::FastestKey loading_key{};
  // Step 5: any instance that makes the deadline.
  InstanceId degraded = kNoId;
  selection_internal::FastestKey degraded_key{};
  // Step 6: a loaded instance of a feasible option passed over (kBusy).
  bool have_loaded = false;
  // Whether a saturated instance puts the scope under load (step 4's order),
  // and what step 4 under load needs: the load the scope lacks and its loads
  // under way.
  bool under_load = false;
  // Step 4's quickest rule: the soonest a load under way answers.
  double soonest_under_way_ms = std::numeric_limits<double>::infinity();
  selection_internal::ScopeDemand demand;
  std::vector<std::pair<OptionId, VariantId>> loading_options, present_options;
  for (InstanceId id : instances) {
    const LiveInstance& in = live.instance(id);
    if (!InScope(index, request, in.variant)) continue;
    const LiveWorker& worker = live.worker(in.worker);
    if (!worker.accepting) continue;
    const OptionId oid = index.FindOption(in.variant, worker.type);
    if (oid == kNoId) continue;
    const VariantOption& o = index.option(oid);
    if (!selection_internal::StaticFit(o, limits)) continue;
    have_loaded |= in.state != InstanceState::kInactive && selection_internal::Feasible(o, limits);
    const double est = selection_internal::EstimateMs(o, in, now);
    const bool in_time = selection_internal::MakesDeadline(est, now, request.deadline);
    const bool fits = selection_internal::WithinLatency(est, limits);
    under_load |= selection_internal::Saturated(in.state, in_time, fits);
    if (selection_internal::Feasible(o, limits)) {
      demand.Add(o, in, limits);
      if (in.state == InstanceState::kInactive) {
        loading_options.push_back({oid, in.variant});
        soonest_under_way_ms = std::min(soonest_under_way_ms, est);
      }
      present_options.push_back({oid, in.variant});
    }
    // Loading instances count as loads under way whatever the options say;
    // only serving on them needs use_loading_instances.
    if (in.state == InstanceState::kInactive && !options.use_loading_instances) continue;
    if (!in_time) continue;
    selection_internal::OfferInterfered(in, id, est, o.price_per_hour, limits, now,
                                        request.deadline, have_interfered, interfered_key);
    if (fits && in.state == InstanceState::kActive) {
      selection_internal::HealthyKey key{live.RecentLoad(index, in.worker, now),
                                         worker.utilisation, o.price_per_hour, est, id};
      if (healthy == kNoId || key < healthy_key) {
        healthy = id;
        healthy_key = key;
      }
    }
    if (fits && in.state == InstanceState::kInactive) {
      selection_internal::FastestKey key{est, o.price_per_hour, id};
      if (loading == kNoId || key < loading_key) {
        loading = id;
        loading_key = key;
      }
    }
    if (options.allow_degraded) {
      selection_internal::FastestKey key{est, o.price_per_hour, id};
      if (degraded == kNoId || key < degraded_key) {
        degraded = id;
        degraded_key = key;
      }
    }
  }

  SelectionDecision d;
  auto serving_of = [&](InstanceId id) {
    return index.FindOption(live.instance(id).variant, live.worker(live.instance(id).worker).type);
  };
  if (have_interfered &&
      selection_internal::InterferedFirst(
          healthy != kNoId,
          healthy != kNoId ? selection_internal::AtMeasuredSpeed(healthy_key.est,
                                                                 live.instance(healthy))
                           : 0,
          interfered_key.est)) {
    d.outcome = SelectionOutcome::kUseInstance;
    d.instance = interfered_key.id;
    d.serving = serving_of(interfered_key.id);
    d.estimated_ms = interfered_key.est;
    return d;
  }
  if (healthy != kNoId || loading != kNoId) {
    d.outcome = SelectionOutcome::kUseInstance;
    d.instance = healthy != kNoId ? healthy : loading;
    d.serving = serving_of(d.instance);
    d.estimated_ms = healthy != kNoId ? healthy_key.est : loading_key.est;
    return d;
  }

  // Step 3: unsatisfiable when no option in scope is feasible.
  bool any_feasible = false;
  for (OptionId id : scope) any_feasible |= selection_internal::Feasible(index.option(id), limits);
  if (!any_feasible) {
    d.outcome = SelectionOutcome::kUnsatisfiable;
    selection_internal::Shortfall best;
    for (OptionId id : scope) {
      const VariantOption& o = index.option(id);
      selection_internal::Shortfall s = selection_internal::ShortfallOf(o, limits);
      if (d.closest == kNoId ||
          selection_internal::CloserThan(s, o, best, index.option(d.closest))) {
        d.closest = id;
        best = s;
      }
    }
    d.unmet = best.unmet;
    d.shortfall = best.total;
    return d;
  }

  // Under load: the load the scope lacks, and its loads under way keyed for it.
  const double missing = demand.missing_qps();
  selection_internal::LoadsUnderWay loads_under_way, present;
  for (const auto& [oid, variant] : loading_options) {
    selection_internal::AddLoadUnderWay(
        variant, selection_internal::CapacityKeyOf(index.option(oid), limits, now, now, missing),
        loads_under_way);
  }
  for (const auto& [oid, variant] : present_options) {
    selection_internal::AddPresent(
        variant, selection_internal::CapacityKeyOf(index.option(oid), limits, now, now, missing),
        present);
  }

  // Step 4: every feasible option with every worker that could take it,
  // unless a load of it is already under way (under load: unless one at
  // least as good is).
  bool under_way = false;
  for (OptionId id : scope) {
    const VariantOption& o = index.option(id);
    if (!selection_internal::Feasible(o, limits)) continue;
    if (under_load &&
        (selection_internal::CoveredByLoadsUnderWay(missing, loads_under_way) ||
         selection_internal::OutdoneByLoadUnderWay(
             o.variant,
             selection_internal::CapacityKeyOf(o, limits, now, request.deadline, missing),
             loads_under_way) ||
         selection_internal::LesserThanPresentVariant(
             missing, o.variant,
             selection_internal::CapacityKeyOf(o, limits, now, request.deadline, missing),
             present))) {
      under_way = true;  // the better load under way is the scope's capacity
      continue;
    }
    if (!under_load &&
        selection_internal::LaterThanLoadUnderWay(o.cold_ms, soonest_under_way_ms)) {
      under_way = true;
      continue;
    }
    bool loading = false;
    for (InstanceId i = 0; i < live.instance_slots(); ++i) {
      if (!live.has_instance(i)) continue;
      const LiveInstance& in = live.instance(i);
      loading |= in.variant == o.variant && in.state == InstanceState::kInactive &&
                 live.worker(in.worker).type == o.type && live.worker(in.worker).accepting;
    }
    if (loading) {
      under_way = true;
      continue;
    }
    WorkerId where = kNoId;
    for (WorkerId w = 0; w < live.worker_slots(); ++w) {
      if (!live.has_worker(w) || !selection_internal::CanPlace(index, live, request, w, o)) {
        continue;
      }
      if (where == kNoId ||
          selection_internal::PlacementBefore(live.worker(w), w, live.worker(where), where)) {
        where = w;
      }
    }
    if (where == kNoId) continue;
    if (!under_load) {
      if (!d.load.valid() || selection_internal::ColdBefore(o, index.option(d.load.option))) {
        d.load = {id, where};
        d.load_rule = LoadRule::kQuickest;
      }
      continue;
    }
    const selection_internal::CapacityKey key =
        selection_internal::CapacityKeyOf(o, limits, now, request.deadline, missing);
    if (!d.load.valid() ||
        selection_internal::CapacityBefore(
            key, o,
            selection_internal::CapacityKeyOf(index.option(d.load.option), limits, now,
                                              request.deadline, missing),
            index.option(d.load.option))) {
      d.load = {id, where};
      d.load_rule = LoadRule::kCapacity;
    }
  }
  if (d.load.valid() && selection_internal::MakesDeadline(index.option(d.load.option).cold_ms, now,
                                                          request.deadline)) {
    d.outcome = SelectionOutcome::kLoadAndServe;
    d.serving = d.load.option;
    d.estimated_ms = index.option(d.load.option).cold_ms;
    return d;
  }
  if (degraded != kNoId) {  // step 5
    d.outcome = d.load.valid() ? SelectionOutcome::kServeAndLoad : SelectionOutcome::kUseInstance;
    d.instance = degraded;
    d.serving = serving_of(degraded);
    d.estimated_ms = degraded_key.est;
    d.degraded = true;
    return d;
  }
  d.outcome = SelectionOutcome::kUnavailable;
  d.unavailable = d.load.valid() || under_way ? UnavailableReason::kDeadline
                  : have_loaded               ? UnavailableReason::kBusy
                                              : UnavailableReason::kNoRoom;
  return d;
}

}  // namespace maitre::policy
