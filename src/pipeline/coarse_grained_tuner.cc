#include "pipeline/coarse_grained_tuner.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"

namespace maitre::pipeline {

absl::StatusOr<CoarseGrainedTuner> CoarseGrainedTuner::Create(
    const CoarseGrainedTunerOptions& options, int32_t units) {
  if (!(options.packing_factor > 0) || !std::isfinite(options.packing_factor)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the packing factor must be a positive number of queries, not %g",
        options.packing_factor));
  }
  if (options.min_units < 1 || options.max_units < options.min_units || units < options.min_units ||
      units > options.max_units) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "units must satisfy 1 <= min_units (%d) <= units (%d) <= max_units (%d)",
        options.min_units, units, options.max_units));
  }
  if (options.idle_before_removal < 0) {
    return absl::InvalidArgumentError("idle_before_removal must not be negative");
  }
  return CoarseGrainedTuner(options, units);
}

CoarseGrainedTuner::CoarseGrainedTuner(const CoarseGrainedTunerOptions& options, int32_t units)
    : options_(options), units_(units), unneeded_since_(units, -1) {}

int32_t CoarseGrainedTuner::Decide(Nanos now, int64_t in_system) {
  const double wanted = std::ceil(static_cast<double>(std::max<int64_t>(in_system, 0)) /
                                  options_.packing_factor);
  const int32_t needed = static_cast<int32_t>(std::clamp<double>(
      wanted, options_.min_units, options_.max_units));
  if (needed > units_) {
    units_ = needed;
    unneeded_since_.assign(units_, -1);  // every unit is busy
    return units_;
  }
  for (int32_t i = 0; i < units_; ++i) {
    if (i < needed) {
      unneeded_since_[i] = -1;
    } else if (unneeded_since_[i] < 0) {
      unneeded_since_[i] = now;
    }
  }
  while (units_ > needed && now - unneeded_since_[units_ - 1] >= options_.idle_before_removal) {
    --units_;
  }
  unneeded_since_.resize(units_);
  return units_;
}

}  // namespace maitre::pipeline
