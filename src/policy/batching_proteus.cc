#include "policy/batching_proteus.h"

#include <algorithm>

namespace maitre::policy {

ProteusBatching::ProteusBatching(int32_t max_batch, Nanos slo, LatencyTable table,
                                 bool plan_with_p99, std::vector<double> throughput,
                                 double demand_headroom)
    : max_batch_(max_batch),
      slo_(slo),
      table_(std::move(table)),
      p99_(plan_with_p99),
      throughput_(std::move(throughput)),
      headroom_(demand_headroom),
      demand_cap_(demand_headroom > 0 ? 1 : 0) {
  fixed_max_ = slo_ > 0 ? MaxBatchFor(slo_) : 0;
}

std::vector<double> ThroughputByBatch(const Profile& profile, int32_t max_batch) {
  std::vector<double> throughput(static_cast<size_t>(std::max(max_batch, 0)) + 1, 0.0);
  for (int32_t b = 1; b <= max_batch; ++b) throughput[b] = profile.ThroughputAt(b);
  return throughput;
}

void ProteusBatching::ObserveDemand(double rows_per_second) {
  if (!(headroom_ > 0) || !(rows_per_second >= 0)) return;
  const double need = rows_per_second * headroom_;
  demand_cap_ = 0;  // none: no batch keeps up, so only the SLO bounds it
  for (size_t b = 1; b < throughput_.size(); ++b) {
    if (throughput_[b] >= need) {
      demand_cap_ = static_cast<int32_t>(b);
      break;
    }
  }
}

int32_t ProteusBatching::MaxBatchFor(Nanos slo) const {
  // Like Nexus and Profile::SaturationQps, a capacity choice made with the
  // median; only the wait, the risky decision, is planned with p99.
  return std::clamp(table_.MaxRowsWithin(slo / 2, /*p99=*/false), 1, max_batch_);
}

BatchDecision ProteusBatching::Decide(absl::Span<const QueuedQuery> queue, Nanos now) const {
  if (queue.empty()) return BatchDecision::Wait(kInfiniteFuture);
  const int32_t size = static_cast<int32_t>(queue.size());

  int32_t first = 0;
  int32_t limit = 0;
  for (; first < size; ++first) {
    const QueuedQuery& q = queue[first];
    if (q.deadline <= now) continue;
    limit = fixed_max_ > 0 ? fixed_max_ : MaxBatchFor(q.deadline - q.arrival);
    absl::Span<const QueuedQuery> rest = queue.subspan(first);
    if (now + table_.P50(RowsIn(rest, PrefixWithin(rest, limit))) <= q.deadline) break;
  }
  if (first > 0) return BatchDecision::Drop(first);

  const int32_t n = PrefixWithin(queue, limit);
  const int32_t rows = RowsIn(queue, n);
  if (n < size || rows >= limit) return BatchDecision::Dispatch(n);
  // Enough rows for the demand: waiting would buy throughput nobody needs.
  if (demand_cap_ > 0 && rows >= demand_cap_) return BatchDecision::Dispatch(n);
  const Nanos last_wait = queue[0].deadline - table_.At(rows + 1, p99_);
  if (now < last_wait) return BatchDecision::Wait(last_wait);
  return BatchDecision::Dispatch(n);
}

}  // namespace maitre::policy
