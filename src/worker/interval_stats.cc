#include "worker/interval_stats.h"

#include <algorithm>

namespace maitre::worker {

Nanos Quantile(std::vector<Nanos>& samples, double q) {
  if (samples.empty()) return 0;
  size_t k = static_cast<size_t>(q * static_cast<double>(samples.size() - 1) + 0.5);
  std::nth_element(samples.begin(), samples.begin() + k, samples.end());
  return samples[k];
}

void IntervalStats::OnBatch(int64_t rows, Nanos compute) {
  ++batches_;
  batch_rows_ += rows;
  busy_ += compute;
  if (computes_.size() < kMaxSamples) computes_.push_back(compute);
}

void IntervalStats::OnServed(Nanos total, int64_t rows) {
  served_ += rows;
  ++served_seen_;
  if (totals_.size() < kMaxSamples) {
    totals_.push_back(total);
  } else {
    // Reservoir-free thinning: overwrite a slot chosen by the running count,
    // which keeps late samples represented without a random generator.
    totals_[static_cast<size_t>(served_seen_) % kMaxSamples] = total;
  }
}

IntervalSnapshot IntervalStats::TakeAndReset(Nanos now) {
  IntervalSnapshot s;
  s.length = now - start_;
  s.arrivals = arrivals_;
  s.served = served_;
  s.dropped = dropped_;
  s.failed = failed_;
  s.latency_p50_ms = ToMillis(Quantile(totals_, 0.5));
  s.latency_p99_ms = ToMillis(Quantile(totals_, 0.99));
  s.compute_p50_ms = ToMillis(Quantile(computes_, 0.5));
  s.mean_batch_rows = batches_ > 0 ? static_cast<double>(batch_rows_) / batches_ : 0;
  s.busy = busy_;
  *this = IntervalStats(now);
  return s;
}

}  // namespace maitre::worker
