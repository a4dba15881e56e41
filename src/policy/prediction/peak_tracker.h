// Unit peaks from a live stream of rate readings (MArk §4.2; docs/policies.md,
// "Workload prediction"): an allocator is shown each app's arrival rate once
// a round, not every arrival, so UnitPeakRates (which counts arrivals) does
// not apply. The tracker averages the readings that fall in each sample
// window of P_s, and a unit's peak is its busiest window's mean: the same
// figure UnitPeakRates gives when each reading is the rate over its round.
// Time starts at the first reading; a unit without readings (the allocator
// was not called) has the peak 0.
//
// Thread-safety: not synchronised; one owner.
#pragma once

#include <cstdint>
#include <vector>

#include "core/time.h"
#include "policy/prediction/workload_prediction.h"

namespace maitre::policy {

class UnitPeakTracker {
 public:
  // `windows` must pass ValidateWindows.
  explicit UnitPeakTracker(const PredictionWindows& windows) : windows_(windows) {}

  // A reading of `qps` at `at`. Readings older than the last one are
  // ignored: a round's clock never runs backwards.
  void Add(Nanos at, double qps);

  // Whether a reading has come, and with it the units' origin.
  bool started() const { return started_; }
  // The peaks of the units that have ended, oldest first.
  const std::vector<double>& peaks() const { return peaks_; }
  // The unit in progress so far: its busiest window, the one still open
  // included (0 before the first reading).
  double current_peak() const;
  // When the unit in progress started (the first reading's time before it).
  Nanos current_unit_start() const { return origin_ + unit_ * windows_.unit; }

 private:
  void CloseSample();

  const PredictionWindows windows_;
  bool started_ = false;
  Nanos origin_ = 0;
  Nanos last_ = 0;
  int64_t unit_ = 0;    // the unit in progress, from the origin
  int64_t sample_ = 0;  // the open sample window, from the origin
  double sample_sum_ = 0;
  int64_t sample_readings_ = 0;
  double unit_peak_ = 0;  // the closed windows of the unit in progress
  std::vector<double> peaks_;
};

}  // namespace maitre::policy
