// Proteus's adaptive batching (Ahmad et al., ASPLOS '24, §5): proactive and
// non-work-conserving. With q queries queued, the instance waits for query
// q+1 while now < T_exp(head) - T_process(q+1), i.e. while a batch that also
// holds the next arrival would still finish before the head's deadline; once
// that is no longer true it dispatches the q it has, so the head never misses
// because of the wait.
//
// Two further rules come from the Proteus artifact (UMass-LIDS/Proteus,
// core/predictor.py) and matter as much as the wait rule:
//  - Maximum batch B: the largest batch whose median latency fits in half the
//    SLO (a query may wait for one batch and then run in the next). Without a
//    configured SLO, each decision uses the head query's own budget
//    (deadline - arrival). Capped by max_batch.
//  - Early drop: while a batch of the queue (up to B rows) would finish after
//    the head's deadline, the head is dropped. Without it, a backlog makes
//    the instance serve near-expired heads in ever smaller batches, the
//    throughput falls below the arrival rate, and the backlog never clears.
//    The test uses the median service time: a query is given up only when it
//    would more likely than not be late.
//
// A third cap follows demand. In Proteus the allocator assigns each instance
// a throughput, and the batch is the one that serves it; waiting for a
// larger batch buys throughput nobody asked for and spends the head's slack.
// Here the demand is what the instance observed (ObserveDemand): B is also
// capped at the smallest batch whose profiled throughput covers demand x
// `demand_headroom`, and once that many rows are queued the instance stops
// waiting. Under light load the cap is 1, so a query is dispatched as soon as
// it arrives; near capacity the SLO cap governs, as before. The demand cap
// only ends waits: a backlog (after a burst the last report did not see)
// still goes out in batches of up to B. Until the first observation the cap
// is 1, as for an idle instance: a new instance has no history, and holding
// its first queries for a throughput nobody has asked for yet only spends
// their slack (under load, work-conserving dispatch still grows batches
// from what queues meanwhile). With headroom 0 only the SLO cap applies.
//
// T_process is the profile's p99 by default. The policy waits until the last
// moment the plan allows, so whatever slack the plan leaves is all the head
// has against a slow batch: planning with the median would leave a batch
// held to the edge late about half the time its service time runs above the
// median. Planning with p99 keeps that near 1%, at the cost of dispatching a
// little earlier. `plan_with_median` switches to the median for comparison.
//
// Decisions, in order: drop as above; dispatch B rows at once if that many
// are queued (waiting cannot make the batch larger); dispatch what is queued
// if it reaches the demand cap; otherwise wait until
// T_exp(head) - T_process(rows + 1), or dispatch everything if that moment
// has come.
//
// Thread-safety: see batching.h.
#pragma once

#include <vector>

#include "policy/batching.h"
#include "policy/latency_table.h"

namespace maitre::policy {

class ProteusBatching final : public BatchingPolicy {
 public:
  // `table` must not be empty. `slo` may be 0 (use each head's budget).
  // `throughput[b]` is the profile's rows per second at batch b, for b in
  // 1..max_batch (ThroughputByBatch); `demand_headroom` 0 ignores demand.
  ProteusBatching(int32_t max_batch, Nanos slo, LatencyTable table, bool plan_with_p99,
                  std::vector<double> throughput, double demand_headroom);
  absl::string_view name() const override { return "proteus"; }
  BatchDecision Decide(absl::Span<const QueuedQuery> queue, Nanos now) const override;
  void ObserveDemand(double rows_per_second) override;

  // B for a latency objective: at least 1, at most max_batch.
  int32_t MaxBatchFor(Nanos slo) const;
  // The rows that end a wait now: 0 when no demand cap applies.
  int32_t demand_cap() const { return demand_cap_; }

 private:
  int32_t max_batch_;
  Nanos slo_;
  LatencyTable table_;
  bool p99_;
  int32_t fixed_max_;  // MaxBatchFor(slo_) when slo_ > 0
  std::vector<double> throughput_;
  double headroom_;
  int32_t demand_cap_;
};

// Rows per second of `profile` at each batch 0..max_batch ([0] is 0).
std::vector<double> ThroughputByBatch(const Profile& profile, int32_t max_batch);

}  // namespace maitre::policy
