#include "controller/dataplane/backlog_shedder.h"

#include <algorithm>

namespace maitre::controller {

bool BacklogShedder::ShouldShed(Nanos waited, Nanos now) {
  if (options_.target <= 0) return false;
  absl::MutexLock lock(&mu_);
  if (now >= interval_end_) {
    // A whole interval with no query in it says nothing was queued.
    const bool idle_between = now >= interval_end_ + options_.interval;
    // While shedding, the smallest wait says nothing (shedding is what
    // keeps it short), so shedding goes on for as long as queries still
    // arrive past the target.
    const Nanos judged = standing_ ? interval_max_ : interval_min_;
    standing_ = !idle_between && interval_seen_ && judged > options_.target;
    interval_seen_ = false;
    interval_end_ = now + options_.interval;
  }
  interval_min_ = interval_seen_ ? std::min(interval_min_, waited) : waited;
  interval_max_ = interval_seen_ ? std::max(interval_max_, waited) : waited;
  interval_seen_ = true;
  return standing_ && waited > options_.target;
}

bool BacklogShedder::standing(Nanos now) const {
  absl::MutexLock lock(&mu_);
  return standing_ && now < interval_end_ + options_.interval;
}

}  // namespace maitre::controller
