// The selection policy (policy/selection.h) as the simulator's router for a
// managed cluster. It owns the policy's SelectionIndex, built from the
// experiment's apps, variants and worker types, and a policy::LiveState that
// it keeps in step with the simulated cluster exactly as the real controller
// keeps its own (see the top of policy/selection_live.h and
// controller/dataplane/cluster_selection.cc):
//  - a worker comes up            → AddWorker; it is removed → RemoveWorker;
//  - a worker reports             → UpdateWorker (utilisation, free memory)
//    and, per instance, UpdateInstanceLoad and SetState with the instance
//    state machine's result;
//  - a load is asked for          → AddInstance(kInactive, ready_at =
//    now + load_ms) and UpdateWorker with the memory it will take; the first
//    replica is ready → SetState(kActive); the instance is unloaded →
//    RemoveInstance;
//  - a query is sent to an instance → Sent; answered or dropped →
//    AddWaiting(-1);
//  - an interruption notice        → SetLeaving: the worker stays, not
//    accepting, and the simulator reports it with no room for a load; each
//    query goes through control::RouteBesideLeaving with the leaving
//    workers that still serve it, as the controller's Cluster::RouteLocked
//    does, and the allocator's route weights leave theirs alone.
// The simulator names workers, instances and variants by its own indices;
// this class maps them to the policy's ids.
//
// Thread-safety: not synchronised; owned by one Simulator.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "control/query_router.h"
#include "policy/instance_state.h"
#include "policy/selection.h"
#include "policy/selection_index.h"
#include "policy/selection_live.h"
#include "sim/router.h"

namespace maitre::sim {

struct SimulationSetup;

class SelectionRouter {
 public:
  // What to do with one query.
  struct Route {
    enum class Action { kServe, kReject };
    Action action = Action::kReject;
    int32_t instance = -1;  // kServe: a simulator instance, or -1 when it is the load's
    // A load the policy asked for: `load_variant` (a simulator variant) on
    // simulator worker `load_worker`; -1 when none.
    int32_t load_variant = -1;
    int32_t load_worker = -1;
    policy::SelectionOutcome outcome = policy::SelectionOutcome::kUnsatisfiable;
    policy::LoadRule load_rule = policy::LoadRule::kNone;  // which rule chose the load
  };

  // Builds the index: every app's variants are the variants of its models
  // (SimApp::models) with their profiles on the worker types.
  static absl::StatusOr<std::unique_ptr<SelectionRouter>> Create(const SimulationSetup& setup);

  // `ready` says whether a simulator instance has a ready replica (a query
  // must not wait on a load on a leaving worker).
  Route Decide(const RouteRequest& query, absl::FunctionRef<bool(int32_t instance)> ready);

  // Cluster events, named by simulator indices.
  void AddWorker(int32_t worker, int32_t type, double utilisation, double free_memory_mb);
  void RemoveWorker(int32_t worker);
  // An interruption notice: the worker stops at `stops_at`
  // (control/leaving.h says how it serves until then).
  void SetLeaving(int32_t worker, Nanos stops_at);
  void UpdateWorker(int32_t worker, double utilisation, double free_memory_mb);
  // A load was asked for: the instance is Inactive until `ready_at`.
  absl::Status AddInstance(int32_t instance, int32_t variant, int32_t worker, Nanos ready_at);
  void RemoveInstance(int32_t instance);
  void SetState(int32_t instance, policy::InstanceState state);
  void UpdateInstanceLoad(int32_t instance, double mean_batch, int32_t replicas, double served_qps,
                          double arrival_qps, int32_t max_batch);
  void AddWaiting(int32_t instance, int32_t delta);
  // A batch of `rows` rows ran in `compute` and answered `answers`
  // queries: the instance's measured speed (LiveInstance::slowdown) moves
  // as the controller's does with each answer.
  void Answered(int32_t instance, Nanos compute, int32_t rows, int32_t answers);
  void Sent(int32_t instance, Nanos now);
  // The allocator's query assignment (LiveState::SetRouteWeights), by
  // simulator worker and variant.
  struct RouteWeight {
    int32_t worker = -1;
    int32_t variant = -1;
    double weight = 0;
  };
  void SetRouteWeights(const std::vector<RouteWeight>& weights);

  // Read side, for checks.
  const policy::SelectionIndex& index() const { return index_; }
  const policy::LiveState& live() const { return live_; }
  bool HasWorker(int32_t worker) const;
  bool HasInstance(int32_t instance) const;
  const policy::LiveInstance* LiveInstanceOf(int32_t instance) const;
  // The policy's worker for a simulator worker; kNoId if not registered.
  policy::WorkerId LiveWorkerOf(int32_t worker) const;
  int32_t live_instance_count() const;

 private:
  SelectionRouter() = default;

  policy::SelectionIndex index_;
  policy::LiveState live_;
  std::unique_ptr<const control::QueryRouter> router_;
  Nanos leaving_margin_ = 0;  // ControlSetup::leaving_margin
  struct Leaving {
    int32_t worker = -1;  // a simulator worker
    Nanos stops_at = 0;
  };
  std::vector<Leaving> leaving_;
  std::vector<int32_t> app_ids_;        // simulator app → AppId
  std::vector<int32_t> type_ids_;       // simulator worker type → WorkerTypeId
  std::vector<int32_t> variant_ids_;    // simulator variant → VariantId (kNoId: not in any app)
  std::vector<int32_t> option_to_sim_;  // OptionId → simulator variant
  std::vector<int32_t> worker_live_;    // simulator worker → WorkerId
  std::vector<int32_t> worker_sim_;     // WorkerId → simulator worker
  std::vector<int32_t> instance_live_;  // simulator instance → InstanceId
  std::vector<int32_t> instance_sim_;   // InstanceId → simulator instance
};

}  // namespace maitre::sim
