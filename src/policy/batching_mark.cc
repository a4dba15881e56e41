#include "policy/batching_mark.h"

#include <algorithm>

#include "policy/batching_timeout.h"

namespace maitre::policy {

MarkParams TuneMark(const LatencyTable& table, Nanos rt_max, int32_t max_batch,
                    bool plan_with_p99) {
  const Nanos one_by_one = table.At(1, plan_with_p99);  // 1 / µ*_nb
  MarkParams tuned{1, 0};
  for (int32_t b = 1; b <= max_batch; ++b) {
    const Nanos service = table.At(b, plan_with_p99);
    const Nanos wait = std::min<Nanos>(rt_max, b * one_by_one) - service;
    if (wait < 0) break;
    tuned = MarkParams{b, wait};
  }
  return tuned;
}

MarkBatching::MarkBatching(int32_t max_batch, Nanos slo, LatencyTable table, bool plan_with_p99)
    : max_batch_(max_batch), slo_(slo), table_(std::move(table)), p99_(plan_with_p99) {
  if (slo_ > 0) fixed_ = TuneMark(table_, slo_, max_batch_, p99_);
}

BatchDecision MarkBatching::Decide(absl::Span<const QueuedQuery> queue, Nanos now) const {
  if (queue.empty()) return BatchDecision::Wait(kInfiniteFuture);
  MarkParams p = fixed_;
  if (slo_ <= 0) {
    p = TuneMark(table_, queue[0].deadline - queue[0].arrival, max_batch_, p99_);
  }
  return DecideByTimeout(queue, now, p.n_batch, p.w_batch, table_, p99_);
}

}  // namespace maitre::policy
