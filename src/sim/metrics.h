// What the simulator counts: per-second and per-app query outcomes and
// latency histograms. Plain values, filled on the simulator's hot path with
// no allocation per query.
//
// Thread-safety: not synchronised; owned by one Simulator.
#pragma once

#include <cstdint>
#include <vector>

#include "core/time.h"
#include "policy/admission.h"

namespace maitre::sim {

// Outcomes of queries. A query ends in exactly one of: on time, late (it ran
// but finished after its deadline), dropped (answered DEADLINE_EXCEEDED
// without running) or rejected (no instance could take it).
struct Counters {
  int64_t arrived = 0;
  int64_t completed = 0;  // on_time + late
  int64_t on_time = 0;
  int64_t late = 0;
  int64_t dropped = 0;
  int64_t rejected = 0;
  int64_t below_min_accuracy = 0;  // completed on a variant below the query's minimum
  double accuracy_sum = 0;         // over completed queries

  int64_t violations() const { return late + dropped + rejected; }
  int64_t resolved() const { return completed + dropped + rejected; }
};

// A log-linear histogram (64 sub-buckets per power of two: under 1.6%
// relative error) of non-negative durations in nanoseconds.
class LatencyHistogram {
 public:
  LatencyHistogram() : buckets_(kBuckets, 0) {}
  void Record(Nanos v) {
    if (v < 0) v = 0;
    ++buckets_[Index(v)];
    ++count_;
    if (v > max_) max_ = v;
  }
  int64_t count() const { return count_; }
  Nanos max() const { return max_; }
  // The value below which `p` percent of the samples lie (bucket midpoint);
  // 0 when empty.
  Nanos Percentile(double p) const;

 private:
  static constexpr int kSubBits = 6;
  static constexpr int kSub = 1 << kSubBits;
  static constexpr int kBuckets = (63 - kSubBits + 1) * kSub;
  static int Index(Nanos v);
  static Nanos LowerBound(int index);

  std::vector<int64_t> buckets_;
  int64_t count_ = 0;
  Nanos max_ = 0;
};

struct SimMetrics {
  Counters total;
  std::vector<Counters> per_app;
  std::vector<Counters> per_second;  // index = simulated second
  LatencyHistogram latency;          // of completed queries, arrival to finish
  std::vector<LatencyHistogram> latency_per_app;
  int64_t batches = 0;
  int64_t batch_rows = 0;
  int64_t policy_decisions = 0;
  // The burst pool's (BurstPool): queries it served, of those started
  // cold, and what it was paid.
  int64_t burst_requests = 0;
  int64_t burst_cold_starts = 0;
  double burst_cost = 0;
  // The Bouncer's estimates against the answers of the queries it admitted
  // on one (with the burst pool on).
  policy::EstimateTally bouncer;
  Nanos end_time = 0;  // when the last query arrived or was answered
};

}  // namespace maitre::sim
