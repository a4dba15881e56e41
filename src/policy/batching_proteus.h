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
// T_process is the profile's p99 by default. The policy waits until the last
// moment the plan allows, so whatever slack the plan leaves is all the head
// has against a slow batch: planning with the median would leave a batch
// held to the edge late about half the time its service time runs above the
// median. Planning with p99 keeps that near 1%, at the cost of dispatching a
// little earlier. `plan_with_median` switches to the median for comparison.
//
// Decisions, in order: drop as above; dispatch B rows at once if that many
// are queued (waiting cannot make the batch larger); otherwise wait until
// T_exp(head) - T_process(rows + 1), or dispatch everything if that moment
// has come.
//
// Thread-safety: see batching.h.
#pragma once

#include "policy/batching.h"
#include "policy/latency_table.h"

namespace maitre::policy {

class ProteusBatching final : public BatchingPolicy {
 public:
  // `table` must not be empty. `slo` may be 0 (use each head's budget).
  ProteusBatching(int32_t max_batch, Nanos slo, LatencyTable table, bool plan_with_p99);
  absl::string_view name() const override { return "proteus"; }
  BatchDecision Decide(absl::Span<const QueuedQuery> queue, Nanos now) const override;

  // B for a latency objective: at least 1, at most max_batch.
  int32_t MaxBatchFor(Nanos slo) const;

 private:
  int32_t max_batch_;
  Nanos slo_;
  LatencyTable table_;
  bool p99_;
  int32_t fixed_max_;  // MaxBatchFor(slo_) when slo_ > 0
};

}  // namespace maitre::policy
