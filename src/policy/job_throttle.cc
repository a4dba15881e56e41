#include "policy/job_throttle.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace maitre::policy {

ThrottleState NextThrottleState(const ThrottleState& previous, const ThrottleSignals& signals,
                                Nanos now, const ThrottlePolicy& policy) {
  const double online = signals.busiest_worker.empty() ? 0 : signals.busiest_online_utilisation;
  std::string busy;
  if (signals.slow_online_instances > 0) {
    busy = absl::StrCat("online queries are served slower than profiled (", signals.slow_instance,
                        ")");
  } else if (online > policy.pause_above) {
    busy = absl::StrFormat("worker %s is %.0f%% busy with online load (above %.0f%%)",
                           signals.busiest_worker, 100 * online, 100 * policy.pause_above);
  }
  ThrottleState next = previous;
  if (!busy.empty()) {
    next.paused = true;
    next.calm_since = -1;
    next.reason = std::move(busy);
    return next;
  }
  if (!previous.paused) return next;
  if (online > policy.resume_below) {
    next.calm_since = -1;
    return next;
  }
  if (next.calm_since < 0) next.calm_since = now;
  if (now - next.calm_since >= policy.resume_after) return ThrottleState{};
  return next;
}

}  // namespace maitre::policy
