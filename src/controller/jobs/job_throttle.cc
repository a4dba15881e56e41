#include "controller/jobs/job_throttle.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace maitre::jobs {

ThrottleSignals MeasureThrottleSignals(const std::vector<controller::WorkerView>& workers,
                                       const OwnLoad& own, const ThrottlePolicy& policy) {
  ThrottleSignals s;
  double cores = 0, busy = 0, own_busy = 0;
  for (const controller::WorkerView& w : workers) {
    const double utilisation = std::clamp(w.cpu_utilisation, 0.0, 1.0);
    auto mine = own.busy_by_worker.find(w.id);
    const double own_share =
        std::min(utilisation, mine == own.busy_by_worker.end() ? 0.0 : std::max(0.0, mine->second));
    const double weight = std::max(1, w.type.cores);
    cores += weight;
    busy += weight * utilisation;
    own_busy += weight * own_share;

    bool serves_online = false;
    for (const controller::InstanceView& inst : w.instances) {
      if (inst.phase != controller::InstancePhase::kReady) continue;
      auto it = own.qps_by_instance.find({w.id, inst.key});
      const double own_qps = it == own.qps_by_instance.end() ? 0 : it->second;
      const double online = inst.stats.arrival_qps - own_qps;
      if (online <= policy.min_online_qps + policy.own_qps_tolerance * own_qps) continue;
      serves_online = true;
      s.online_qps += online;
      if (inst.state == policy::InstanceState::kOverloaded ||
          inst.state == policy::InstanceState::kInterfered) {
        if (s.slow_online_instances++ == 0) {
          s.slow_instance = absl::StrFormat("%s on %s is %s, with %.0f qps of online traffic",
                                            inst.key.ToString(), w.id,
                                            policy::InstanceStateName(inst.state), online);
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

}  // namespace maitre::jobs
