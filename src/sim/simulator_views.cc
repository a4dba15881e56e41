// Billing and the read-side views of a simulation (workers, instances, the
// consistency check of the selection policy's live view), for the reports
// and tests.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "sim/selection_router.h"
#include "sim/simulator.h"

namespace maitre::sim {

using policy::InstanceState;

double Simulator::CostRateAt(Nanos t) const {
  double rate = 0;
  for (const Worker& w : workers_) {
    if (w.paid_from <= t && t < w.paid_until) {
      const WorkerType& type = setup_.worker_types[w.type].type;
      // The price of the block in progress (by the second: of the moment).
      const Nanos block = type.billing_unit > 0
                              ? w.paid_from + (t - w.paid_from) / type.billing_unit *
                                                  type.billing_unit
                              : t;
      rate += type.PriceAt(block) / 3600.0;
    }
  }
  return rate;
}

double Simulator::CostBetween(Nanos from, Nanos to) const {
  double cost = 0;
  for (const Worker& w : workers_) {
    cost += setup_.worker_types[w.type].type.CostBetween(w.paid_from, from,
                                                         std::min(to, w.paid_until));
  }
  return cost;
}

std::vector<double> Simulator::WorkerSeconds() const {
  std::vector<double> seconds(setup_.worker_types.size(), 0);
  for (const Worker& w : workers_) {
    const Nanos end = std::min(setup_.horizon, w.paid_until);
    if (end > w.paid_from) seconds[w.type] += ToSeconds(end - w.paid_from);
  }
  return seconds;
}

std::vector<Simulator::WorkerInfo> Simulator::Workers() const {
  std::vector<WorkerInfo> out;
  for (const Worker& w : workers_) {
    out.push_back({w.type, w.up, w.removed, w.paid_from, w.paid_until, w.stops_at,
                   w.queries_under_notice, w.last_query_under_notice});
  }
  return out;
}

std::vector<Simulator::InstanceInfo> Simulator::Instances() const {
  std::vector<InstanceInfo> out;
  for (const SimInstance& inst : instances_) {
    InstanceInfo info;
    info.app = inst.app;
    info.variant = inst.variant;
    info.worker = inst.worker;
    info.alive = inst.alive;
    info.draining = inst.draining;
    info.ready = inst.ready;
    info.loading = inst.loading;
    info.queued = static_cast<int32_t>(inst.queue.size() - inst.head);
    for (int32_t r : inst.replicas) info.running += static_cast<int32_t>(replicas_[r].batch.size());
    info.state = inst.ready > 0 ? inst.history.state : InstanceState::kInactive;
    out.push_back(info);
  }
  return out;
}

absl::Status Simulator::CheckLiveState() const {
  if (selection_ == nullptr) return absl::OkStatus();
  for (size_t w = 0; w < workers_.size(); ++w) {
    // A worker under notice stays registered, not accepting, until it stops.
    const bool serving = workers_[w].up && !workers_[w].removed;
    if (serving != selection_->HasWorker(static_cast<int32_t>(w))) {
      return absl::InternalError(absl::StrCat("worker ", workers_[w].id, " registered: ", !serving,
                                              ", serving: ", serving));
    }
    const policy::WorkerId live = selection_->LiveWorkerOf(static_cast<int32_t>(w));
    if (serving && selection_->live().worker(live).accepting == workers_[w].stops_at.has_value()) {
      return absl::InternalError(absl::StrCat("worker ", workers_[w].id, " accepting: ",
                                              !workers_[w].stops_at.has_value() ? "no" : "yes",
                                              " under notice: ",
                                              workers_[w].stops_at.has_value() ? "yes" : "no"));
    }
  }
  int32_t expected = 0;
  std::vector<InstanceInfo> infos = Instances();
  for (size_t i = 0; i < infos.size(); ++i) {
    const InstanceInfo& info = infos[i];
    const bool selectable = info.alive && !info.draining;
    expected += selectable;
    const policy::LiveInstance* l = selection_->LiveInstanceOf(static_cast<int32_t>(i));
    if ((l != nullptr) != selectable) {
      return absl::InternalError(absl::StrCat("instance ", i, " in the live view: ", l != nullptr,
                                              ", selectable: ", selectable));
    }
    if (l == nullptr) continue;
    if (l->worker != selection_->LiveWorkerOf(info.worker)) {
      return absl::InternalError(absl::StrCat("instance ", i, " is on another worker"));
    }
    if (l->state != info.state) {
      return absl::InternalError(
          absl::StrCat("instance ", i, " is ", policy::InstanceStateName(l->state),
                       " in the live view but ", policy::InstanceStateName(info.state)));
    }
    if (l->waiting != info.queued + info.running) {
      return absl::InternalError(absl::StrCat("instance ", i, " waiting ", l->waiting, " but ",
                                              info.queued + info.running, " queued or running"));
    }
    if (info.ready > 0 && l->replicas != info.ready) {
      return absl::InternalError(
          absl::StrCat("instance ", i, " has ", l->replicas, " replicas, not ", info.ready));
    }
  }
  if (selection_->live_instance_count() != expected) {
    return absl::InternalError(absl::StrCat("the live view holds ",
                                            selection_->live_instance_count(),
                                            " instances, the cluster ", expected));
  }
  return absl::OkStatus();
}

}  // namespace maitre::sim
