// Places variants on workers on demand: when a query needs a variant that is
// loaded nowhere, the placer picks a worker and loads it there, and every
// query that needs it meanwhile waits for that one load. Loads run on the
// control work queue, never on a data-path thread.
//
// Thread-safety: thread-safe.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "controller/models/catalog.h"
#include "controller/dataplane/cluster.h"
#include "core/work_queue.h"

namespace maitre::controller {

class Placer {
 public:
  struct Options {
    Cluster* cluster = nullptr;
    WorkQueue* control = nullptr;
    const Clock* clock = SteadyClock::Get();
    // After a failed load, queries for that variant fail fast for this long
    // instead of retrying a load that is likely to fail again.
    Nanos failure_backoff = 5 * kSecond;
    // The batch limit each load of a variant carries: a pipeline stage's
    // planned batch (PipelineBook::PlannedBatch), 0 for none. Unset: none.
    std::function<int32_t(const VariantKey&)> planned_batch = nullptr;
  };

  explicit Placer(Options options) : options_(options) {}

  // Joins the load of `variant` in progress, or starts one on the best
  // worker; neither on a worker in `avoid` (those the query was already
  // lost on). `done` is taken and learns how the load ended (at once if the
  // variant's last load failed moments ago). Returns false, leaving `done`
  // with the caller, when no worker can take the variant now: none that is
  // reachable and not in `avoid` has the memory.
  bool EnsureLoaded(const CatalogVariant& variant, LoadWaiter& done,
                    const std::vector<std::string>& avoid = {});

  // Loads `variant` on a given worker (autoscaling, tests); `done` may be
  // null.
  void LoadOn(const std::string& worker_id, const CatalogVariant& variant, int replicas,
              LoadWaiter done);

  // Sends each ready instance of `variant` its load again, at the replicas
  // it has, so that it takes what a load carries now (its planned batch).
  void Refresh(const CatalogVariant& variant);

  // Unloads `key` from a worker and forgets the instance. It drains first:
  // no query is routed there from now on, and the Unload goes to the worker
  // (on the control queue) once every query this controller sent the
  // instance has been answered by it (Cluster::BeginUnload; at most its
  // drain limit). If a load of the variant there takes it back meanwhile,
  // it stays.
  void Unload(const std::string& worker_id, const VariantKey& key);

  // The worker a query's on-demand load of `variant` should go to, or "" if
  // none has the memory: the least utilised reachable one not in `avoid`.
  // Cores are not counted: an idle instance costs none, and the autoscalers
  // own capacity.
  std::string ChooseWorker(const CatalogVariant& variant,
                           const std::vector<std::string>& avoid = {}) const;

  // A new replica's destination and the replica count to set there.
  struct ReplicaPlacement {
    std::string worker_id;
    int replicas = 0;  // held there now plus those placed
  };
  // Places `count` new replicas of `variant` by the placement policy
  // (policy/placement.h: online best fit by the binding resource), as the
  // simulator does: each replica takes one core and the variant's profiled
  // memory, on the workers of `type` (the count was computed for that type;
  // another type would need another count, which is the cluster
  // autoscaler's business). Returns one entry per worker chosen; fewer
  // replicas than asked (or none) when the workers are full.
  std::vector<ReplicaPlacement> PlaceReplicas(const CatalogVariant& variant,
                                              const std::string& type, int count) const;

  // Sends the Load to the worker on the control queue; the instance must
  // already be marked loading in the cluster (the selection policy's loads
  // are).
  void StartLoad(const std::string& worker_id, const CatalogVariant& variant, int replicas);

 private:
  const Options options_;
  absl::Mutex mu_;  // makes "is it loading? else start a load" atomic
};

}  // namespace maitre::controller
