// The coarse-grained baselines' tuning (InferLine §6: "the scaling
// algorithm introduced in [12]", AutoScale, Gandhi et al., TOCS 2012;
// docs/pipelines.md, "Baselines"). The pipeline is one black box, scaled in
// whole units (one replica of every stage), by what is in the system rather
// than by the arrival rate:
//
//  - Scaling up: a unit holds at most `packing_factor` queries and still
//    answers them within the objective, so n queries in the pipeline need
//    ceil(n / packing_factor) units; when that exceeds the units running,
//    units are added at once, up to it.
//  - Scaling down: AutoScale's delayed off. Queries are packed onto the
//    lowest-numbered units, so the units above what the load needs are the
//    idle ones; the highest is removed once it has gone unneeded for
//    `idle_before_removal` (AutoScale's t_wait) without a break, then the
//    next, and so on.
//
// It reacts only once queries pile up, which is the point of comparing it
// with InferLine's tuner (§7.2): the envelope sees a rise in the arrival
// rate before any queue forms.
//
// Pure: it sees the pipeline only through its arguments.
//
// Thread-safety: not synchronised; one caller.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/time.h"

namespace maitre::pipeline {

struct CoarseGrainedTunerOptions {
  double packing_factor = 1;  // queries one unit holds within the objective
  // AutoScale's t_wait; its paper sets 120 s, against a server setup time of
  // 260 s (a unit here starts in seconds, but the rule is kept as stated).
  Nanos idle_before_removal = 120 * kSecond;
  int32_t min_units = 1;
  int32_t max_units = 64;
};

class CoarseGrainedTuner {
 public:
  // InvalidArgument for a packing factor that is not positive, or unit
  // bounds that do not hold `units`.
  static absl::StatusOr<CoarseGrainedTuner> Create(const CoarseGrainedTunerOptions& options,
                                                   int32_t units);

  // The units to run from `now` on, with `in_system` queries in the
  // pipeline (arrived and not yet answered). Calls come in time order.
  int32_t Decide(Nanos now, int64_t in_system);

  int32_t units() const { return units_; }

 private:
  CoarseGrainedTuner(const CoarseGrainedTunerOptions& options, int32_t units);

  CoarseGrainedTunerOptions options_;
  int32_t units_;
  // For unit i + 1: since when it has been unneeded, or -1 while it is needed.
  std::vector<Nanos> unneeded_since_;
};

}  // namespace maitre::pipeline
