#include "policy/job_throttle.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace maitre::policy {

ThrottleSignals MeasureThrottleSignals(const std::vector<ThrottleWorker>& workers,
                                       const ThrottlePolicy& policy) {
  ThrottleSignals s;
  double cores = 0, busy = 0, own_busy = 0;
  for (const ThrottleWorker& w : workers) {
    const double utilisation = std::clamp(w.utilisation, 0.0, 1.0);
    const double own_share = std::min(utilisation, std::max(0.0, w.own_busy));
    const double weight = std::max(1, w.cores);
    cores += weight;
    busy += weight * utilisation;
    own_busy += weight * own_share;

    bool serves_online = false;
    for (const ThrottleInstance& inst : w.instances) {
      const double online = inst.arrival_qps - inst.own_qps;
      if (online <= policy.min_online_qps + policy.own_qps_tolerance * inst.own_qps) continue;
      serves_online = true;
      s.online_qps += online;
      if (inst.state == InstanceState::kOverloaded || inst.state == InstanceState::kInterfered) {
        if (s.slow_online_instances++ == 0) {
          s.slow_instance = absl::StrFormat("%s on %s is %s, with %.0f qps of online traffic",
                                            inst.name, w.id, InstanceStateName(inst.state),
                                            online);
        }
      }
    }
    const double online_utilisation = utilisation - own_share;
    if (serves_online &&
        (s.busiest_worker.empty() || online_utilisation > s.busiest_online_utilisation)) {
      s.busiest_worker = w.id;
      s.busiest_online_utilisation = online_utilisation;
    }
  }
  if (cores > 0) {
    s.utilisation = busy / cores;
    s.own_utilisation = own_busy / cores;
  }
  return s;
}

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
