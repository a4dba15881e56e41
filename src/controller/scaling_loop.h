// The controller's scaling loop (INFaaS autoscaling; docs/policies.md, "How the
// real system drives them"): every second the model autoscaler decides, for
// each worker, whether to replicate, upgrade, downgrade or shrink the instances
// there; every two seconds the cluster autoscaler decides whether to add a
// worker or retire an idle one. Both are the pure policies of src/policy; this
// class builds their snapshots from the cluster and catalog and carries out
// their actions through the placer and the local provider.
//
// The model autoscaler is a per-worker decision, but it runs here rather
// than in the worker: it needs the model's other variants and their
// profiles on the worker's type, which only the controller holds.
//
// Thread-safety: thread-safe; one thread runs the rounds.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/stop_signal.h"
#include "controller/catalog.h"
#include "controller/cluster.h"
#include "controller/local_provider.h"
#include "controller/placer.h"
#include "controller/refused_demand.h"
#include "controller/serving_metrics.h"
#include "policy/autoscaling_cluster.h"
#include "policy/autoscaling_consolidation.h"
#include "policy/autoscaling_model.h"

namespace maitre::controller {

class ScalingLoop {
 public:
  struct Options {
    Catalog* catalog = nullptr;
    Cluster* cluster = nullptr;
    Placer* placer = nullptr;
    LocalProvider* provider = nullptr;  // null: workers join by hand; no cluster scaling
    ServingMetrics* metrics = nullptr;  // may be null
    // Queries the dispatcher refused; their rate is added to the offered
    // load of the instances serving their app. May be null.
    RefusedDemand* refused = nullptr;
    const Clock* clock = SteadyClock::Get();
    // "infaas" (replicate or upgrade/downgrade), "horizontal" (replicate and
    // remove only) or "off".
    std::string model_autoscaler = "infaas";
    bool cluster_autoscaler = true;
    // Per type: workers never go below min (the --workers spec) nor above max.
    std::map<std::string, int> min_workers;
    std::map<std::string, int> max_workers;
    Nanos model_period = kSecond;
    Nanos cluster_period = 2 * kSecond;
    // Instances are judged at this latency objective when their app has none.
    double default_slo_ms = 100;
  };

  static absl::StatusOr<std::unique_ptr<ScalingLoop>> Create(Options options);
  ~ScalingLoop();

  // Runs the rounds on a thread until destruction.
  void Start();
  // One round of each autoscaler (tests step them by hand).
  void RunModelRound();
  void RunClusterRound();

 private:
  explicit ScalingLoop(Options options) : options_(std::move(options)) {}
  // Refused rows per second to add, by (worker id, model): each serving
  // instance's share of its app's refusals since the last round.
  using RefusedShares = std::map<std::pair<std::string, std::string>, double>;
  RefusedShares TakeRefusedShares(const std::vector<WorkerView>& workers,
                                  const CatalogSnapshot& catalog, Nanos now);
  policy::ModelScalingSnapshot WorkerSnapshot(const WorkerView& worker,
                                              const CatalogSnapshot& catalog,
                                              const RefusedShares& refused)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs the consolidation policy over this round's snapshots and unloads
  // what it gives up; returns the (worker, model) pairs it emptied.
  std::set<std::pair<std::string, std::string>> Consolidate(
      const std::vector<WorkerView>& workers,
      const std::vector<policy::WorkerScalingSnapshot>& snapshots, Nanos now)
      ABSL_LOCKS_EXCLUDED(mu_);
  void Carry(const WorkerView& worker, const CatalogSnapshot& catalog,
             const policy::ModelScaleAction& action);
  // Loads `variant` on `worker_id` with `replicas` replicas (a loaded
  // variant gets that many), then runs `after` if it worked.
  void SetReplicas(const std::string& worker_id, const CatalogVariant& variant, int replicas,
                   std::function<void()> after);
  void Record(absl::string_view action);

  const Options options_;
  std::unique_ptr<policy::ModelAutoscaler> model_autoscaler_;
  std::unique_ptr<policy::ClusterAutoscaler> cluster_autoscaler_;

  absl::Mutex mu_;
  std::map<std::string, policy::ModelAutoscalerState> model_state_ ABSL_GUARDED_BY(mu_);
  policy::ConsolidationState consolidation_state_ ABSL_GUARDED_BY(mu_);
  policy::ClusterAutoscalerState cluster_state_ ABSL_GUARDED_BY(mu_);
  // (worker, model) pairs with an action under way: not decided again until
  // it completes, so a round does not stack moves on a stale report.
  std::set<std::pair<std::string, std::string>> busy_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Nanos> idle_since_ ABSL_GUARDED_BY(mu_);
  // What an instance actually sustained per replica when monitoring found
  // it Overloaded or Interfered, by (worker, variant), and until when that
  // figure is believed over the profile's.
  struct Observed {
    double qps_per_replica = 0;
    Nanos until = 0;
  };
  std::map<std::pair<std::string, std::string>, Observed> observed_ ABSL_GUARDED_BY(mu_);

  // The cluster autoscaler's demand figures, per model: offered load (with
  // the last refused shares) less what loaded replicas sustain, and what one
  // empty worker of each type would serve.
  std::vector<policy::ClusterDemand> ClusterDemands(const std::vector<WorkerView>& workers,
                                                    const CatalogSnapshot& catalog)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The objective a model's instances are judged at.
  double SloOf(const CatalogSnapshot& catalog, const CatalogModel& model) const;

  // When the refused counts were last taken (the model round's thread only).
  Nanos refused_taken_at_ = 0;
  // The model round's last shares, for the cluster round.
  RefusedShares last_refused_ ABSL_GUARDED_BY(mu_);

  StopSignal stop_;
  std::thread thread_;
};

}  // namespace maitre::controller
