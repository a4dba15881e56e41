// The MArk allocator (Zhang et al., USENIX ATC '19, §4.2-§4.3; docs/policies.md,
// "Provisioning ahead of demand (MArk)"): cost-optimal workers for each app's
// predicted peak rate, provisioned before the demand arrives. Each app is
// served by workers of its own, each worker hosting the app's variant that
// serves the most within the app's objective on that worker type.
//
// Each model round it
//  - measures each app's arrival rate (its instances' arrivals plus what was
//    turned away) and keeps its per-unit peaks (policy/prediction/
//    peak_tracker.h, MArk's [P_u, P_w, P_s]);
//  - loads the app's variant on every worker assigned to the app that does
//    not hold it yet, replacing whatever the worker held (make before break);
//  - publishes route weights: each serving instance in proportion to what it
//    sustains within its objective (the "weighted" router is its default);
//  - monitors each app's service level (MArk §4.4): below its SL_min it
//    raises the app's forecasts step by step, and lowers them again once
//    the level has held (MarkOptions).
// Each cluster round, per app (in name order):
//  - forecasts the next P_w units' peaks with the configured predictor
//    (workload_prediction.h), made again each time a unit ends; the units
//    until a launch made now can serve are planned for at least the peak
//    already seen in the unit in progress;
//  - plans with Algorithm 1 (policy/mark_provisioning.h) over the worker
//    types the app has a variant on: capacity from the profile at the batch
//    the objective allows (Profile::SaturationQps) times the replicas a
//    worker holds, the price per unit, the type's billing blocks, and its
//    launch time in units; running workers are the app's own, the ones
//    launched for it and not up yet, and the cluster's unassigned ones;
//  - launches now what the plan launches now (AddWorker), up to the type's
//    maximum; the worker that joins next of that type is the app's;
//  - gives back a worker the plan has not used for `cool_down` once its paid
//    block is about to end (keeping it until then costs nothing, and demand
//    may return): first its route weights go, then, once it is idle (or after
//    `release_margin`), RetireWorker. Never below a type's minimum.
// A worker's paid time counts from its launch (from when it was first seen
// for one the allocator did not launch), in the type's billing blocks.
//
// Thread-safety: rounds are called from one thread; the sink's `done`
// callbacks may come from any thread.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "control/allocator.h"
#include "control/busy_workers.h"
#include "policy/mark_provisioning.h"
#include "policy/prediction/peak_tracker.h"
#include "policy/prediction/workload_prediction.h"

namespace maitre::control {

// InvalidArgument for bad windows, an unknown predictor (or the LSTM, which
// the control plane does not link), a headroom below 1, or negative times.
// "oracle" passes; its series are checked by Create.
absl::Status ValidateMarkOptions(const MarkOptions& options);

class MarkAllocator : public Allocator {
 public:
  // ValidateMarkOptions' errors; InvalidArgument for an oracle without
  // series, or cluster scaling off (MArk provisions workers).
  static absl::StatusOr<std::unique_ptr<MarkAllocator>> Create(const AllocatorOptions& options);

  absl::Status ModelRound(const Observation& observation, ActionSink& sink) override;
  absl::Status ClusterRound(const Observation& observation, ActionSink& sink) override;

  // What the last cluster round planned for an app, for logs and tests.
  struct AppPlan {
    Nanos at = 0;
    std::vector<double> forecast_qps;  // per unit, headroom included
    double capacity_qps = 0;           // of the workers the plan keeps or launches now
    std::vector<double> uncovered_qps;  // per unit: what no worker can serve in time
    int launched = 0;
  };
  const AppPlan* PlanFor(const std::string& app) const;
  // The SLO monitor's over-provisioning for an app now (0: none).
  double BoostFor(const std::string& app) const;
  // The app a worker serves, or "" when none.
  std::string AppOf(const std::string& worker) const;

 private:
  explicit MarkAllocator(const AllocatorOptions& options) : options_(options) {}

  // What one worker of a type does for an app: its best variant there.
  struct Choice {
    VariantKey key;
    int replicas = 0;
    double qps_per_replica = 0;
    double capacity() const { return replicas * qps_per_replica; }
  };
  std::optional<Choice> Choose(const Observation& observation, const std::string& app,
                               const std::string& type) const;
  // Workers of `type` the app cannot use: held by other apps, or kept by an
  // app planned earlier this round, and other apps' launches on the way.
  int HeldByOthers(const std::string& type, const std::string& app,
                   const std::set<std::string>& kept) const;

  struct KnownWorker {
    std::string type;
    std::string app;  // "" until assigned
    Nanos paid_from = 0;
    std::optional<Nanos> unneeded_since;
    std::optional<Nanos> draining_since;  // route weights withdrawn
  };
  struct Pending {
    // "" for a worker the world started on its own (a spot worker's
    // replacement): taken by the first app whose plan uses it.
    std::string app;
    std::string type;
    Nanos at = 0;
  };
  struct App {
    explicit App(const policy::PredictionWindows& windows) : peaks(windows) {}
    policy::UnitPeakTracker peaks;
    std::unique_ptr<policy::WorkloadPredictor> predictor;
    size_t predicted_units = 0;
    std::vector<double> forecast;
    AppPlan plan;
    // The unit whose plan was last logged: one "plan" line a unit.
    std::optional<size_t> logged_unit;
    // The SLO monitor: what was resolved in the window, by round, and the
    // over-provisioning it asks for now.
    std::deque<std::pair<Nanos, ServiceCount>> service;
    ServiceCount service_sum;
    double boost = 0;
    std::optional<Nanos> boost_changed;
  };

  // Learns the workers that joined (matching them to launches), the apps
  // their instances serve, and forgets the ones gone.
  void Reconcile(const Observation& observation);
  void MeasureDemand(const Observation& observation);
  // The SLO monitor (MarkOptions): raises or relaxes each app's boost.
  void MonitorSlo(const Observation& observation, ActionSink& sink);
  App& AppState(const std::string& app);
  std::vector<std::string> Apps(const Observation& observation) const;
  // Workers of `type` up or starting, this round's launches included.
  int WorkersOf(const Observation& observation, const std::string& type) const;
  // The app's forecast for the coming units, the unit in progress first,
  // with the peak seen in the unit in progress held up to `hold_units`
  // (the soonest a launch made now serves); FailedPrecondition when its
  // predictor cannot be made (an oracle without the app's peaks).
  absl::StatusOr<std::vector<double>> Forecast(const std::string& name, App& app,
                                               int hold_units);
  Nanos LaunchTime(const std::string& type) const;
  // When the block a worker is paid for at `now` ends (`now` when billed
  // by the second).
  Nanos PaidUntil(const KnownWorker& worker, Nanos now, const Observation& observation) const;
  absl::Status PlanApp(const Observation& observation, const std::string& app,
                       std::set<std::string>& kept, ActionSink& sink);
  void Release(const Observation& observation, const std::set<std::string>& kept,
               ActionSink& sink);
  void LoadAssigned(const Observation& observation, ActionSink& sink);
  void PublishWeights(const Observation& observation, ActionSink& sink);

  const AllocatorOptions options_;
  std::map<std::string, KnownWorker> known_;  // by worker id; up workers only
  std::deque<Pending> pending_;               // launches not joined yet, oldest first
  std::map<std::string, std::unique_ptr<App>> apps_;
  std::optional<Nanos> last_model_round_;
  std::vector<std::tuple<std::string, std::string, double>> published_;
  BusyWorkers busy_;
};

}  // namespace maitre::control
