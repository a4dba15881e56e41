#include "policy/selection_live.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

namespace maitre::policy {
namespace {

template <typename T>
void EraseValue(std::vector<T>& list, T value) {
  auto it = std::find(list.begin(), list.end(), value);
  if (it == list.end()) return;
  *it = list.back();
  list.pop_back();
}

template <typename T>
std::vector<T>& Grow(std::vector<std::vector<T>>& lists, int32_t id) {
  if (id >= static_cast<int32_t>(lists.size())) lists.resize(id + 1);
  return lists[id];
}

}  // namespace

WorkerId LiveState::AddWorker(const LiveWorker& worker) {
  WorkerId id;
  if (!free_workers_.empty()) {
    id = free_workers_.back();
    free_workers_.pop_back();
  } else {
    id = static_cast<WorkerId>(workers_.size());
    workers_.emplace_back();
  }
  WorkerSlot& slot = workers_[id];
  slot.live = worker;
  slot.used = true;
  slot.instances.clear();
  if (worker.type >= 0) {
    Grow(by_type_, worker.type).push_back(id);
    if (worker.type >= static_cast<WorkerTypeId>(max_free_.size())) {
      max_free_.resize(worker.type + 1, -1);
    }
    Reposition(id);
    RecomputeMaxFree(worker.type);
  }
  return id;
}

void LiveState::UpdateWorker(WorkerId id, double utilisation, double free_memory_mb) {
  if (!has_worker(id)) return;
  LiveWorker& w = workers_[id].live;
  w.utilisation = utilisation;
  w.free_memory_mb = free_memory_mb;
  if (w.type < 0) return;
  Reposition(id);
  RecomputeMaxFree(w.type);
}

void LiveState::SetAccepting(WorkerId id, bool accepting) {
  if (!has_worker(id)) return;
  workers_[id].live.accepting = accepting;
  if (workers_[id].live.type >= 0) RecomputeMaxFree(workers_[id].live.type);
}

void LiveState::SetRouteWeights(const std::vector<RouteWeight>& weights) {
  route_weights_.clear();
  for (const RouteWeight& w : weights) {
    if (has_worker(w.worker) && w.weight > 0) route_weights_[{w.worker, w.variant}] += w.weight;
  }
  for (InstanceSlot& slot : instances_) {
    if (slot.used) slot.route_weight = RouteWeightOf(slot.live.worker, slot.live.variant);
  }
}

double LiveState::RouteWeightOf(WorkerId worker, VariantId variant) const {
  auto it = route_weights_.find({worker, variant});
  return it == route_weights_.end() ? 0 : it->second;
}

void LiveState::RemoveWorker(WorkerId id) {
  if (!has_worker(id)) return;
  for (auto it = route_weights_.lower_bound({id, kNoId});
       it != route_weights_.end() && it->first.first == id;) {
    it = route_weights_.erase(it);
  }
  std::vector<InstanceId> instances = workers_[id].instances;
  for (InstanceId i : instances) RemoveInstance(i);
  WorkerSlot& slot = workers_[id];
  WorkerTypeId type = slot.live.type;
  slot.used = false;
  slot.instances.clear();
  free_workers_.push_back(id);
  if (type >= 0) {
    EraseValue(by_type_[type], id);
    // Erasing swapped the last worker into the hole; restore the order.
    std::sort(by_type_[type].begin(), by_type_[type].end(), [this](WorkerId a, WorkerId b) {
      const double ua = workers_[a].live.utilisation, ub = workers_[b].live.utilisation;
      return ua != ub ? ua < ub : a < b;
    });
    RecomputeMaxFree(type);
  }
}

void LiveState::Reposition(WorkerId id) {
  std::vector<WorkerId>& list = by_type_[workers_[id].live.type];
  auto before = [this](WorkerId a, WorkerId b) {
    const double ua = workers_[a].live.utilisation, ub = workers_[b].live.utilisation;
    return ua != ub ? ua < ub : a < b;
  };
  auto it = std::find(list.begin(), list.end(), id);
  // One element moved in an otherwise sorted list: shift it left or right.
  while (it != list.begin() && before(*it, *(it - 1))) {
    std::iter_swap(it, it - 1);
    --it;
  }
  while (it + 1 != list.end() && before(*(it + 1), *it)) {
    std::iter_swap(it, it + 1);
    ++it;
  }
}

void LiveState::RecomputeMaxFree(WorkerTypeId type) {
  double best = -1;
  for (WorkerId w : by_type_[type]) {
    const LiveWorker& live = workers_[w].live;
    if (live.accepting) best = std::max(best, live.free_memory_mb);
  }
  max_free_[type] = best;
}

bool LiveState::Hosts(WorkerId worker, VariantId variant) const {
  if (!has_worker(worker)) return false;
  for (InstanceId i : workers_[worker].instances) {
    if (instances_[i].live.variant == variant) return true;
  }
  return false;
}

absl::StatusOr<InstanceId> LiveState::AddInstance(const SelectionIndex& index,
                                                  const LiveInstance& instance) {
  if (instance.variant < 0 || instance.variant >= static_cast<VariantId>(index.variants().size()) ||
      !index.variant(instance.variant).present) {
    return absl::InvalidArgumentError(
        absl::StrCat("variant id ", instance.variant, " is not in the selection index"));
  }
  if (!has_worker(instance.worker)) {
    return absl::InvalidArgumentError(absl::StrCat("unknown worker id ", instance.worker));
  }
  if (Hosts(instance.worker, instance.variant)) {
    return absl::AlreadyExistsError(absl::StrCat("worker ", instance.worker, " already holds ",
                                                 index.variant(instance.variant).key.ToString()));
  }
  InstanceId id;
  if (!free_instances_.empty()) {
    id = free_instances_.back();
    free_instances_.pop_back();
  } else {
    id = static_cast<InstanceId>(instances_.size());
    instances_.emplace_back();
  }
  InstanceSlot& slot = instances_[id];
  slot.live = instance;
  slot.app = index.variant(instance.variant).app;
  slot.model = index.variant(instance.variant).model;
  slot.used = true;
  slot.route_weight = RouteWeightOf(instance.worker, instance.variant);
  Grow(by_app_, slot.app).push_back(id);
  Grow(by_variant_, instance.variant).push_back(id);
  workers_[instance.worker].instances.push_back(id);
  return id;
}

void LiveState::RemoveInstance(InstanceId id) {
  if (!has_instance(id)) return;
  InstanceSlot& slot = instances_[id];
  EraseValue(by_app_[slot.app], id);
  EraseValue(by_variant_[slot.live.variant], id);
  if (has_worker(slot.live.worker)) EraseValue(workers_[slot.live.worker].instances, id);
  slot.used = false;
  free_instances_.push_back(id);
}

void LiveState::SetState(InstanceId id, InstanceState state) {
  if (has_instance(id)) instances_[id].live.state = state;
}

void LiveState::SetReadyAt(InstanceId id, Nanos ready_at) {
  if (has_instance(id)) instances_[id].live.ready_at = ready_at;
}

void LiveState::UpdateInstanceLoad(InstanceId id, double mean_batch, int32_t replicas,
                                   double served_qps, double arrival_qps, int32_t max_batch) {
  if (!has_instance(id)) return;
  LiveInstance& live = instances_[id].live;
  live.mean_batch = mean_batch;
  live.max_batch = std::max(0, max_batch);
  live.replicas = replicas;
  live.served_qps = served_qps;
  live.arrival_qps = arrival_qps;
}

void LiveState::SetWaiting(InstanceId id, int32_t waiting) {
  if (has_instance(id)) instances_[id].live.waiting = std::max(0, waiting);
}

void LiveState::SetSlowdown(InstanceId id, double slowdown) {
  if (has_instance(id)) instances_[id].live.slowdown = std::max(0.0, slowdown);
}

void LiveState::AddWaiting(InstanceId id, int32_t delta) {
  if (has_instance(id)) {
    LiveInstance& live = instances_[id].live;
    live.waiting = std::max(0, live.waiting + delta);
  }
}

void LiveState::Sent(const SelectionIndex& index, InstanceId id, Nanos now) {
  if (!has_instance(id)) return;
  LiveInstance& live = instances_[id].live;
  ++live.waiting;
  if (!has_worker(live.worker)) return;
  LiveWorker& worker = workers_[live.worker].live;
  const OptionId option = index.FindOption(live.variant, worker.type);
  if (option == kNoId) return;
  const int batch = static_cast<int>(std::lround(std::max(1.0, live.mean_batch)));
  const double seconds = index.option(option).profile.LatencyAt(batch) / 1000.0 / batch;
  worker.recent_busy_s = RecentBusySeconds(worker, now) + seconds;
  worker.recent_at = now;
}

double LiveState::RecentLoad(const SelectionIndex& index, WorkerId id, Nanos now) const {
  if (!has_worker(id)) return 0;
  const LiveWorker& worker = workers_[id].live;
  int32_t replicas = 0;
  for (InstanceId i : workers_[id].instances) replicas += std::max(1, instances_[i].live.replicas);
  const int32_t cores = worker.type >= 0 ? index.type(worker.type).type.cores : 1;
  return RecentBusySeconds(worker, now) / std::max(1, std::min(replicas, cores));
}

std::vector<InstanceId> LiveState::Sync(const SelectionIndex& index) {
  std::vector<InstanceId> gone;
  for (InstanceId id = 0; id < instance_slots(); ++id) {
    if (!instances_[id].used) continue;
    const VariantId v = instances_[id].live.variant;
    // A variant keeps its id (and so its app and model) while it exists.
    if (v >= static_cast<VariantId>(index.variants().size()) || !index.variant(v).present) {
      gone.push_back(id);
    }
  }
  for (InstanceId id : gone) RemoveInstance(id);
  return gone;
}

}  // namespace maitre::policy
