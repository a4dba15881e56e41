// Nexus's batching (Shen et al., SOSP '19, §6.3): work-conserving, with the
// batch size taken from the latency objective and an "early drop" rule.
//
// Target batch b: the largest batch whose median latency fits in half the
// SLO (a query can arrive just after a batch starts and then ride in the
// next one, so it may wait one batch time and run for another; this is
// Profile::MaxBatchWithin(slo/2)). Without a configured SLO, each decision
// uses the head query's own budget (deadline - arrival).
//
// Early drop: the queue is scanned with a window of b queries; the scan stops
// at the first query that can finish, at the median service time of its
// whole window, before its deadline, and every query before it is dropped.
// This is Nexus's rule and is deliberately harsher than "drop what cannot be
// served at all": a query that would only fit in a smaller batch is given up
// so that the instance keeps running full, efficient batches under load.
// Then the first b queries are dispatched at once.
//
// Thread-safety: see batching.h.
#pragma once

#include "policy/batching.h"
#include "policy/latency_table.h"

namespace maitre::policy {

class NexusBatching final : public BatchingPolicy {
 public:
  // `table` must not be empty. `slo` may be 0 (use each head's budget).
  NexusBatching(int32_t max_batch, Nanos slo, LatencyTable table);
  absl::string_view name() const override { return "nexus"; }
  BatchDecision Decide(absl::Span<const QueuedQuery> queue, Nanos now) const override;

  // The target batch for a latency objective (at least 1, at most max_batch).
  int32_t TargetBatch(Nanos slo) const;

 private:
  int32_t max_batch_;
  Nanos slo_;
  LatencyTable table_;
  int32_t fixed_target_;  // TargetBatch(slo_) when slo_ > 0
};

}  // namespace maitre::policy
