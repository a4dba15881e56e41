// The dynamic half of variant selection: the live workers and instances a
// decision reads, kept with the small indexes that make a decision cheap:
// per-app and per-variant instance lists, per-worker instance lists, and
// per-type workers ordered by utilisation.
//
// The controller owns one LiveState and keeps it in step with the cluster:
//  - a worker registers        → AddWorker; it is lost → RemoveWorker
//    (its instances go with it);
//  - a worker reports          → UpdateWorker (utilisation, free memory) and,
//    per instance, UpdateInstanceLoad (mean batch, replicas, served and
//    offered rates, batching cap) and
//    SetState with the state machine's result (instance_state.h);
//  - it asks for a load        → AddInstance in state kInactive with the
//    expected ready_at, and UpdateWorker with the variant's memory taken out
//    of free memory, so the next decision does not place a second load into
//    the same room; the load completes → SetState(kActive); it fails or
//    the instance is unloaded → RemoveInstance;
//  - a query is sent to an instance → Sent (one more waiting there, its
//    work added to its worker's recent work); it is answered or fails →
//    AddWaiting(-1). Reports do not reset this count: it is the
//    controller's own queries in flight, which is what selection must see
//    between reports (a report is up to a second old);
//  - an answer comes back with its compute time → SetSlowdown
//    (NextSlowdown), how much slower than its profile the instance runs;
//  - the selection index is rebuilt → Sync(new index) before the next
//    decision uses it; it drops instances whose variant is gone.
// Ids of removed workers and instances are reused by later Add calls.
//
// Thread-safety: not synchronised. The controller mutates and reads it
// under one lock (the dispatcher holds it for a decision, a few hundred
// nanoseconds), or keeps one per dispatcher thread.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/time.h"
#include "policy/instance_state.h"
#include "policy/selection_index.h"

namespace maitre::policy {

using WorkerId = int32_t;
using InstanceId = int32_t;

struct LiveWorker {
  WorkerTypeId type = kNoId;
  double utilisation = 0;     // 0..1, from the worker's last report
  double free_memory_mb = 0;  // less what loads in progress will take
  bool accepting = true;      // false while draining: no new queries or loads
  // The work sent to its instances lately, as of `recent_at`: each query
  // adds the seconds its instance's profile takes per query at its mean
  // batch, and the sum decays with time constant kRecentSentTau
  // (LiveState::Sent). Unlike the reports, it moves with every query sent.
  double recent_busy_s = 0;
  Nanos recent_at = 0;
};

struct LiveInstance {
  VariantId variant = kNoId;
  WorkerId worker = kNoId;
  InstanceState state = InstanceState::kInactive;
  // kInactive: when its load is expected to finish (the request time plus
  // the profile's load_ms). Queries may be sent to a loading instance and
  // wait at its worker.
  Nanos ready_at = 0;
  int32_t waiting = 0;    // queries sent to it and not yet answered
  double mean_batch = 1;  // rows per batch from reports; values below 1 read as 1
  // The most rows the instance puts in one batch (its worker's batching
  // cap, from reports); 0: not reported, the profile's largest batch.
  int32_t max_batch = 0;
  int32_t replicas = 1;   // values below 1 read as 1
  double served_qps = 0;
  double arrival_qps = 0;  // offered to it over the last report (0: unknown)
  // How much slower than its profile it computes lately: a moving mean of
  // each answer's compute time over the profile's LatencyAt(its batch)
  // (NextSlowdown). 0: unknown, nothing answered yet. It stays put while the
  // instance serves nothing, so an Interfered instance that selection passes
  // over keeps the speed it was last seen at.
  double slowdown = 0;
};

// The moving mean behind LiveInstance::slowdown after `answers` more
// answers, each computed in `compute_ms` where the profile says
// `profiled_ms` for its batch. Each answer moves it an eighth of the way:
// a few hundred answers a second follow a change within tens of
// milliseconds, and one slow batch moves it little. An unknown mean (0)
// starts from 1, the profile's speed. The ratio is clamped to [0.5, 20] so
// that a timer's hiccup or a cached batch cannot throw it far.
inline double NextSlowdown(double previous, double compute_ms, double profiled_ms,
                           int answers = 1) {
  const double from = previous > 0 ? previous : 1.0;
  if (!(profiled_ms > 0) || !(compute_ms > 0) || answers <= 0) return from;
  const double ratio = std::clamp(compute_ms / profiled_ms, 0.5, 20.0);
  return from + (ratio - from) * (1 - std::pow(7.0 / 8.0, answers));
}

// How fast a sent query stops counting as recent load: a couple of report
// intervals, so that the live sum carries what the last report cannot yet
// show.
inline constexpr Nanos kRecentSentTau = kSecond;

// The worker's recent work decayed to `now`; forgotten (0) ten time
// constants after the last query, so that idle workers tie again and the
// reports decide.
inline double RecentBusySeconds(const LiveWorker& worker, Nanos now) {
  if (worker.recent_busy_s <= 0 || now <= worker.recent_at) return worker.recent_busy_s;
  const Nanos age = now - worker.recent_at;
  if (age >= 10 * kRecentSentTau) return 0;
  return worker.recent_busy_s * std::exp(-ToSeconds(age) / ToSeconds(kRecentSentTau));
}

class LiveState {
 public:
  LiveState() = default;

  // Workers. `worker.type` must be a worker type id of the current index.
  WorkerId AddWorker(const LiveWorker& worker);
  void UpdateWorker(WorkerId id, double utilisation, double free_memory_mb);
  void SetAccepting(WorkerId id, bool accepting);
  void RemoveWorker(WorkerId id);

  // Instances. Fails when the variant is not present in `index` or the
  // worker is unknown. At most one instance per (variant, worker): a second
  // replica on the same worker is that instance's `replicas`.
  absl::StatusOr<InstanceId> AddInstance(const SelectionIndex& index, const LiveInstance& instance);
  void RemoveInstance(InstanceId id);
  void SetState(InstanceId id, InstanceState state);
  void SetReadyAt(InstanceId id, Nanos ready_at);
  void UpdateInstanceLoad(InstanceId id, double mean_batch, int32_t replicas, double served_qps,
                          double arrival_qps, int32_t max_batch);
  void SetWaiting(InstanceId id, int32_t waiting);
  void SetSlowdown(InstanceId id, double slowdown);  // LiveInstance::slowdown
  void AddWaiting(InstanceId id, int32_t delta);  // never goes below 0
  // A query was sent to the instance at `now`: one more waiting there, and
  // its work (by `index`'s profile of the instance's option) added to its
  // worker's recent work.
  void Sent(const SelectionIndex& index, InstanceId id, Nanos now);

  // A plan's query assignment (Proteus's y_{d,q}; selection_weighted.h
  // routes by it): a weight for the variant on a worker, replacing every
  // earlier weight. Unknown workers are skipped; a worker removed loses
  // its weights; an instance loaded later picks its weight up.
  struct RouteWeight {
    WorkerId worker = kNoId;
    VariantId variant = kNoId;
    double weight = 0;
  };
  void SetRouteWeights(const std::vector<RouteWeight>& weights);
  // The weight of the instance's (worker, variant); 0 when it has none.
  double route_weight(InstanceId id) const {
    return has_instance(id) ? instances_[id].route_weight : 0;
  }

  // After an index rebuild: removes the instances whose variant the new
  // index no longer has and returns their ids (the controller unloads them).
  std::vector<InstanceId> Sync(const SelectionIndex& index);

  // Read side: what the policy uses.
  bool has_worker(WorkerId id) const {
    return id >= 0 && id < static_cast<WorkerId>(workers_.size()) && workers_[id].used;
  }
  bool has_instance(InstanceId id) const {
    return id >= 0 && id < static_cast<InstanceId>(instances_.size()) && instances_[id].used;
  }
  const LiveWorker& worker(WorkerId id) const { return workers_[id].live; }
  const LiveInstance& instance(InstanceId id) const { return instances_[id].live; }
  AppId instance_app(InstanceId id) const { return instances_[id].app; }
  ModelId instance_model(InstanceId id) const { return instances_[id].model; }
  // Id ranges, for scans over every slot (the brute-force reference).
  int32_t worker_slots() const { return static_cast<int32_t>(workers_.size()); }
  int32_t instance_slots() const { return static_cast<int32_t>(instances_.size()); }

  // Unordered lists; empty for unknown ids.
  absl::Span<const InstanceId> instances_of_app(AppId app) const { return ListAt(by_app_, app); }
  absl::Span<const InstanceId> instances_of_variant(VariantId v) const {
    return ListAt(by_variant_, v);
  }
  absl::Span<const InstanceId> instances_on_worker(WorkerId id) const {
    return has_worker(id) ? absl::Span<const InstanceId>(workers_[id].instances)
                          : absl::Span<const InstanceId>();
  }
  // The type's workers (accepting or not) by utilisation, then id, ascending.
  absl::Span<const WorkerId> workers_by_utilisation(WorkerTypeId type) const {
    return ListAt(by_type_, type);
  }
  // The largest free memory among the type's accepting workers; -1 if none.
  double max_free_memory(WorkerTypeId type) const {
    return type >= 0 && type < static_cast<WorkerTypeId>(max_free_.size()) ? max_free_[type] : -1;
  }
  // Selection's step 1 measure of how loaded a worker is now: the work
  // sent to its instances lately (RecentBusySeconds) per replica they run
  // at once (no more than its type's cores in `index`).
  // The least-utilised worker by its last report alone is the same worker
  // for a whole report interval, so every query went to it and the next
  // report turned them all to the other: on the 2-core host, at 2,500 qps
  // to two equal workers, the reports said 1,760 and 0 qps, or 800 and
  // 2,500, and the autoscaler judged the model's load by their sum.
  // Weighing a recent count by the report's free share herded too, more
  // slowly (the report's utilisation is mostly the worker's own queries,
  // counted again a report late); counting per instance sent two thirds of
  // the queries to the worker that held two variants of the model; and
  // counting queries per core, not their work per replica, sent a CPU
  // engine with one replica on eight cores eight times its share
  // (docs/policies.md, "Variant selection", step 1).
  double RecentLoad(const SelectionIndex& index, WorkerId id, Nanos now) const;
  // Whether `worker` holds an instance of `variant` (in any state).
  bool Hosts(WorkerId worker, VariantId variant) const;

 private:
  struct InstanceSlot {
    LiveInstance live;
    AppId app = kNoId;
    ModelId model = kNoId;
    bool used = false;
    // Its (worker, variant)'s entry in route_weights_, kept here so that
    // routing reads it without a lookup.
    double route_weight = 0;
  };
  struct WorkerSlot {
    LiveWorker live;
    bool used = false;
    std::vector<InstanceId> instances;
  };

  template <typename T>
  static absl::Span<const T> ListAt(const std::vector<std::vector<T>>& lists, int32_t id) {
    return id >= 0 && id < static_cast<int32_t>(lists.size()) ? absl::Span<const T>(lists[id])
                                                              : absl::Span<const T>();
  }
  // Moves `id` to its place in its type's utilisation order.
  void Reposition(WorkerId id);
  void RecomputeMaxFree(WorkerTypeId type);

  std::vector<InstanceSlot> instances_;
  std::vector<InstanceId> free_instances_;
  std::vector<WorkerSlot> workers_;
  std::vector<WorkerId> free_workers_;
  std::vector<std::vector<InstanceId>> by_app_;
  std::vector<std::vector<InstanceId>> by_variant_;
  std::vector<std::vector<WorkerId>> by_type_;
  std::vector<double> max_free_;
  double RouteWeightOf(WorkerId worker, VariantId variant) const;

  std::map<std::pair<WorkerId, VariantId>, double> route_weights_;
};

}  // namespace maitre::policy
