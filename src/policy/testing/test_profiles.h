// Profiles for policy and simulator tests.
//
// Thread-safety: pure functions.
#pragma once

#include <vector>

#include "core/profile.h"

namespace maitre::policy::testing {

// p50(b) = fixed_ms + per_row_ms·b and p99 = p99_factor·p50, measured at
// batches 1, 2, 4, ... up to max_measured (the shape of a CNN on a CPU core).
inline Profile LinearProfile(double fixed_ms, double per_row_ms, double p99_factor = 1.1,
                             int max_measured = 32) {
  std::vector<LatencyPoint> points;
  for (int b = 1; b <= max_measured; b *= 2) {
    double p50 = fixed_ms + per_row_ms * b;
    points.push_back({b, p50, p50 * p99_factor});
  }
  return *Profile::Create(std::move(points), 0, 0);
}

}  // namespace maitre::policy::testing
