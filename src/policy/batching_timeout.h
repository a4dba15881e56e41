// Triton-style dynamic batching: dispatch when the batch is full or when the
// oldest query has waited `max_queue_delay`. It needs no profile.
//
// Given a profile it also obeys the rule every policy follows: it never holds
// a query past the last moment the batch it would send could still finish
// before the head's deadline (planned with the profile's p99). Expired
// queries at the head are dropped, never dispatched.
//
// Thread-safety: see batching.h.
#pragma once

#include "policy/batching.h"
#include "policy/latency_table.h"

namespace maitre::policy {

// The timeout rule, shared with `mark` (whose W_batch and N_batch are a
// tuned max_queue_delay and max_batch). `table` may be empty.
BatchDecision DecideByTimeout(absl::Span<const QueuedQuery> queue, Nanos now, int32_t max_batch,
                              Nanos max_queue_delay, const LatencyTable& table, bool plan_with_p99);

class TimeoutBatching final : public BatchingPolicy {
 public:
  TimeoutBatching(int32_t max_batch, Nanos max_queue_delay)
      : max_batch_(max_batch), max_queue_delay_(max_queue_delay) {}
  TimeoutBatching(int32_t max_batch, Nanos max_queue_delay, LatencyTable table, bool plan_with_p99)
      : max_batch_(max_batch),
        max_queue_delay_(max_queue_delay),
        table_(std::move(table)),
        p99_(plan_with_p99) {}
  absl::string_view name() const override { return "timeout"; }
  BatchDecision Decide(absl::Span<const QueuedQuery> queue, Nanos now) const override;

 private:
  int32_t max_batch_;
  Nanos max_queue_delay_;
  LatencyTable table_;
  bool p99_ = true;
};

}  // namespace maitre::policy
