// The controller's side of the control plane (docs/architecture.md, "One
// control plane"): every model period it shows the allocator (INFaaS by
// default; control/allocator.h) what the cluster looks like, and every
// cluster period it asks it again about workers. Everything that decides is
// in the allocator, which the simulator runs too; this class only builds the
// Observation from the live cluster, catalog and provider, and carries the
// decisions out through the placer (Loads and Unloads on the control queue)
// and the local provider.
//
// Thread-safety: thread-safe; one thread runs the rounds.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "control/allocator.h"
#include "core/stop_signal.h"
#include "controller/models/catalog.h"
#include "controller/dataplane/cluster.h"
#include "controller/provision/worker_provider.h"
#include "controller/dataplane/placer.h"
#include "controller/dataplane/refused_demand.h"
#include "controller/dataplane/service_level.h"
#include "controller/pipelines/pipeline_book.h"
#include "controller/serving_metrics.h"

namespace maitre::controller {

class ScalingLoop {
 public:
  struct Options {
    Catalog* catalog = nullptr;
    Cluster* cluster = nullptr;
    Placer* placer = nullptr;
    WorkerProvider* provider = nullptr;  // null: workers join by hand; no cluster scaling
    ServingMetrics* metrics = nullptr;  // may be null
    // Queries the dispatcher refused, handed to the allocator each model
    // round. May be null.
    RefusedDemand* refused = nullptr;
    // Queries answered per app, in time or not; may be null.
    ServiceLevel* service_level = nullptr;
    // The registered pipelines: those with an applied plan are shown to
    // the allocator with their arrivals (control/pipeline_allocator.h). May
    // be null.
    PipelineBook* pipelines = nullptr;
    const Clock* clock = SteadyClock::Get();
    std::string allocator = "infaas";  // a name known to control::CreateAllocator
    // Its options; `types` and `model_period` are filled in from the cluster
    // and below. Cluster scaling needs a provider.
    control::AllocatorOptions allocator_options;
    Nanos model_period = kSecond;
    Nanos cluster_period = 2 * kSecond;
    // Instances are judged at this latency objective when their app has none.
    double default_slo_ms = 100;
  };

  static absl::StatusOr<std::unique_ptr<ScalingLoop>> Create(Options options);
  ~ScalingLoop();

  // Runs the rounds on a thread until destruction.
  void Start();
  // One round of each kind (tests step them by hand).
  void RunModelRound();
  void RunClusterRound();

 private:
  class Sink;
  explicit ScalingLoop(Options options);
  // The cluster as the allocator sees it; `catalog` must outlive it.
  control::Observation Observe(const CatalogSnapshot& catalog, bool take_refused);
  // The pipelines with a plan, and (model rounds) their arrivals since the
  // last.
  void ObservePipelines(bool take_arrivals, control::Observation& o);

  const Options options_;
  std::unique_ptr<control::Allocator> allocator_;
  std::unique_ptr<Sink> sink_;

  absl::Mutex mu_;  // Observe's bookkeeping
  // When a load that made or grew each instance last finished. (A shrink
  // reloads the instance on its worker, which restarts its phase, but does
  // not make it young.)
  std::map<std::pair<std::string, VariantKey>, Nanos> ready_since_ ABSL_GUARDED_BY(mu_);

  StopSignal stop_;
  std::thread thread_;
};

}  // namespace maitre::controller
