// Batching policies (docs/policies.md, "Batching"): pure decisions about when
// an instance runs its next batch. The same objects drive the real worker's
// batch loop and the simulator's instances.
//
// The mechanism (worker or simulator) owns the queue and keeps it ordered by
// deadline, earliest first. It asks Decide() whenever the executor is idle
// and something changed (an arrival, a completed batch, or the wake-up time
// the last decision asked for). Independently of the policy, the mechanism
// answers any query whose deadline has passed with DEADLINE_EXCEEDED at once;
// a query is never run late.
//
// Thread-safety: a policy is not synchronised; its owner calls it from one
// thread (or under one lock). Decide() is const and has no side effects;
// Observe() and ObserveDemand() update the adaptive state of policies that
// have one (AIMD; Proteus's demand cap).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/profile.h"
#include "core/time.h"

namespace maitre::policy {

// One query waiting in an instance's queue.
struct QueuedQuery {
  Nanos arrival = 0;
  Nanos deadline = kInfiniteFuture;
  int32_t rows = 1;  // the query's own batch dimension
};

struct BatchDecision {
  enum class Action : uint8_t {
    kWait,      // do nothing until wake_at, or the next arrival
    kDispatch,  // run the first `count` queries now as one batch
    kDrop,      // answer the first `count` queries DEADLINE_EXCEEDED now
  };
  Action action = Action::kWait;
  int32_t count = 0;
  Nanos wake_at = kInfiniteFuture;

  static BatchDecision Wait(Nanos until) { return {Action::kWait, 0, until}; }
  static BatchDecision Dispatch(int32_t n) { return {Action::kDispatch, n, kInfiniteFuture}; }
  static BatchDecision Drop(int32_t n) { return {Action::kDrop, n, kInfiniteFuture}; }
};

// What happened to a batch, for policies that adapt.
struct BatchOutcome {
  int32_t rows = 0;
  Nanos start = 0;
  Nanos finish = 0;
  int32_t missed = 0;  // queries of the batch that finished after their deadline
};

class BatchingPolicy {
 public:
  virtual ~BatchingPolicy() = default;
  virtual absl::string_view name() const = 0;
  // `queue` is ordered by deadline and holds only queries not yet dispatched.
  virtual BatchDecision Decide(absl::Span<const QueuedQuery> queue, Nanos now) const = 0;
  virtual void Observe(const BatchOutcome& outcome) {}
  // The rows per second that arrived at the instance over the last report
  // interval. The mechanism calls it at every report (the worker's monitor,
  // the simulator's report tick).
  virtual void ObserveDemand(double rows_per_second) {}
};

struct BatchingOptions {
  // "timeout" | "proteus" | "clipper-aimd" | "nexus" | "mark"
  std::string policy = "proteus";
  // Upper bound on rows per batch, whatever the policy decides.
  int32_t max_batch = 64;
  // `timeout`: how long the oldest query may wait for company.
  Nanos max_queue_delay = 2 * kMillisecond;
  // `nexus`, `mark`: the latency objective the batch size is derived from.
  // When zero, policies that need one use the head query's own deadline.
  Nanos slo = 0;
  // `clipper-aimd`: the maximum batch starts at `aimd_initial_batch`, grows
  // by `aimd_step` after each batch with no miss and is multiplied by
  // `aimd_decrease` after a batch with a miss (Clipper: +1, x0.9).
  int32_t aimd_initial_batch = 1;
  double aimd_step = 1;
  double aimd_decrease = 0.9;
  // `clipper-aimd`: what counts as a miss. By default a batch in which some
  // query finished after its deadline (as in the Proteus artifact's AIMD);
  // when set, a batch whose own service time exceeded `slo` (the Clipper
  // paper's signal, blind to queueing).
  bool aimd_batch_latency_signal = false;
  // `proteus`: the batch is also capped at the smallest whose throughput
  // (profile p50) covers the observed demand times this headroom, as the
  // throughput an allocation assigns bounds Proteus's batch. At low load
  // the cap is 1 and nothing waits, as before the first ObserveDemand. 0
  // turns the cap off (the SLO alone bounds the batch).
  double demand_headroom = 1.25;
  // `proteus`, `nexus`, `mark`, `timeout`: plan service times with the
  // profile's median instead of its p99 (the default; see batching_proteus.h).
  bool plan_with_median = false;
  // Added to every planned service time, so that a policy that waits until
  // the last feasible moment still dispatches in time when the host wakes
  // it late. The real worker sets it (a shared CPU is not punctual); the
  // simulator leaves it at 0.
  Nanos dispatch_margin = 0;
};

// `profile` is the variant's profile on this worker type; policies that plan
// with service times need a non-empty one and fail to create without it.
absl::StatusOr<std::unique_ptr<BatchingPolicy>> CreateBatchingPolicy(
    const BatchingOptions& options, const Profile& profile);

// Rows in the first `count` queries.
int32_t RowsIn(absl::Span<const QueuedQuery> queue, int32_t count);

// The largest prefix of `queue` whose rows fit in `max_rows` (at least one
// query when the queue is not empty: a query larger than the limit runs alone).
int32_t PrefixWithin(absl::Span<const QueuedQuery> queue, int32_t max_rows);

// The two rules an instance applies around its batching policy, the same in
// the worker and the simulator (docs/policies.md, "Batching"):
//  - when no waiting query has a latency objective left (all are
//    best-effort), all of them go at once: holding one back pays against no
//    objective; otherwise the policy decides. A dispatch takes at most
//    `max_rows` rows (PrefixWithin);
//  - a query the policy drops that may still meet its deadline is served
//    best-effort instead; only the rest are answered DEADLINE_EXCEEDED now.
BatchDecision DecideForInstance(BatchingPolicy& policy, absl::Span<const QueuedQuery> queue,
                                size_t with_objective, int32_t max_rows, Nanos now);
inline bool ServeDroppedBestEffort(bool best_effort, Nanos deadline, Nanos now) {
  return !best_effort && deadline > now;
}

}  // namespace maitre::policy
