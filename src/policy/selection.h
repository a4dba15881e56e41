// Per-query variant selection (INFaaS Case I; docs/policies.md, "Variant
// selection"): a pure function from the static index (selection_index.h), the
// live view (selection_live.h) and one request to a small decision value: use
// this instance, load that variant there, or say why nothing fits.
//
// The rules, for a request with requirements L = latency_ms, A =
// min_accuracy, C = max_cost (each optional; the caller has applied the
// app's defaults), `now` and `deadline`:
//  - Scope: the pinned variant if any, else the named model's variants, else
//    all the app's variants. An *option* is a variant in scope on a worker
//    type it has a profile for. A pinned variant ignores A, C and L (the
//    client chose it); only the deadline applies.
//  - An option fits statically when accuracy >= A and price_per_hour <= C
//    (an instance holds all its worker's cores, so it costs the type's
//    price), and is *feasible* when it also has LatencyAt(1) <= L.
//  - An instance's estimated latency is
//        est = start + ahead · LatencyAt(b) / (b · replicas) + LatencyAt(b)
//    with ahead = max(0, waiting − replicas + 1) the queries already sent to
//    it that a free replica would not take at once, b its mean batch
//    rounded (at least 1) or the batch its queue allows (ceil(ahead /
//    replicas), at most its batching cap, Profile::BatchCap) when that is
//    larger and gives a lower est, and `start` the time left until a
//    loading instance is ready (0 otherwise) (Profile::AnswerBehindMs). It
//    makes the deadline when now + est <= deadline.
//  1. Healthy: among Active instances on accepting workers whose option
//     fits statically, with est <= L and the deadline made, pick the one on
//     the least-loaded worker (LiveState::RecentLoad), then the
//     least-utilised; ties by lower price, then lower est, then lower
//     instance id. An Interfered instance whose speed is measured
//     (LiveInstance::slowdown) is weighed at that speed, est × max(1,
//     slowdown): the soonest such (ties: price, id) within L and by the
//     deadline is taken instead when there is no healthy pick or it answers
//     strictly sooner than the healthy pick at that one's measured speed;
//     its decision carries the slowed est.
//  2. Loading: else, among loading (Inactive) instances passing the same
//     tests, the one with the lowest est; ties by price, then id.
//  3. If no option in scope is feasible: kUnsatisfiable, naming the closest
//     option (smallest summed relative shortfall, see SelectionDecision).
//  4. Cold: the feasible option with the lowest load_ms + LatencyAt(1)
//     (ties: price, variant id, type id) that has no load under way (no
//     loading instance of the variant on an accepting worker of that type:
//     a second load would only finish later), that would answer sooner than
//     every load of the scope under way (its cold start below the least est
//     of the scope's loading instances of feasible options on accepting
//     workers: LaterThanLoadUnderWay), and has a placement: the accepting
//     worker of its type with the lowest utilisation (ties: lower id) that
//     has free memory for it, does not already hold the variant, and whose
//     cores busy instances of the model's other variants do not fill
//     (selection_rules.h, CoresKeptBusyByModel). If
//     now + load_ms + LatencyAt(1) <= deadline: kLoadAndServe. (The wait
//     for the load is judged against the deadline only; latency_ms judges
//     the variant, as LatencyAt(1) <= L.)
//     Under load (an instance in scope that fits statically, on an accepting
//     worker, is Overloaded, or is Active with est > L or past the deadline:
//     the load is an addition to a saturated scope) the same candidates are
//     ranked for capacity instead (LoadRule::kCapacity). Let capacity =
//     Profile::SaturationQps(L) (with no L, the throughput at its largest
//     profiled batch) and `missing` = what the scope's instances of feasible
//     options on accepting workers were offered by their last reports (the
//     larger of arrivals and served) less Σ capacity × replicas, at least 0.
//     The ranking: one whose cold start answers this query by its deadline
//     first; then the lowest price_per_hour × max(1, ⌈missing / capacity⌉)
//     (the instances that carry what is missing); then the lowest
//     price_per_hour / capacity; then the larger capacity; then the cold
//     order. An option is not a candidate while a load of another variant
//     of the scope is under way that ranks at least as well on those three
//     figures: a burst of saturated queries then starts the best variant's
//     load, not the next best on every worker. (INFaaS §4.2: the right
//     variant changes with load; the quickest to start is the right one
//     only for the first query.)
//  5. Degraded: else, the instance in scope (Active, Overloaded, Interfered
//     or loading) whose option fits statically and that makes the deadline
//     with the lowest est (ties: price, id), even if est > L: kServeAndLoad
//     when step 4 found a placement (load it in the background), else
//     kUseInstance; `degraded` is set.
//  6. Else kUnavailable: the requirements can be met, but not before this
//     deadline (kDeadline: a placement exists but loads too slowly, or a
//     load is under way) or not at all now: kBusy when an instance of a
//     feasible option is loaded (not loading) on an accepting worker, so it
//     was passed over for its estimate: the load, not the room, refuses the
//     query; else kNoRoom (no room to load: no worker of a fitting type
//     has joined, has the memory, or lacks the variant already).
//     `load` is set when a placement exists, so the next queries can be
//     served.
// Overloaded instances are therefore used only in step 5, when no healthy,
// Interfered-in-time or loading instance and no in-time load can serve;
// Interfered ones in step 1 at their measured speed, or in step 5.
//
// Select() reads only the app's (or model's, or variant's) instance list,
// the scope's options in cold order until the first that fits, and the
// type's workers in utilisation order until the first with room.
// SelectBruteForce() applies the same rules by scanning every variant,
// instance and worker; it is the reference for tests and the benchmark.
//
// Thread-safety: pure functions; safe from any thread as long as the index
// and live state are not being mutated.
#pragma once

#include <cstdint>
#include <string>

#include "core/time.h"
#include "core/variant.h"
#include "policy/selection_index.h"
#include "policy/selection_live.h"

namespace maitre::policy {

struct SelectionRequest {
  AppId app = kNoId;          // model-less: any variant of the app's models
  ModelId model = kNoId;      // when set: only this model's variants (app unused)
  VariantId pinned = kNoId;   // when set: only this variant (app, model unused)
  Requirements requirements;  // the app's defaults already applied
  Nanos now = 0;
  Nanos deadline = kInfiniteFuture;
};

struct SelectionOptions {
  // Step 2: send queries to instances still loading when they will be
  // ready in time.
  bool use_loading_instances = true;
  // Step 5: serve on an unhealthy or slow instance rather than refuse.
  bool allow_degraded = true;
  // The weighted router only (selection_weighted.h): when an app has no
  // instance anywhere, selection's load stands. For an allocator that
  // provisions from observed demand (mark), whose plan has nothing for an
  // app until its queries are seen; not for one whose plan may leave an app
  // unplaced on purpose (the Proteus family), where it would load and be
  // unloaded every round.
  bool load_on_cold_start = false;
};

enum class SelectionOutcome : uint8_t {
  kUseInstance,    // send the query to `instance`
  kLoadAndServe,   // start `load` and send the query to the new instance
  kServeAndLoad,   // send the query to `instance`; start `load` in the background
  kUnsatisfiable,  // no variant in scope meets the requirements (HTTP 422)
  kUnavailable,    // the requirements can be met, but not now (HTTP 503 / 504)
};
absl::string_view SelectionOutcomeName(SelectionOutcome outcome);

// Which requirement the closest option misses (a bit set).
enum UnmetRequirement : uint8_t {
  kAccuracyUnmet = 1,
  kLatencyUnmet = 2,
  kCostUnmet = 4,
};

enum class UnavailableReason : uint8_t {
  kNone,
  kDeadline,  // a load is possible or under way, but nothing serves before the deadline
  kNoRoom,    // no feasible option is loaded, and none can be loaded anywhere now
  kBusy,      // feasible options are loaded but too busy, and no more can be loaded now
};

// Which rule of step 4 chose the load (see above).
enum class LoadRule : uint8_t {
  kNone,
  kQuickest,  // cold order: the quickest answer to this query (light load)
  kCapacity,  // under load: the most capacity per price
};
absl::string_view LoadRuleName(LoadRule rule);  // "none", "quickest", "capacity"

struct LoadPlan {
  OptionId option = kNoId;  // the variant and worker type to load
  WorkerId worker = kNoId;  // where
  bool valid() const { return option != kNoId; }
  bool operator==(const LoadPlan& o) const { return option == o.option && worker == o.worker; }
};

struct SelectionDecision {
  SelectionOutcome outcome = SelectionOutcome::kUnsatisfiable;
  InstanceId instance = kNoId;  // kUseInstance, kServeAndLoad
  LoadPlan load;                // kLoadAndServe, kServeAndLoad; kUnavailable when possible
  // The option that serves the query: the instance's (variant, type), or the load's.
  OptionId serving = kNoId;
  double estimated_ms = 0;  // until the answer, from the profile (est above)
  bool degraded = false;    // step 5: unhealthy, or est > latency_ms

  // kUnsatisfiable: the closest option in scope, by the sum over the unmet
  // requirements of the relative shortfall: (A − accuracy)/A,
  // (LatencyAt(1) − L)/L and (price − C)/C (a limit of 0 divides by the
  // option's own value instead). Ties: lower price, higher accuracy, lower
  // LatencyAt(1), lower variant id, lower type id. kNoId when the scope
  // has no option at all (no variant with a profile on a known type).
  OptionId closest = kNoId;
  uint8_t unmet = 0;  // UnmetRequirement bits of `closest`
  double shortfall = 0;

  UnavailableReason unavailable = UnavailableReason::kNone;  // kUnavailable
  LoadRule load_rule = LoadRule::kNone;                      // set whenever `load` is

  bool operator==(const SelectionDecision& o) const;
  bool operator!=(const SelectionDecision& o) const { return !(*this == o); }
};

SelectionDecision Select(const SelectionIndex& index, const LiveState& live,
                         const SelectionRequest& request, const SelectionOptions& options = {});

// The same rules by exhaustive scans. Same result as Select, always.
enum class BruteForceScan : uint8_t {
  kEverything,  // every option of the index, every instance slot, every worker
  kScopeOnly,   // the app's options and instances, every worker; no early exit
};
SelectionDecision SelectBruteForce(const SelectionIndex& index, const LiveState& live,
                                   const SelectionRequest& request,
                                   const SelectionOptions& options = {},
                                   BruteForceScan scan = BruteForceScan::kEverything);

// A sentence a person can act on, for kUnsatisfiable and kUnavailable
// (the controller's 422 / 503 body); for the other outcomes, what was chosen.
// Not for the critical path: it formats strings.
std::string ExplainDecision(const SelectionIndex& index, const LiveState& live,
                            const SelectionRequest& request, const SelectionDecision& decision);

// Why `decision.load` is that variant: for the log line of a load the
// controller starts. Names the rule, the chosen option's capacity and price
// and, under load, the quickest option it was preferred to. Not for the
// critical path: it formats strings and rescans the scope.
std::string ExplainLoad(const SelectionIndex& index, const LiveState& live,
                        const SelectionRequest& request, const SelectionDecision& decision);

// A stable one-line rendering, for logs and test failure messages.
std::string DebugString(const SelectionDecision& decision);

}  // namespace maitre::policy
