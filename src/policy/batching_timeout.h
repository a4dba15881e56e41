// Triton-style dynamic batching: dispatch when the batch is full or when the
// oldest query has waited `max_queue_delay`. It needs no profile.
//
// Thread-safety: see batching.h.
#pragma once

#include "policy/batching.h"

namespace maitre::policy {

class TimeoutBatching final : public BatchingPolicy {
 public:
  TimeoutBatching(int32_t max_batch, Nanos max_queue_delay)
      : max_batch_(max_batch), max_queue_delay_(max_queue_delay) {}
  absl::string_view name() const override { return "timeout"; }
  BatchDecision Decide(absl::Span<const QueuedQuery> queue, Nanos now) const override;

 private:
  int32_t max_batch_;
  Nanos max_queue_delay_;
};

}  // namespace maitre::policy
