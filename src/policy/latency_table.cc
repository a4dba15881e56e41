#include "policy/latency_table.h"

#include <algorithm>
#include <cmath>

namespace maitre::policy {
namespace {

Nanos MillisToNanos(double ms) { return static_cast<Nanos>(std::llround(ms * kMillisecond)); }

}  // namespace

LatencyTable LatencyTable::Build(const Profile& profile, int32_t max_rows, Nanos margin) {
  LatencyTable table;
  if (profile.empty() || max_rows < 1) return table;
  table.profile_ = profile;
  table.max_rows_ = max_rows;
  table.margin_ = margin;
  table.p50_.assign(max_rows + 2, 0);
  table.p99_.assign(max_rows + 2, 0);
  for (int32_t rows = 1; rows <= max_rows + 1; ++rows) {
    table.p50_[rows] =
        std::max(table.p50_[rows - 1], MillisToNanos(profile.LatencyAt(rows)) + margin);
    table.p99_[rows] = std::max(table.p99_[rows - 1], MillisToNanos(profile.P99At(rows)) + margin);
  }
  return table;
}

Nanos LatencyTable::Lookup(const std::vector<Nanos>& table, int32_t rows, bool p99) const {
  if (table.empty()) return 0;
  if (rows < 1) rows = 1;
  if (rows < static_cast<int32_t>(table.size())) return table[rows];
  double ms = p99 ? profile_.P99At(rows) : profile_.LatencyAt(rows);
  return std::max(table.back(), MillisToNanos(ms) + margin_);
}

int32_t LatencyTable::MaxRowsWithin(Nanos budget, bool p99) const {
  if (empty()) return 0;
  const std::vector<Nanos>& table = p99 ? p99_ : p50_;
  // The table is non-decreasing, so the answer is one binary search over
  // rows 1..max_rows.
  auto first = table.begin() + 1;
  auto last = table.begin() + max_rows_ + 1;
  auto it = std::upper_bound(first, last, budget);
  return static_cast<int32_t>(it - first);
}

int32_t ExpiredPrefix(absl::Span<const QueuedQuery> queue, Nanos now) {
  int32_t n = 0;
  while (n < static_cast<int32_t>(queue.size()) && queue[n].deadline <= now) ++n;
  return n;
}

Nanos OldestArrival(absl::Span<const QueuedQuery> queue, int32_t count) {
  Nanos oldest = kInfiniteFuture;
  for (int32_t i = 0; i < count; ++i) oldest = std::min(oldest, queue[i].arrival);
  return oldest;
}

}  // namespace maitre::policy
