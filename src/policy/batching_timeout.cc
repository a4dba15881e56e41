#include "policy/batching_timeout.h"

#include <algorithm>

namespace maitre::policy {

BatchDecision TimeoutBatching::Decide(absl::Span<const QueuedQuery> queue, Nanos now) const {
  if (queue.empty()) return BatchDecision::Wait(kInfiniteFuture);
  int32_t n = PrefixWithin(queue, max_batch_);
  if (RowsIn(queue, n) >= max_batch_ || n < static_cast<int32_t>(queue.size())) {
    return BatchDecision::Dispatch(n);
  }
  // The queue is ordered by deadline, so the oldest query may be anywhere.
  Nanos oldest = queue[0].arrival;
  for (const QueuedQuery& q : queue) oldest = std::min(oldest, q.arrival);
  Nanos due = oldest + max_queue_delay_;
  if (now >= due) return BatchDecision::Dispatch(n);
  return BatchDecision::Wait(due);
}

}  // namespace maitre::policy
