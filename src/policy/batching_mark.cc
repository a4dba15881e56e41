#include "policy/batching_mark.h"

#include <algorithm>
#include <cmath>

#include "policy/batching_timeout.h"

namespace maitre::policy {

MarkParams TuneMark(const LatencyTable& table, Nanos rt_max, double rate_qps, int32_t max_batch,
                    bool plan_with_p99) {
  for (int32_t b = max_batch; b >= 1; --b) {
    Nanos service = table.At(b, plan_with_p99);
    Nanos cycle = rt_max;
    if (rate_qps > 0) {
      double fill_ns = static_cast<double>(b) / rate_qps * kSecond;
      cycle =
          std::min<Nanos>(cycle, static_cast<Nanos>(std::min<double>(fill_ns, kInfiniteFuture)));
    }
    if (cycle - service >= 0) return MarkParams{b, cycle - service};
  }
  return MarkParams{1, 0};
}

MarkBatching::MarkBatching(int32_t max_batch, Nanos slo, double rate_qps, LatencyTable table,
                           bool plan_with_p99)
    : max_batch_(max_batch),
      slo_(slo),
      rate_qps_(rate_qps),
      table_(std::move(table)),
      p99_(plan_with_p99) {
  if (slo_ > 0) fixed_ = TuneMark(table_, slo_, rate_qps_, max_batch_, p99_);
}

BatchDecision MarkBatching::Decide(absl::Span<const QueuedQuery> queue, Nanos now) const {
  if (queue.empty()) return BatchDecision::Wait(kInfiniteFuture);
  MarkParams p = fixed_;
  if (slo_ <= 0) {
    p = TuneMark(table_, queue[0].deadline - queue[0].arrival, rate_qps_, max_batch_, p99_);
  }
  return DecideByTimeout(queue, now, p.n_batch, p.w_batch, table_, p99_);
}

}  // namespace maitre::policy
