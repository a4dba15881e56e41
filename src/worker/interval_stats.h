// Counters and latency samples for one reporting interval of one instance.
// The monitor reads and resets them every report; the controller's instance
// state machine (Active / Overloaded / Interfered) is computed from them.
//
// Arrivals, served, dropped and failed count rows, not requests: a request
// of 8 images is 8 queries. Rows are the unit of the profiles' throughput,
// which the state machine and the autoscalers compare these rates with.
//
// Thread-safety: not synchronised; the owning Instance guards it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/time.h"

namespace maitre::worker {

struct IntervalSnapshot {
  Nanos length = 0;  // how long the interval was
  int64_t arrivals = 0;
  int64_t served = 0;
  int64_t dropped = 0;  // expired before they could run
  int64_t failed = 0;   // executor errors
  double latency_p50_ms = 0;
  double latency_p99_ms = 0;
  double compute_p50_ms = 0;
  double mean_batch_rows = 0;
  // Time the executors were busy, summed over replicas.
  Nanos busy = 0;
};

class IntervalStats {
 public:
  explicit IntervalStats(Nanos start) : start_(start) {}

  void OnArrival(int64_t rows) { arrivals_ += rows; }
  void OnDropped(int64_t n) { dropped_ += n; }
  void OnFailed(int64_t n) { failed_ += n; }
  // One batch of `rows` rows that kept an executor busy for `compute`.
  void OnBatch(int64_t rows, Nanos compute);
  // One request of `rows` rows answered, `total` after it arrived at the
  // worker. Latency samples are per request.
  void OnServed(Nanos total, int64_t rows);

  IntervalSnapshot TakeAndReset(Nanos now);

 private:
  // Enough samples for a stable p99 at the rates one instance serves; past
  // this, samples are kept at a stride so the buffer stays bounded.
  static constexpr size_t kMaxSamples = 8192;

  Nanos start_;
  int64_t arrivals_ = 0, served_ = 0, dropped_ = 0, failed_ = 0;
  int64_t batches_ = 0, batch_rows_ = 0;
  Nanos busy_ = 0;
  std::vector<Nanos> totals_;
  std::vector<Nanos> computes_;
  int64_t served_seen_ = 0;
};

// The q-quantile (0..1) of `samples` (reorders them). 0 when empty.
Nanos Quantile(std::vector<Nanos>& samples, double q);

}  // namespace maitre::worker
