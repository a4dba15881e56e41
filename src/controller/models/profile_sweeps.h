// When a profile measured in sweeps is final (VariantPipeline).
//
// This host runs ~1.5x slow for stretches of ~10 s to over a minute. Each
// sweep over the batch sizes is folded into the profile with
// Profile::FastestOf, so the profile is only as good as its fastest sweep;
// a fixed number of sweeps still ended on a slow stretch now and then (two
// profilings of the wide CNN on cpu-1: sweeps 0.206, 0.153, 0.232 ms at
// batch 1 in one, 0.230, 0.264, 0.153 in the other). So a profile is final
// once it has its minimum of sweeps and the latest one came out within
// `agree_within` of the fastest before it at batch 1: the fastest has been
// seen twice, not once by luck. It is final anyway at its maximum, or once
// `settle_within` has passed since its first sweep, whichever comes first:
// on a host kept busy by other work, sweeps seldom agree and each one takes
// longer, and a profile must still become final in a bounded time.
#pragma once

#include "core/profile.h"
#include "core/time.h"

namespace maitre::controller {

struct SweepRule {
  int min_sweeps = 3;
  int max_sweeps = 6;
  double agree_within = 0.10;  // relative, at batch 1
  // The longest a profile refines after its first sweep.
  Nanos settle_within = 10 * 60 * kSecond;

  // A rule of `sweeps` to 2 x `sweeps`; one sweep is one sweep.
  static SweepRule ForMinimum(int sweeps);

  // Sweeps left after the first sweep.
  int SweepsLeftAfterFirst() const;
  // Sweeps left after sweep number `sweep` (2, 3, ...), measured as `latest`,
  // was folded into `fastest_before`, the profile of the sweeps before it.
  int SweepsLeftAfter(int sweep, const Profile& fastest_before, const Profile& latest) const;
  // Whether a profile first swept `since_first` ago is final whatever its
  // sweeps said.
  bool OutOfTime(Nanos since_first) const { return since_first >= settle_within; }
};

}  // namespace maitre::controller
