// The INFaaS allocator (INFaaS §4.2; docs/policies.md, "How the control plane
// drives them"): the one driver of the autoscaling policies, in the
// controller and in the simulator alike. Each model round it
//  - spreads the demand turned away before reaching a worker over the
//    instances serving its app (refused demand);
//  - remembers, for a while, what an Overloaded or Interfered instance, or
//    one carrying a worker at its CPU limit, actually sustained (observed
//    capacity; the last also for the worker's type);
//  - runs consolidation across workers, then the model autoscaler per
//    worker, and carries out their moves through the sink (make before
//    break, placement elsewhere when a worker is full);
// and each cluster round it runs the cluster autoscaler. Before the model
// autoscaler it moves instances that stay Interfered to a less-loaded worker
// (policy/migration.h): the replicas load on the target first, queries go
// there once it serves (selection passes Interfered instances over while a
// healthy one answers sooner), and the source is unloaded in a later round,
// once the observation shows the target ready; the model sits out the
// other rules meanwhile. A (worker, model) with a move under way sits rounds
// out until the sink says the move ended, so a round never stacks moves on a
// stale report; and an instance younger than `min_instance_age` is neither
// shrunk nor given up.
//
// Thread-safety: rounds are called from one thread; the sink's `done`
// callbacks may come from any thread.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "control/allocator.h"
#include "control/delivered_capacity.h"
#include "policy/autoscaling_cluster.h"
#include "policy/autoscaling_consolidation.h"
#include "policy/autoscaling_model.h"
#include "policy/migration.h"

namespace maitre::control {

class InfaasAllocator : public Allocator {
 public:
  static absl::StatusOr<std::unique_ptr<InfaasAllocator>> Create(AllocatorOptions options);

  absl::Status ModelRound(const Observation& observation, ActionSink& sink) override;
  absl::Status ClusterRound(const Observation& observation, ActionSink& sink) override;

 private:
  explicit InfaasAllocator(AllocatorOptions options)
      : options_(std::move(options)), delivered_(DeliveredCapacityOptions(options_)) {}
  // (worker id, model name), or (worker id, variant key) for per-instance maps.
  using Where = std::pair<std::string, std::string>;

  // Drops what is remembered about workers the observation no longer has.
  void ForgetGoneWorkers(const Observation& observation);
  void ShareRefusedDemand(const Observation& observation);
  // What the instance was offered: its arrivals plus its refused share.
  double Offered(const ObservedWorker& worker, const ObservedInstance& inst) const;
  // The worker as the model policies see it, its capacity read from the
  // book of delivered capacity the way the question needs it.
  policy::ModelScalingSnapshot WorkerSnapshot(const Observation& observation,
                                              const ObservedWorker& worker,
                                              DeliveredCapacity::Reading reading) const;
  // Runs consolidation and gives up what it says; returns the places emptied.
  absl::StatusOr<std::set<Where>> Consolidate(
      const Observation& observation,
      const std::vector<policy::WorkerScalingSnapshot>& snapshots, ActionSink& sink);
  void Carry(const Observation& observation, const ObservedWorker& worker,
             const policy::ModelScaleAction& action, ActionSink& sink);
  // Interference migration: unloads the sources of moves whose loads ended
  // and serve, then starts this round's moves.
  void FinishMoves(const Observation& observation, ActionSink& sink);
  void Migrate(const Observation& observation, ActionSink& sink);
  void PlaceElsewhere(const Observation& observation, const ObservedWorker& source,
                      const policy::ModelScaleAction& action, ActionSink& sink);
  // Whether an instance of `model` on `worker` is loading or younger than
  // the minimum age.
  bool Young(const Observation& observation, const ObservedWorker& worker,
             const std::string& model, const std::string& variant = "") const;
  std::vector<policy::ClusterDemand> ClusterDemands(const Observation& observation) const;

  // Marks `places` busy; the returned callback, once called as many times as
  // `loads`, frees them.
  std::function<void()> MarkBusy(std::vector<Where> places, int loads);
  bool Busy(const Where& place) const;

  const AllocatorOptions options_;
  std::unique_ptr<policy::ModelAutoscaler> model_autoscaler_;
  std::unique_ptr<policy::ClusterAutoscaler> cluster_autoscaler_;

  std::map<std::string, policy::ModelAutoscalerState> model_state_;  // by worker
  policy::ConsolidationState consolidation_state_;
  policy::ClusterAutoscalerState cluster_state_;
  DeliveredCapacity delivered_;
  std::optional<Nanos> refused_taken_at_;
  std::map<Where, double> refused_share_;  // qps, by (worker, variant key)
  std::set<std::string> asked_placement_;  // workers whose last ask found no room
  policy::MigrationState migration_state_;
  // When each held instance's "cannot move" line was last logged: at most
  // one line per `kHeldLogEvery` each, with the reasons of its round.
  std::map<std::string, Nanos> held_migrations_;
  struct PendingMove {
    std::string from, to;
    VariantKey key;
    std::shared_ptr<std::atomic<bool>> load_ended;
    std::function<void()> release;  // frees the busy places
    int rounds_since_ended = 0;
  };
  std::vector<PendingMove> pending_moves_;

  mutable absl::Mutex mu_;
  std::multiset<Where> busy_ ABSL_GUARDED_BY(mu_);
};

}  // namespace maitre::control
