#include "policy/batching_timeout.h"

#include <algorithm>

namespace maitre::policy {

BatchDecision DecideByTimeout(absl::Span<const QueuedQuery> queue, Nanos now, int32_t max_batch,
                              Nanos max_queue_delay, const LatencyTable& table,
                              bool plan_with_p99) {
  if (queue.empty()) return BatchDecision::Wait(kInfiniteFuture);
  int32_t expired = ExpiredPrefix(queue, now);
  if (expired > 0) return BatchDecision::Drop(expired);
  int32_t n = PrefixWithin(queue, max_batch);
  if (RowsIn(queue, n) >= max_batch || n < static_cast<int32_t>(queue.size())) {
    return BatchDecision::Dispatch(n);
  }
  Nanos due = OldestArrival(queue, n) + max_queue_delay;
  if (!table.empty()) {
    // The head has the earliest deadline of the batch, so it binds.
    due = std::min(due, queue[0].deadline - table.At(RowsIn(queue, n), plan_with_p99));
  }
  if (now >= due) return BatchDecision::Dispatch(n);
  return BatchDecision::Wait(due);
}

BatchDecision TimeoutBatching::Decide(absl::Span<const QueuedQuery> queue, Nanos now) const {
  return DecideByTimeout(queue, now, max_batch_, max_queue_delay_, table_, p99_);
}

}  // namespace maitre::policy
