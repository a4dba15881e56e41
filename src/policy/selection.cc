#include "policy/selection.h"

#include <algorithm>
#include <limits>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "policy/selection_rules.h"

namespace maitre::policy {

using selection_internal::FastestKey;
using selection_internal::HealthyKey;
using selection_internal::Limits;
using selection_internal::Shortfall;

absl::string_view SelectionOutcomeName(SelectionOutcome outcome) {
  switch (outcome) {
    case SelectionOutcome::kUseInstance:
      return "use-instance";
    case SelectionOutcome::kLoadAndServe:
      return "load-and-serve";
    case SelectionOutcome::kServeAndLoad:
      return "serve-and-load";
    case SelectionOutcome::kUnsatisfiable:
      return "unsatisfiable";
    case SelectionOutcome::kUnavailable:
      return "unavailable";
  }
  return "unknown";
}

bool SelectionDecision::operator==(const SelectionDecision& o) const {
  return outcome == o.outcome && instance == o.instance && load == o.load && serving == o.serving &&
         estimated_ms == o.estimated_ms && degraded == o.degraded && closest == o.closest &&
         unmet == o.unmet && shortfall == o.shortfall && unavailable == o.unavailable &&
         load_rule == o.load_rule;
}

absl::string_view LoadRuleName(LoadRule rule) {
  switch (rule) {
    case LoadRule::kNone:
      return "none";
    case LoadRule::kQuickest:
      return "quickest";
    case LoadRule::kCapacity:
      return "capacity";
  }
  return "unknown";
}

namespace {

// The options and instances a request may use. `model` filters an app's
// instance list down to one model's (the live state keeps lists per app and
// per variant, not per model: a model's instances are few among its app's).
struct Scope {
  bool valid = false;
  absl::Span<const ColdEntry> cold;  // in cold order
  // The same options by least_price_per_qps (then cold order) when
  // `capacity_sorted`; else in cold order (a pinned variant's few).
  absl::Span<const ColdEntry> capacity;
  absl::Span<const ColdEntry> capacity_per_qps;  // by least_price_per_qps
  bool capacity_sorted = false;
  absl::Span<const InstanceId> instances;
  ModelId model = kNoId;
};

Scope ScopeOf(const SelectionIndex& index, const LiveState& live, const SelectionRequest& r,
              absl::InlinedVector<ColdEntry, 4>& pinned_buffer) {
  Scope s;
  if (r.pinned != kNoId) {
    if (r.pinned < 0 || r.pinned >= static_cast<VariantId>(index.variants().size())) return s;
    const SelectionIndex::Variant& v = index.variant(r.pinned);
    if (!v.present) return s;
    for (int32_t k = 0; k < v.option_count; ++k) {
      pinned_buffer.push_back(index.EntryOf(v.first_option + k));
    }
    std::sort(pinned_buffer.begin(), pinned_buffer.end(),
              [](const ColdEntry& a, const ColdEntry& b) {
                return selection_internal::ColdBefore(a, b);
              });
    s.cold = pinned_buffer;
    s.capacity = pinned_buffer;
    s.capacity_per_qps = pinned_buffer;
    s.instances = live.instances_of_variant(r.pinned);
  } else if (r.model != kNoId) {
    if (r.model < 0 || r.model >= static_cast<ModelId>(index.models().size())) return s;
    const SelectionIndex::Model& m = index.model(r.model);
    if (!m.present) return s;
    s.cold = m.cold;
    s.capacity = m.capacity;
    s.capacity_per_qps = m.capacity_per_qps;
    s.capacity_sorted = true;
    s.instances = live.instances_of_app(m.app);
    s.model = r.model;
  } else {
    if (r.app < 0 || r.app >= static_cast<AppId>(index.apps().size())) return s;
    const SelectionIndex::App& a = index.app(r.app);
    if (!a.present) return s;
    s.cold = a.cold;
    s.capacity = a.capacity;
    s.capacity_per_qps = a.capacity_per_qps;
    s.capacity_sorted = true;
    s.instances = live.instances_of_app(r.app);
  }
  s.valid = true;
  return s;
}

SelectionDecision Unsatisfiable(const SelectionIndex& index, absl::Span<const ColdEntry> scope,
                                const Limits& limits) {
  SelectionDecision d;
  d.outcome = SelectionOutcome::kUnsatisfiable;
  Shortfall best;
  for (const ColdEntry& entry : scope) {
    const OptionId id = entry.option;
    const VariantOption& o = index.option(id);
    Shortfall s = selection_internal::ShortfallOf(o, limits);
    if (d.closest == kNoId || selection_internal::CloserThan(s, o, best, index.option(d.closest))) {
      d.closest = id;
      best = s;
    }
  }
  d.unmet = best.unmet;
  d.shortfall = best.total;
  return d;
}

// What step 4 under load needs from the scope's instances of feasible
// options on accepting workers: the load they lack (ScopeDemand) and the
// loads under way, by variant, keyed for that load.
struct UnderLoad {
  double missing_qps = 0;
  selection_internal::LoadsUnderWay loads_under_way;
  selection_internal::LoadsUnderWay present;  // every instance's variant, loading or not
};

UnderLoad ScanUnderLoad(const SelectionIndex& index, const LiveState& live, const Scope& scope,
                        const Limits& limits, Nanos now) {
  selection_internal::ScopeDemand demand;
  absl::InlinedVector<std::pair<OptionId, VariantId>, 4> loading, present;
  for (InstanceId id : scope.instances) {
    if (scope.model != kNoId && live.instance_model(id) != scope.model) continue;
    const LiveInstance& in = live.instance(id);
    const LiveWorker& worker = live.worker(in.worker);
    if (!worker.accepting) continue;
    const OptionId oid = index.FindOption(in.variant, worker.type);
    if (oid == kNoId || !selection_internal::Feasible(index.option(oid), limits)) continue;
    demand.Add(index.option(oid), in, limits);
    if (in.state == InstanceState::kInactive) loading.push_back({oid, in.variant});
    present.push_back({oid, in.variant});
  }
  UnderLoad u;
  u.missing_qps = demand.missing_qps();
  for (const auto& [oid, variant] : loading) {
    selection_internal::AddLoadUnderWay(
        variant,
        selection_internal::CapacityKeyOf(index.option(oid), limits, now, now, u.missing_qps),
        u.loads_under_way);
  }
  for (const auto& [oid, variant] : present) {
    selection_internal::AddPresent(
        variant,
        selection_internal::CapacityKeyOf(index.option(oid), limits, now, now, u.missing_qps),
        u.present);
  }
  return u;
}

}  // namespace

SelectionDecision Select(const SelectionIndex& index, const LiveState& live,
                         const SelectionRequest& request, const SelectionOptions& options) {
  absl::InlinedVector<ColdEntry, 4> pinned_buffer;
  const Scope scope = ScopeOf(index, live, request, pinned_buffer);
  if (!scope.valid) return SelectionDecision{};
  const Limits limits = Limits::Of(request);
  const Nanos now = request.now;

  // Steps 1, 2 and 5's candidates in one pass over the scope's instances.
  bool have_healthy = false, have_loading = false, have_degraded = false, under_load = false;
  // A loaded (not loading) instance of a feasible option: if nothing is
  // chosen, it was too busy (step 6's kBusy).
  bool have_loaded = false;
  // The soonest a load under way in scope (of a feasible option) answers
  // one more query: step 4's quickest rule starts no load that would answer
  // later (selection_rules.h, LaterThanLoadUnderWay).
  double soonest_under_way_ms = std::numeric_limits<double>::infinity();
  HealthyKey healthy{};
  FastestKey loading{}, degraded{};
  OptionId healthy_option = kNoId, loading_option = kNoId, degraded_option = kNoId;
  // Step 1's Interfered candidate, keyed by its est at its measured speed.
  bool have_interfered = false;
  FastestKey interfered{};
  OptionId interfered_option = kNoId;
  for (InstanceId id : scope.instances) {
    if (scope.model != kNoId && live.instance_model(id) != scope.model) continue;
    const LiveInstance& in = live.instance(id);
    const LiveWorker& worker = live.worker(in.worker);
    if (!worker.accepting) continue;
    const OptionId oid = index.FindOption(in.variant, worker.type);
    if (oid == kNoId) continue;
    const VariantOption& o = index.option(oid);
    if (!selection_internal::StaticFit(o, limits)) continue;
    have_loaded |= in.state != InstanceState::kInactive && selection_internal::Feasible(o, limits);
    const double est = selection_internal::EstimateMs(o, in, now);
    const bool in_time = selection_internal::MakesDeadline(est, now, request.deadline);
    const bool within = selection_internal::WithinLatency(est, limits);
    under_load |= selection_internal::Saturated(in.state, in_time, within);
    const bool inactive = in.state == InstanceState::kInactive;
    if (inactive && selection_internal::Feasible(o, limits)) {
      soonest_under_way_ms = std::min(soonest_under_way_ms, est);
    }
    if (!in_time) continue;
    if (inactive && !options.use_loading_instances) continue;
    if (selection_internal::OfferInterfered(in, id, est, o.price_per_hour, limits, now,
                                            request.deadline, have_interfered, interfered)) {
      interfered_option = oid;
    }
    if (within) {
      if (in.state == InstanceState::kActive) {
        const HealthyKey key{live.RecentLoad(index, in.worker, now),
                             worker.utilisation, o.price_per_hour, est, id};
        if (!have_healthy || key < healthy) {
          healthy = key;
          healthy_option = oid;
          have_healthy = true;
        }
      } else if (inactive) {
        const FastestKey key{est, o.price_per_hour, id};
        if (!have_loading || key < loading) {
          loading = key;
          loading_option = oid;
          have_loading = true;
        }
      }
    }
    if (options.allow_degraded) {
      const FastestKey key{est, o.price_per_hour, id};
      if (!have_degraded || key < degraded) {
        degraded = key;
        degraded_option = oid;
        have_degraded = true;
      }
    }
  }

  SelectionDecision d;
  if (have_interfered &&
      selection_internal::InterferedFirst(
          have_healthy,
          have_healthy ? selection_internal::AtMeasuredSpeed(healthy.est, live.instance(healthy.id))
                       : 0,
          interfered.est)) {
    d.outcome = SelectionOutcome::kUseInstance;
    d.instance = interfered.id;
    d.serving = interfered_option;
    d.estimated_ms = interfered.est;
    return d;
  }
  if (have_healthy || have_loading) {
    d.outcome = SelectionOutcome::kUseInstance;
    d.instance = have_healthy ? healthy.id : loading.id;
    d.serving = have_healthy ? healthy_option : loading_option;
    d.estimated_ms = have_healthy ? healthy.est : loading.est;
    return d;
  }

  // Step 4: the first feasible option in cold order that has a placement;
  // under load, the best of them by capacity (CapacityBefore) among those
  // that a load of another variant under way does not outdo, scanned in the
  // capacity order. Once a load is planned, an option whose
  // packed figures show it cannot beat it (MayBeat) is passed over before
  // its profile's table is read, and one whose key does not beat it before
  // the costlier checks (a load under way, a placement); when the best
  // answers in time (or nothing can: the scope's quickest cold start misses
  // the deadline) the scan stops at the first bound above the best's cost,
  // since an option's instances cost at least its price (the capacity order;
  // when the missing load is unknown the cost is the price per qps, and the
  // order and bound are the least price per qps). That changes no
  // decision: once a load is planned, a load under way elsewhere no longer
  // matters (step 6 says kDeadline either way), and step 3 needs only one
  // feasible option.
  bool any_feasible = false, under_way = false;
  selection_internal::CapacityKey best{};
  UnderLoad scan;
  if (under_load) scan = ScanUnderLoad(index, live, scope, limits, now);
  const bool none_in_time =
      !scope.cold.empty() &&
      !selection_internal::MakesDeadline(scope.cold.front().cold_ms, now, request.deadline);
  const bool unknown = std::isinf(scan.missing_qps);
  const absl::Span<const ColdEntry> order =
      !under_load ? scope.cold : unknown ? scope.capacity_per_qps : scope.capacity;
  for (const ColdEntry& o : order) {
    // Past this bound no option's cost can be below the best's: its
    // instances cost at least its price (known missing) or its price per
    // qps at least its least one (unknown), and the order is by that bound.
    if (under_load && scope.capacity_sorted && d.load.valid() && (best.in_time || none_in_time) &&
        (unknown ? o.least_price_per_qps : o.price_per_hour) > best.instance_cost) {
      break;
    }
    if (under_load && d.load.valid() &&
        !selection_internal::MayBeat(
            o, selection_internal::MakesDeadline(o.cold_ms, now, request.deadline),
            scan.missing_qps, best)) {
      any_feasible |= selection_internal::Feasible(o, limits);
      continue;
    }
    if (!selection_internal::Feasible(o, limits)) continue;
    any_feasible = true;
    if (!under_load &&
        selection_internal::LaterThanLoadUnderWay(o.cold_ms, soonest_under_way_ms)) {
      under_way = true;  // so is every later option: the cold order is by cold_ms
      break;
    }
    selection_internal::CapacityKey key{};
    if (under_load) {
      key = selection_internal::CapacityKeyOf(index.option(o.option), limits, now, request.deadline,
                                              scan.missing_qps);
      if (selection_internal::CoveredByLoadsUnderWay(scan.missing_qps, scan.loads_under_way) ||
          selection_internal::OutdoneByLoadUnderWay(o.variant, key, scan.loads_under_way) ||
          selection_internal::LesserThanPresentVariant(scan.missing_qps, o.variant, key,
                                                       scan.present)) {
        under_way = true;  // the better load under way is the scope's capacity
        continue;
      }
      if (d.load.valid() && !selection_internal::CapacityBefore(key, index.option(o.option), best,
                                                                index.option(d.load.option))) {
        continue;
      }
    }
    if (selection_internal::LoadUnderWay(live, o)) {
      under_way = true;
      continue;
    }
    if (live.max_free_memory(o.type) < o.memory_mb) continue;
    WorkerId where = kNoId;
    for (WorkerId w : live.workers_by_utilisation(o.type)) {
      if (selection_internal::CanPlace(index, live, request, w, o)) {
        where = w;
        break;
      }
    }
    if (where == kNoId) continue;
    d.load = {o.option, where};
    if (!under_load) {
      d.load_rule = LoadRule::kQuickest;
      break;
    }
    d.load_rule = LoadRule::kCapacity;
    best = key;
  }
  if (!any_feasible) return Unsatisfiable(index, scope.cold, limits);  // step 3

  if (d.load.valid()) {
    const double cold_ms = index.option(d.load.option).cold_ms;
    if (selection_internal::MakesDeadline(cold_ms, now, request.deadline)) {
      d.outcome = SelectionOutcome::kLoadAndServe;
      d.serving = d.load.option;
      d.estimated_ms = cold_ms;
      return d;
    }
  }
  if (have_degraded) {  // step 5
    d.outcome = d.load.valid() ? SelectionOutcome::kServeAndLoad : SelectionOutcome::kUseInstance;
    d.instance = degraded.id;
    d.serving = degraded_option;
    d.estimated_ms = degraded.est;
    d.degraded = true;
    return d;
  }
  d.outcome = SelectionOutcome::kUnavailable;  // step 6
  d.unavailable = d.load.valid() || under_way ? UnavailableReason::kDeadline
                  : have_loaded               ? UnavailableReason::kBusy
                                              : UnavailableReason::kNoRoom;
  return d;
}

namespace {

std::string ScopeName(const SelectionIndex& index, const SelectionRequest& r) {
  if (r.pinned != kNoId && r.pinned < static_cast<VariantId>(index.variants().size())) {
    return absl::StrCat("variant ", index.variant(r.pinned).key.ToString());
  }
  if (r.model != kNoId && r.model < static_cast<ModelId>(index.models().size())) {
    return absl::StrCat("model '", index.model(r.model).name, "'");
  }
  if (r.app != kNoId && r.app < static_cast<AppId>(index.apps().size())) {
    return absl::StrCat("app '", index.app(r.app).name, "'");
  }
  return "the request";
}

std::string RequirementsText(const SelectionRequest& r) {
  if (r.pinned != kNoId) return "its deadline";
  std::vector<std::string> parts;
  const Requirements& q = r.requirements;
  if (q.min_accuracy) parts.push_back(absl::StrFormat("min_accuracy %.4g", *q.min_accuracy));
  if (q.latency_ms) parts.push_back(absl::StrFormat("latency_ms %.4g", *q.latency_ms));
  if (q.max_cost) parts.push_back(absl::StrFormat("max_cost $%.4g/h", *q.max_cost));
  if (parts.empty()) return "no requirements";
  std::string out = parts[0];
  for (size_t i = 1; i < parts.size(); ++i) {
    out += (i + 1 == parts.size() ? " and " : ", ") + parts[i];
  }
  return out;
}

std::string ExplainUnsatisfiable(const SelectionIndex& index, const SelectionRequest& r,
                                 const SelectionDecision& d) {
  const std::string scope = ScopeName(index, r);
  if (d.closest == kNoId) {
    return absl::StrCat(scope,
                        " has no variant profiled on any worker type, so nothing can "
                        "serve it; register a model or wait for profiling to finish");
  }
  const VariantOption& o = index.option(d.closest);
  const Requirements& q = r.requirements;
  std::vector<std::string> misses;
  if (d.unmet & kAccuracyUnmet) {
    misses.push_back(absl::StrFormat("its accuracy %.4g is %.4g below min_accuracy %.4g",
                                     o.accuracy, *q.min_accuracy - o.accuracy, *q.min_accuracy));
  }
  if (d.unmet & kLatencyUnmet) {
    misses.push_back(
        absl::StrFormat("its latency %.4g ms at batch 1 is %.4g ms over latency_ms "
                        "%.4g",
                        o.latency1_ms, o.latency1_ms - *q.latency_ms, *q.latency_ms));
  }
  if (d.unmet & kCostUnmet) {
    misses.push_back(absl::StrFormat("its price $%.4g/h is $%.4g/h over max_cost $%.4g/h",
                                     o.price_per_hour, o.price_per_hour - *q.max_cost,
                                     *q.max_cost));
  }
  std::string missed = misses.empty() ? std::string("it misses nothing") : misses[0];
  for (size_t i = 1; i < misses.size(); ++i) missed += "; " + misses[i];
  return absl::StrFormat(
      "no variant of %s meets %s; the closest is %s (accuracy %.4g, %.4g ms at batch 1, "
      "$%.4g/h): %s. Relax the requirement or register a model that meets it",
      scope, RequirementsText(r), index.OptionName(d.closest), o.accuracy, o.latency1_ms,
      o.price_per_hour, missed);
}

// The instances that could serve are loaded but busy: how soon the least
// busy would answer, against the time the query has left.
std::string ExplainBusy(const SelectionIndex& index, const LiveState& live,
                        const SelectionRequest& r) {
  absl::InlinedVector<ColdEntry, 4> pinned_buffer;
  const Scope scope = ScopeOf(index, live, r, pinned_buffer);
  const Limits limits = Limits::Of(r);
  double soonest_ms = -1;
  for (InstanceId id : scope.instances) {
    if (scope.model != kNoId && live.instance_model(id) != scope.model) continue;
    const LiveInstance& in = live.instance(id);
    const LiveWorker& worker = live.worker(in.worker);
    if (!worker.accepting || in.state == InstanceState::kInactive) continue;
    const OptionId oid = index.FindOption(in.variant, worker.type);
    if (oid == kNoId || !selection_internal::Feasible(index.option(oid), limits)) continue;
    const double est = selection_internal::EstimateMs(index.option(oid), in, r.now);
    if (soonest_ms < 0 || est < soonest_ms) soonest_ms = est;
  }
  std::string left = r.deadline >= kInfiniteFuture
                         ? std::string("it has no deadline")
                         : absl::StrFormat("it has %.4g ms left", ToMillis(r.deadline - r.now));
  return absl::StrFormat(
      "variants of %s meet %s, but the instances serving them are busy: the least busy would "
      "answer in %.4g ms, and %s",
      ScopeName(index, r), RequirementsText(r), soonest_ms, left);
}

// Why no feasible option could be loaded anywhere: no worker of the types
// they are profiled on has joined, or none of those has the memory, or the
// ones with the memory already hold the variant or are draining. Said
// apart, because each asks the operator for something else. `head` says
// what is true of the instances (`busy`: some are loaded, but too busy);
// the cause follows it.
std::string ExplainNoRoom(const SelectionIndex& index, const LiveState& live,
                          const SelectionRequest& r, const std::string& head, bool busy) {
  absl::InlinedVector<ColdEntry, 4> pinned_buffer;
  const Scope scope = ScopeOf(index, live, r, pinned_buffer);
  const Limits limits = Limits::Of(r);
  std::vector<WorkerTypeId> types;  // of the feasible options, in cold order
  double least_memory_mb = -1;
  for (const ColdEntry& o : scope.cold) {
    if (!selection_internal::Feasible(o, limits)) continue;
    if (std::find(types.begin(), types.end(), o.type) == types.end()) types.push_back(o.type);
    if (least_memory_mb < 0 || o.memory_mb < least_memory_mb) least_memory_mb = o.memory_mb;
  }
  std::vector<std::string> absent, draining, short_of_memory;
  double most_free_mb = -1;
  for (WorkerTypeId type : types) {
    const std::string& name = index.types()[type].type.name;
    const double free_mb = live.max_free_memory(type);  // -1: none accepting
    if (live.workers_by_utilisation(type).empty()) {
      absent.push_back(name);
    } else if (free_mb < 0) {
      draining.push_back(name);
    } else if (free_mb < least_memory_mb) {
      short_of_memory.push_back(name);
      most_free_mb = std::max(most_free_mb, free_mb);
    }
  }
  if (absent.size() == types.size()) {
    return absl::StrCat(head, ", and no worker of a type they are profiled on (",
                        absl::StrJoin(absent, ", "),
                        ") has joined yet; retry once one has, or start one");
  }
  const size_t unusable = absent.size() + draining.size();
  if (!short_of_memory.empty() && unusable + short_of_memory.size() == types.size()) {
    return absl::StrFormat(
        "%s, and no worker has the memory to load one: the smallest needs %.1f MB, the most "
        "free on a worker of a type it runs on is %.1f MB; retry later or add workers",
        head, least_memory_mb, most_free_mb);
  }
  if (unusable == types.size()) {
    return absl::StrCat(head, ", and every worker of a type they run on is draining (",
                        absl::StrJoin(draining, ", "), "); retry once it is replaced");
  }
  if (busy) {
    return absl::StrCat(head,
                        "; every worker with the memory to load another already holds one; "
                        "retry shortly, allow more latency, or add workers");
  }
  return absl::StrCat(head,
                      ", and every worker with the memory to load one already holds it "
                      "(loading or unloading); retry shortly");
}

}  // namespace

std::string ExplainDecision(const SelectionIndex& index, const LiveState& live,
                            const SelectionRequest& request, const SelectionDecision& d) {
  switch (d.outcome) {
    case SelectionOutcome::kUnsatisfiable:
      return ExplainUnsatisfiable(index, request, d);
    case SelectionOutcome::kUnavailable:
      if (d.unavailable == UnavailableReason::kNoRoom) {
        return ExplainNoRoom(index, live, request,
                             absl::StrCat("variants of ", ScopeName(index, request), " meet ",
                                          RequirementsText(request),
                                          ", but none is loaded and healthy"),
                             /*busy=*/false);
      }
      if (d.unavailable == UnavailableReason::kBusy) {
        return ExplainNoRoom(index, live, request, ExplainBusy(index, live, request),
                             /*busy=*/true);
      }
      return absl::StrCat(
          "variants of ", ScopeName(index, request), " meet ", RequirementsText(request),
          ", but none can answer before this query's deadline",
          d.load.valid()
              ? absl::StrCat("; loading ", index.OptionName(d.load.option), " for the next queries")
              : std::string(),
          "; retry, or allow more latency");
    case SelectionOutcome::kUseInstance:
    case SelectionOutcome::kServeAndLoad:
    case SelectionOutcome::kLoadAndServe: {
      std::string out = absl::StrFormat("%s %s (est. %.3g ms)", SelectionOutcomeName(d.outcome),
                                        index.OptionName(d.serving), d.estimated_ms);
      if (d.instance != kNoId) {
        absl::StrAppend(&out, " instance ", d.instance, " on worker ",
                        live.has_instance(d.instance) ? live.instance(d.instance).worker : kNoId);
      }
      if (d.load.valid()) {
        absl::StrAppend(&out, "; load ", index.OptionName(d.load.option), " on worker ",
                        d.load.worker);
      }
      if (d.degraded) absl::StrAppend(&out, " (degraded)");
      return out;
    }
  }
  return "";
}

std::string ExplainLoad(const SelectionIndex& index, const LiveState& live,
                        const SelectionRequest& request, const SelectionDecision& d) {
  if (!d.load.valid()) return "";
  const Limits limits = Limits::Of(request);
  const VariantOption& chosen = index.option(d.load.option);
  const double capacity = selection_internal::CapacityQps(chosen, limits);
  const std::string objective = limits.has_latency
                                    ? absl::StrFormat("at latency_ms %.4g", limits.latency_ms)
                                    : std::string("at its largest batch");
  if (d.load_rule != LoadRule::kCapacity) {
    return absl::StrFormat(
        "%s: the quickest answer (%.3g ms to load and serve one query); no instance of %s is "
        "saturated",
        LoadRuleName(d.load_rule), chosen.cold_ms, ScopeName(index, request));
  }
  // The option light load would have loaded: the first in cold order that
  // could be placed.
  absl::InlinedVector<ColdEntry, 4> pinned_buffer;
  const Scope scope = ScopeOf(index, live, request, pinned_buffer);
  const UnderLoad scan = ScanUnderLoad(index, live, scope, limits, request.now);
  OptionId quickest = kNoId;
  for (const ColdEntry& o : scope.cold) {
    if (!selection_internal::Feasible(o, limits) || selection_internal::LoadUnderWay(live, o)) {
      continue;
    }
    for (WorkerId w : live.workers_by_utilisation(o.type)) {
      if (selection_internal::CanPlace(index, live, request, w, o)) {
        quickest = o.option;
        break;
      }
    }
    if (quickest != kNoId) break;
  }
  auto instances = [&](const VariantOption& o) {
    return selection_internal::InstancesFor(scan.missing_qps,
                                            selection_internal::CapacityQps(o, limits));
  };
  if (std::isinf(scan.missing_qps)) {
    std::string out = absl::StrFormat(
        "capacity: instances of %s are saturated, with no report yet of what they are offered; "
        "%s sustains %.0f qps %s for $%.4g/h, the least per query among the variants that can "
        "load",
        ScopeName(index, request), index.OptionName(d.load.option), capacity, objective,
        chosen.price_per_hour);
    return out;
  }
  std::string out = absl::StrFormat(
      "capacity: instances of %s are saturated, %.0f qps short by their last reports; %s "
      "sustains %.0f qps %s for $%.4g/h, %.0f instance(s) for $%.4g/h, the least among the "
      "variants that can load",
      ScopeName(index, request), scan.missing_qps, index.OptionName(d.load.option), capacity,
      objective, chosen.price_per_hour, instances(chosen),
      chosen.price_per_hour * instances(chosen));
  if (quickest != kNoId && index.option(quickest).variant != chosen.variant) {
    const VariantOption& q = index.option(quickest);
    absl::StrAppendFormat(&out,
                          " (the quickest to start, %s, sustains %.0f qps for $%.4g/h: %.0f "
                          "instance(s) for $%.4g/h)",
                          index.OptionName(quickest), selection_internal::CapacityQps(q, limits),
                          q.price_per_hour, instances(q), q.price_per_hour * instances(q));
  }
  return out;
}

std::string DebugString(const SelectionDecision& d) {
  return absl::StrFormat(
      "{%s instance=%d serving=%d load=%d@%d (%s) est=%.17g degraded=%d closest=%d unmet=%d "
      "shortfall=%.17g unavailable=%d}",
      SelectionOutcomeName(d.outcome), d.instance, d.serving, d.load.option, d.load.worker,
      LoadRuleName(d.load_rule), d.estimated_ms, d.degraded, d.closest, d.unmet, d.shortfall,
      static_cast<int>(d.unavailable));
}

}  // namespace maitre::policy
