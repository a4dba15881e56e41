// The arithmetic and orderings of variant selection (selection.h), shared by
// the indexed Select() and the brute-force reference so that both compute
// bit-identical figures; they differ only in what they scan. Internal to
// selection*.cc and their tests.
//
// Thread-safety: pure inline functions.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/container/inlined_vector.h"
#include "core/time.h"
#include "policy/selection.h"

namespace maitre::policy::selection_internal {

// The request's requirements as plain fields; a pinned variant has none.
struct Limits {
  bool has_latency = false, has_accuracy = false, has_cost = false;
  double latency_ms = 0, min_accuracy = 0, max_cost = 0;

  static Limits Of(const SelectionRequest& r) {
    Limits l;
    if (r.pinned != kNoId) return l;
    const Requirements& q = r.requirements;
    l.has_latency = q.latency_ms.has_value();
    l.has_accuracy = q.min_accuracy.has_value();
    l.has_cost = q.max_cost.has_value();
    l.latency_ms = q.latency_ms.value_or(0);
    l.min_accuracy = q.min_accuracy.value_or(0);
    l.max_cost = q.max_cost.value_or(0);
    return l;
  }
};

// Option-like: VariantOption or ColdEntry (the same fields, the same values).
template <typename Option>
bool StaticFit(const Option& o, const Limits& l) {
  return (!l.has_accuracy || o.accuracy >= l.min_accuracy) &&
         (!l.has_cost || o.price_per_hour <= l.max_cost);
}

template <typename Option>
bool Feasible(const Option& o, const Limits& l) {
  return StaticFit(o, l) && (!l.has_latency || o.latency1_ms <= l.latency_ms);
}

inline bool WithinLatency(double est_ms, const Limits& l) {
  return !l.has_latency || est_ms <= l.latency_ms;
}

// Compares in milliseconds against the time left, which cannot overflow
// the way now + FromMillis(huge) could.
inline bool MakesDeadline(double est_ms, Nanos now, Nanos deadline) {
  if (deadline >= kInfiniteFuture) return true;
  return est_ms <= ToMillis(deadline - now);
}

// When a query sent now would be answered: the queries ahead drain in
// batches, then the query's own batch runs (Profile::AnswerBehindMs). The
// batch is the instance's recent mean, which is what its batching formed at
// the present load, unless the batch the queue per replica allows (up to
// the instance's cap) is larger and answers sooner: a burst after a quiet
// spell goes out in batches larger than the quiet spell's mean.
inline double EstimateMs(const VariantOption& o, const LiveInstance& in, Nanos now) {
  const int replicas = std::max(1, in.replicas);
  // Queries already sent that a replica is running do not delay a new one
  // while another replica is free: only those beyond the free replicas
  // queue.
  const int ahead = std::max(0, in.waiting - replicas + 1);
  const int cap = o.profile.BatchCap(in.max_batch);
  const int mean = static_cast<int>(std::lround(std::max(1.0, in.mean_batch)));
  const int queue = std::min(cap, (ahead + replicas - 1) / replicas);
  double answer = o.profile.AnswerBehindMs(ahead, mean, replicas);
  if (queue > mean) answer = std::min(answer, o.profile.AnswerBehindMs(ahead, queue, replicas));
  const double start =
      in.state == InstanceState::kInactive && in.ready_at > now ? ToMillis(in.ready_at - now) : 0;
  return start + answer;
}

// When the instance would answer at the speed it was last measured at
// (LiveInstance::slowdown), never sooner than its profile says: an
// instance measured faster than its profile (a median against a profile
// read at its tail) counts at the profile's speed, and so does one whose
// speed is unknown.
inline double AtMeasuredSpeed(double est_ms, const LiveInstance& in) {
  return est_ms * std::max(1.0, in.slowdown);
}

// Step 1's Interfered candidates: an Interfered instance whose speed is
// known. It serves when, at that speed, it answers within L and by the
// deadline, and sooner than the healthy pick at that one's measured speed
// (InterferedFirst). Without it, the Active copy takes every query however
// long its queue: on the 2-core host one worker's copy took the model's
// whole load past what it delivered while the other's stood idle.
inline bool InterferedCandidate(const LiveInstance& in) {
  return in.state == InstanceState::kInterfered && in.slowdown > 0;
}

// Whether step 1 takes the Interfered candidate answering in
// `interfered_ms` (at its measured speed) over the healthy pick (when there
// is one) answering in `healthy_ms` at its own. Ties stay with the healthy
// instance.
inline bool InterferedFirst(bool have_healthy, double healthy_ms, double interfered_ms) {
  return !have_healthy || interfered_ms < healthy_ms;
}

// Step 1 order: recent load, worker utilisation, price, est, instance id.
struct HealthyKey {
  double load, utilisation, price, est;
  InstanceId id;
  bool operator<(const HealthyKey& o) const {
    if (load != o.load) return load < o.load;
    if (utilisation != o.utilisation) return utilisation < o.utilisation;
    if (price != o.price) return price < o.price;
    if (est != o.est) return est < o.est;
    return id < o.id;
  }
};

// Steps 2 and 5 order: est, price, instance id.
struct FastestKey {
  double est, price;
  InstanceId id;
  bool operator<(const FastestKey& o) const {
    if (est != o.est) return est < o.est;
    if (price != o.price) return price < o.price;
    return id < o.id;
  }
};

// Step 1's Interfered candidate `id`, whose est by its profile is `est`:
// lowers `best` (ties: price, id) to it when it is a candidate
// (InterferedCandidate) that at its measured speed answers within L and by
// the deadline. Returns whether it did.
inline bool OfferInterfered(const LiveInstance& in, InstanceId id, double est, double price,
                            const Limits& limits, Nanos now, Nanos deadline, bool& have,
                            FastestKey& best) {
  if (!InterferedCandidate(in)) return false;
  const double at_speed = AtMeasuredSpeed(est, in);
  const FastestKey key{at_speed, price, id};
  if (!WithinLatency(at_speed, limits) || !MakesDeadline(at_speed, now, deadline) ||
      (have && !(key < best))) {
    return false;
  }
  best = key;
  have = true;
  return true;
}

// Step 4 order (the index's cold order).
template <typename Option>
bool ColdBefore(const Option& a, const Option& b) {
  if (a.cold_ms != b.cold_ms) return a.cold_ms < b.cold_ms;
  if (a.price_per_hour != b.price_per_hour) return a.price_per_hour < b.price_per_hour;
  if (a.variant != b.variant) return a.variant < b.variant;
  return a.type < b.type;
}

// Whether an instance that passed the static fit on an accepting worker is
// *saturated* for this query: Overloaded, or Active but too far behind to
// answer it within L and by its deadline. One such instance puts the scope
// under load, and step 4 then chooses for capacity. Interfered instances
// (slowed by their neighbours) and loading ones do not count.
inline bool Saturated(InstanceState state, bool makes_deadline, bool within_latency) {
  return state == InstanceState::kOverloaded ||
         (state == InstanceState::kActive && !(makes_deadline && within_latency));
}

// The rate one instance of `o` sustains within the request's latency limit
// (Profile::SaturationQps(L), to the bit, from the index's tables); with no
// limit (a pinned variant, or an app without latency_ms), its rate at its
// largest profiled batch.
inline double CapacityQps(const VariantOption& o, const Limits& l) {
  if (!l.has_latency) return o.profile.ThroughputAt(o.profile.max_batch());
  if (o.least_latency_from.empty() || o.latency1_ms > l.latency_ms) return 0;
  // The largest batch whose latency fits half the limit (the Nexus rule):
  // the count of batches whose least latency from there on fits.
  const double half = l.latency_ms / 2;
  const auto fits =
      std::upper_bound(o.least_latency_from.begin(), o.least_latency_from.end(), half);
  const size_t limit = static_cast<size_t>(fits - o.least_latency_from.begin());
  return o.most_throughput_to[limit == 0 ? 0 : limit - 1];
}

// The load a saturated scope lacks, from its instances' last reports: what
// they were offered (arrivals, or what they served if more) less what their
// profiles sustain within L, in thousandths of a query per second, summed
// as integers so that every scan order gives the same figure.
inline int64_t MilliQps(double qps) { return std::llround(std::max(0.0, qps) * 1000); }

// When no instance has reported anything yet (a model saturated within its
// first second), what it lacks is unknown: +infinity, so that the options
// rank by their price per unit of capacity.
struct ScopeDemand {
  int64_t offered_mqps = 0;
  int64_t capacity_mqps = 0;
  void Add(const VariantOption& o, const LiveInstance& in, const Limits& l) {
    offered_mqps += MilliQps(std::max(in.arrival_qps, in.served_qps));
    capacity_mqps += MilliQps(CapacityQps(o, l)) * std::max(1, in.replicas);
  }
  double missing_qps() const {
    if (offered_mqps == 0) return std::numeric_limits<double>::infinity();
    return static_cast<double>(std::max<int64_t>(0, offered_mqps - capacity_mqps)) / 1000;
  }
};

// The instances of an option of capacity `capacity_qps` that carry
// `missing_qps`: at least one (the load being planned).
inline double InstancesFor(double missing_qps, double capacity_qps) {
  if (!(capacity_qps > 0)) return std::numeric_limits<double>::infinity();
  return std::max(1.0, std::ceil(missing_qps / capacity_qps - 1e-9));
}

// Step 4's order under load (INFaaS §4.2's cost of carrying the load): an
// option whose cold start answers this query by its deadline first; then
// the lowest price of the instances that carry the scope's missing load
// (price × InstancesFor(missing, capacity)); then the lowest price per unit
// of capacity (price / CapacityQps), then the larger capacity, then the cold
// order. With little missing, one instance of any option carries it and the
// cheapest instance comes first; with much, the one with the most capacity
// per dollar. With the missing load unknown, instance_cost is the price per
// qps (the limit of the cost as the load grows).
struct CapacityKey {
  bool in_time = false;
  double instance_cost = 0;  // price × instances; +inf when it sustains nothing
  double price_per_qps = 0;  // +inf when the option sustains nothing
  double capacity_qps = 0;
};

inline CapacityKey CapacityKeyOf(const VariantOption& o, const Limits& l, Nanos now, Nanos deadline,
                                 double missing_qps) {
  CapacityKey k;
  k.in_time = MakesDeadline(o.cold_ms, now, deadline);
  k.capacity_qps = CapacityQps(o, l);
  k.price_per_qps = k.capacity_qps > 0 ? o.price_per_hour / k.capacity_qps
                                       : std::numeric_limits<double>::infinity();
  k.instance_cost = !(k.capacity_qps > 0) ? std::numeric_limits<double>::infinity()
                    : std::isinf(missing_qps)
                        ? k.price_per_qps
                        : o.price_per_hour * InstancesFor(missing_qps, k.capacity_qps);
  return k;
}

// Lower bounds of an option's key from its packed figures (no profile read):
// whether it can beat `best` (in_time as best's, or better).
inline bool MayBeat(const ColdEntry& o, bool in_time, double missing_qps, const CapacityKey& best) {
  if (in_time != best.in_time) return in_time;
  const double least_cost = !(o.max_capacity_qps > 0) ? std::numeric_limits<double>::infinity()
                            : std::isinf(missing_qps)
                                ? o.least_price_per_qps
                                : o.price_per_hour * InstancesFor(missing_qps, o.max_capacity_qps);
  if (least_cost != best.instance_cost) return least_cost < best.instance_cost;
  return o.least_price_per_qps <= best.price_per_qps;
}

inline bool CapacityBefore(const CapacityKey& ka, const VariantOption& a, const CapacityKey& kb,
                           const VariantOption& b) {
  if (ka.in_time != kb.in_time) return ka.in_time;
  if (ka.instance_cost != kb.instance_cost) return ka.instance_cost < kb.instance_cost;
  if (ka.price_per_qps != kb.price_per_qps) return ka.price_per_qps < kb.price_per_qps;
  if (ka.capacity_qps != kb.capacity_qps) return ka.capacity_qps > kb.capacity_qps;
  return ColdBefore(a, b);
}

// Under load, a load of a variant is planned only if it carries the missing
// load more cheaply (or as cheaply, with more capacity per dollar or more
// capacity) than every load of another variant of the scope already under
// way: a burst of saturated queries then starts the best variant's load,
// and more of it on other workers, not the next best variants while the best
// one loads. The loads under way are kept by variant with their best figures
// (in_time unused).
inline bool BeatsLoadUnderWay(const CapacityKey& k, const CapacityKey& under_way) {
  if (k.instance_cost != under_way.instance_cost) {
    return k.instance_cost < under_way.instance_cost;
  }
  if (k.price_per_qps != under_way.price_per_qps) return k.price_per_qps < under_way.price_per_qps;
  return k.capacity_qps > under_way.capacity_qps;
}

using LoadsUnderWay = absl::InlinedVector<std::pair<VariantId, CapacityKey>, 4>;

inline void AddLoadUnderWay(VariantId variant, const CapacityKey& k, LoadsUnderWay& loads) {
  for (auto& [v, best] : loads) {
    if (v != variant) continue;
    if (BeatsLoadUnderWay(k, best)) best = k;
    return;
  }
  loads.push_back({variant, k});
}

// Under load, no load is planned while the scope's instances, its loads
// under way included, sustain all its instances were offered by their last
// reports: the capacity is on its way.
inline bool CoveredByLoadsUnderWay(double missing_qps, const LoadsUnderWay& loads) {
  return missing_qps == 0 && !loads.empty();
}

// With nothing missing by the profiles (the instances are saturated by
// something else: the data path, a burst, a neighbour), a variant that
// carries less per dollar than one the scope already runs adds nothing:
// only a variant at least as good per dollar (strictly better, or as good
// with more capacity, than every other variant present) is loaded, more of
// the best one included. `present` holds, by variant, the best figures per
// dollar of the scope's instances (loaded or loading): AddPresent.
inline bool BetterPerDollar(const CapacityKey& a, const CapacityKey& b) {
  return a.price_per_qps < b.price_per_qps ||
         (a.price_per_qps == b.price_per_qps && a.capacity_qps > b.capacity_qps);
}

inline void AddPresent(VariantId variant, const CapacityKey& k, LoadsUnderWay& present) {
  for (auto& [v, best] : present) {
    if (v != variant) continue;
    if (BetterPerDollar(k, best)) best = k;
    return;
  }
  present.push_back({variant, k});
}

inline bool LesserThanPresentVariant(double missing_qps, VariantId variant, const CapacityKey& k,
                                     const LoadsUnderWay& present) {
  if (missing_qps != 0) return false;
  for (const auto& [v, p] : present) {
    if (v != variant && !BetterPerDollar(k, p)) return true;
  }
  return false;
}

// Whether a load of another variant under way carries at least as much per
// dollar as `k` would on `variant`.
inline bool OutdoneByLoadUnderWay(VariantId variant, const CapacityKey& k,
                                  const LoadsUnderWay& loads) {
  for (const auto& [v, best] : loads) {
    if (v != variant && !BeatsLoadUnderWay(k, best)) return true;
  }
  return false;
}

// Placement order: utilisation, then worker id.
inline bool PlacementBefore(const LiveWorker& a, WorkerId ida, const LiveWorker& b, WorkerId idb) {
  if (a.utilisation != b.utilisation) return a.utilisation < b.utilisation;
  return ida < idb;
}

// Whether a ready instance keeps its replicas' cores busy: unless it is
// Active and idle (nothing offered, served or waiting), it does. An
// Interfered one counts however idle: selection passes it over while a
// healthy copy answers sooner, so it may show no queries, but it is probed again within a few reports, and its cores were
// slow already (on the 2-core host opencv was loaded beside such a
// torch-opt, and both then served on the one core).
inline bool Busy(const LiveInstance& in) {
  return in.state != InstanceState::kActive || in.served_qps > 0 || in.arrival_qps > 0 ||
         in.waiting > 0;
}

// Whether the worker's cores are kept busy by ready instances of the model
// of `variant` (its other variants): their busy replicas are at least the
// type's cores. A second variant loaded there takes its cores from the
// first rather than adding capacity, and the two then churn: on the 2-core
// host on 2026-11-27 opencv was loaded, as the quickest answer, beside a
// busy torch-opt on its one-core worker, and 45% of the answers of a high
// load came from opencv (docs/policies.md, "Variant selection", cores kept
// busy). Other models' instances are the autoscalers' business.
inline bool CoresKeptBusyByModel(const SelectionIndex& index, const LiveState& live, WorkerId w,
                                 VariantId variant) {
  const ModelId model = index.variant(variant).model;
  int64_t busy_replicas = 0;
  for (InstanceId i : live.instances_on_worker(w)) {
    const LiveInstance& in = live.instance(i);
    if (in.variant == variant || live.instance_model(i) != model ||
        in.state == InstanceState::kInactive || !Busy(in)) {
      continue;
    }
    busy_replicas += std::max(1, in.replicas);
  }
  const WorkerTypeId type = live.worker(w).type;
  return busy_replicas > 0 && busy_replicas >= index.type(type).type.cores;
}

// A pinned variant ignores the busy cores: the client chose that variant,
// and no other could serve it (e2e_variants_test queries every variant of a
// model in turn, and each load was refused while the last one was busy).
template <typename Option>
bool CanPlace(const SelectionIndex& index, const LiveState& live, const SelectionRequest& request,
              WorkerId w, const Option& o) {
  const LiveWorker& worker = live.worker(w);
  return worker.accepting && worker.type == o.type && worker.free_memory_mb >= o.memory_mb &&
         !live.Hosts(w, o.variant) &&
         (request.pinned != kNoId || !CoresKeptBusyByModel(index, live, w, o.variant));
}

// Whether a load of `o` (its variant on its type) is already under way on an
// accepting worker: a second one would only finish later, so step 4 does not
// plan it. A load on a worker that is not accepting (draining, or a call to
// it failed) will serve nothing.
template <typename Option>
bool LoadUnderWay(const LiveState& live, const Option& o) {
  for (InstanceId i : live.instances_of_variant(o.variant)) {
    const LiveInstance& in = live.instance(i);
    const LiveWorker& worker = live.worker(in.worker);
    if (in.state == InstanceState::kInactive && worker.type == o.type && worker.accepting) {
      return true;
    }
  }
  return false;
}

// Step 4's quickest rule: a load whose cold start (`cold_ms`) would answer
// no sooner than a load of the scope already under way (`soonest_ms`, the
// least estimate among the scope's loading instances of feasible options)
// is not started. Without it, every query of a burst that found the scope's
// one instance Interfered started the next variant in cold order: on the
// 2-core host one second of a load step loaded torch-opt, opencv, torch and
// torch-int8 on one worker (docs/experiments.md, steady-load run 7), though
// the torch-opt load under way would answer each of those queries first.
inline bool LaterThanLoadUnderWay(double cold_ms, double soonest_ms) {
  return cold_ms >= soonest_ms;
}

// How far `o` is from the limits (step 3).
struct Shortfall {
  double total = 0;
  uint8_t unmet = 0;
};

inline double Relative(double excess, double limit, double value) {
  const double scale = limit > 0 ? limit : value;
  return scale > 0 ? excess / scale : 1;
}

inline Shortfall ShortfallOf(const VariantOption& o, const Limits& l) {
  Shortfall s;
  if (l.has_accuracy && o.accuracy < l.min_accuracy) {
    s.total += Relative(l.min_accuracy - o.accuracy, l.min_accuracy, o.accuracy);
    s.unmet |= kAccuracyUnmet;
  }
  if (l.has_latency && o.latency1_ms > l.latency_ms) {
    s.total += Relative(o.latency1_ms - l.latency_ms, l.latency_ms, o.latency1_ms);
    s.unmet |= kLatencyUnmet;
  }
  if (l.has_cost && o.price_per_hour > l.max_cost) {
    s.total += Relative(o.price_per_hour - l.max_cost, l.max_cost, o.price_per_hour);
    s.unmet |= kCostUnmet;
  }
  return s;
}

// Step 3 order: shortfall, price, higher accuracy, latency, variant, type.
inline bool CloserThan(const Shortfall& sa, const VariantOption& a, const Shortfall& sb,
                       const VariantOption& b) {
  if (sa.total != sb.total) return sa.total < sb.total;
  if (a.price_per_hour != b.price_per_hour) return a.price_per_hour < b.price_per_hour;
  if (a.accuracy != b.accuracy) return a.accuracy > b.accuracy;
  if (a.latency1_ms != b.latency1_ms) return a.latency1_ms < b.latency1_ms;
  if (a.variant != b.variant) return a.variant < b.variant;
  return a.type < b.type;
}

}  // namespace maitre::policy::selection_internal
