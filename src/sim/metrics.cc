#include "sim/metrics.h"

#include <cmath>

namespace maitre::sim {

int LatencyHistogram::Index(Nanos v) {
  if (v < kSub) return static_cast<int>(v);
  int e = 63 - __builtin_clzll(static_cast<uint64_t>(v));  // 2^e <= v < 2^(e+1), e >= kSubBits
  int mantissa = static_cast<int>(v >> (e - kSubBits));    // in [kSub, 2·kSub)
  return (e - kSubBits + 1) * kSub + mantissa - kSub;
}

Nanos LatencyHistogram::LowerBound(int index) {
  if (index < kSub) return index;
  int e = index / kSub + kSubBits - 1;
  Nanos mantissa = index % kSub + kSub;
  return mantissa << (e - kSubBits);
}

Nanos LatencyHistogram::Percentile(double p) const {
  if (count_ == 0) return 0;
  // The rank of the sample sought, 1-based, nearest-rank method.
  int64_t rank = static_cast<int64_t>(std::ceil(p / 100.0 * static_cast<double>(count_)));
  if (rank < 1) rank = 1;
  if (rank >= count_) return max_;
  int64_t seen = 0;
  for (int i = 0; i < kBuckets; ++i) {
    seen += buckets_[i];
    if (seen >= rank) {
      Nanos lo = LowerBound(i);
      Nanos hi = i + 1 < kBuckets ? LowerBound(i + 1) : lo;
      Nanos mid = lo + (hi - lo) / 2;
      return mid < max_ ? mid : max_;
    }
  }
  return max_;
}

}  // namespace maitre::sim
