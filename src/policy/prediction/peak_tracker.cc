#include "policy/prediction/peak_tracker.h"

#include <algorithm>

namespace maitre::policy {

void UnitPeakTracker::CloseSample() {
  if (sample_readings_ > 0) {
    unit_peak_ = std::max(unit_peak_, sample_sum_ / static_cast<double>(sample_readings_));
  }
  sample_sum_ = 0;
  sample_readings_ = 0;
}

void UnitPeakTracker::Add(Nanos at, double qps) {
  if (!started_) {
    started_ = true;
    origin_ = at;
    last_ = at;
  }
  if (at < last_) return;
  last_ = at;
  const int64_t sample = (at - origin_) / windows_.sample;
  if (sample != sample_) {
    CloseSample();
    sample_ = sample;
  }
  const int64_t unit = (at - origin_) / windows_.unit;
  while (unit_ < unit) {
    peaks_.push_back(unit_peak_);
    unit_peak_ = 0;
    ++unit_;
  }
  sample_sum_ += std::max(0.0, qps);
  ++sample_readings_;
}

double UnitPeakTracker::current_peak() const {
  const double open = sample_readings_ > 0 ? sample_sum_ / static_cast<double>(sample_readings_)
                                           : 0.0;
  return std::max(unit_peak_, open);
}

}  // namespace maitre::policy
