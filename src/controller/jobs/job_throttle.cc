#include "controller/jobs/job_throttle.h"

namespace maitre::jobs {

ThrottleSignals MeasureThrottleSignals(const std::vector<controller::WorkerView>& workers,
                                       const OwnLoad& own, const ThrottlePolicy& policy) {
  std::vector<policy::ThrottleWorker> seen;
  for (const controller::WorkerView& w : workers) {
    policy::ThrottleWorker t;
    t.id = w.id;
    t.cores = w.type.cores;
    t.utilisation = w.cpu_utilisation;
    auto mine = own.busy_by_worker.find(w.id);
    t.own_busy = mine == own.busy_by_worker.end() ? 0.0 : mine->second;
    for (const controller::InstanceView& inst : w.instances) {
      if (inst.phase != controller::InstancePhase::kReady) continue;
      auto it = own.qps_by_instance.find({w.id, inst.key});
      t.instances.push_back({inst.key.ToString(), inst.stats.arrival_qps,
                             it == own.qps_by_instance.end() ? 0 : it->second, inst.state});
    }
    seen.push_back(std::move(t));
  }
  return policy::MeasureThrottleSignals(seen, policy);
}

}  // namespace maitre::jobs
