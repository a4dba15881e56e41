// Service times of one profile, tabulated in nanoseconds per batch size, so
// that a batching decision costs a table look-up instead of an interpolation.
// Also small helpers shared by the batching policies.
//
// Thread-safety: immutable after Build; safe to share across threads.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "core/profile.h"
#include "core/time.h"
#include "policy/batching.h"

namespace maitre::policy {

class LatencyTable {
 public:
  // An empty table: the policy has no profile and must not plan with times.
  LatencyTable() = default;

  // Tabulates rows 1..max_rows+1 (one past the cap, for "could one more
  // query still fit?"). Values are made non-decreasing in rows: measured
  // profiles can dip between sizes through noise, but a batch is never
  // planned to be faster than a smaller one (it could always be padded).
  // `margin` is added to every time: a real worker's wake-ups are late by
  // scheduling jitter, so policies that wait until the last feasible moment
  // plan with that much slack (the simulator, being exact, uses 0).
  static LatencyTable Build(const Profile& profile, int32_t max_rows, Nanos margin = 0);

  bool empty() const { return p50_.empty(); }
  int32_t max_rows() const { return max_rows_; }

  Nanos P50(int32_t rows) const { return Lookup(p50_, rows, /*p99=*/false); }
  Nanos P99(int32_t rows) const { return Lookup(p99_, rows, /*p99=*/true); }
  Nanos At(int32_t rows, bool p99) const { return p99 ? P99(rows) : P50(rows); }

  // The largest rows in 1..max_rows whose time fits in `budget`; 0 if none.
  int32_t MaxRowsWithin(Nanos budget, bool p99) const;

 private:
  Nanos Lookup(const std::vector<Nanos>& table, int32_t rows, bool p99) const;

  Profile profile_;  // for sizes past the table (a single oversized query)
  int32_t max_rows_ = 0;
  Nanos margin_ = 0;
  std::vector<Nanos> p50_;  // index = rows; [0] unused
  std::vector<Nanos> p99_;
};

// Queries at the head of `queue` whose deadline is at or before `now`. The
// queue is ordered by deadline, so expired queries form a prefix.
int32_t ExpiredPrefix(absl::Span<const QueuedQuery> queue, Nanos now);

// The earliest arrival among the first `count` queries (the queue is ordered
// by deadline, not arrival, so the oldest may be anywhere).
Nanos OldestArrival(absl::Span<const QueuedQuery> queue, int32_t count);

}  // namespace maitre::policy
