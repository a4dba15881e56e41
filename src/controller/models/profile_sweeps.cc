#include "controller/models/profile_sweeps.h"

#include <algorithm>
#include <cmath>

namespace maitre::controller {

SweepRule SweepRule::ForMinimum(int sweeps) {
  SweepRule rule;
  rule.min_sweeps = std::max(1, sweeps);
  rule.max_sweeps = rule.min_sweeps == 1 ? 1 : 2 * rule.min_sweeps;
  return rule;
}

int SweepRule::SweepsLeftAfterFirst() const { return std::max(1, max_sweeps) - 1; }

int SweepRule::SweepsLeftAfter(int sweep, const Profile& fastest_before,
                               const Profile& latest) const {
  if (sweep >= max_sweeps) return 0;
  const double before = fastest_before.LatencyAt(1);
  const bool agrees =
      before > 0 && std::abs(latest.LatencyAt(1) - before) <= agree_within * before;
  return sweep >= min_sweeps && agrees ? 0 : max_sweeps - sweep;
}

}  // namespace maitre::controller
