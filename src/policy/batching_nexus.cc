#include "policy/batching_nexus.h"

#include <algorithm>

namespace maitre::policy {

NexusBatching::NexusBatching(int32_t max_batch, Nanos slo, LatencyTable table)
    : max_batch_(max_batch), slo_(slo), table_(std::move(table)) {
  fixed_target_ = slo_ > 0 ? TargetBatch(slo_) : 0;
}

int32_t NexusBatching::TargetBatch(Nanos slo) const {
  int32_t b = table_.MaxRowsWithin(slo / 2, /*p99=*/false);
  return std::clamp(b, 1, max_batch_);
}

BatchDecision NexusBatching::Decide(absl::Span<const QueuedQuery> queue, Nanos now) const {
  if (queue.empty()) return BatchDecision::Wait(kInfiniteFuture);
  const int32_t size = static_cast<int32_t>(queue.size());
  int32_t first = 0;
  int32_t target = 0;
  for (; first < size; ++first) {
    const QueuedQuery& q = queue[first];
    if (q.deadline <= now) continue;
    target = fixed_target_ > 0 ? fixed_target_ : TargetBatch(q.deadline - q.arrival);
    absl::Span<const QueuedQuery> window = queue.subspan(first);
    int32_t rows = RowsIn(window, PrefixWithin(window, target));
    if (now + table_.P50(rows) <= q.deadline) break;
  }
  if (first > 0) return BatchDecision::Drop(first);
  return BatchDecision::Dispatch(PrefixWithin(queue, target));
}

}  // namespace maitre::policy
