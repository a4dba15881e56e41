// The controller's Prometheus metrics (documented in docs/operations.md):
// per model and variant, request outcomes and queue / compute / total
// durations as counters and histograms; cluster-wide, computed at scrape
// time, instances by phase and state, workers, utilisation and the cost
// rate. Label values come only from registered names, so clients cannot
// inflate the number of series with made-up model names.
//
// Thread-safety: thread-safe; RecordQuery is on the data path and takes
// only a reader lock once the (model, variant) series exist.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "controller/dataplane/backlog_shedder.h"
#include "controller/dataplane/burst_pool.h"
#include "controller/dataplane/cluster.h"
#include "controller/frontend/infer_codec.h"
#include "metrics/metric_set.h"

namespace maitre::controller {

class ServingMetrics {
 public:
  // Registers the families in `metric_set` and a collector that reads
  // `cluster`, and `burst_pool` and `shedder` if any (the latter on
  // `clock`), at scrape time. They must outlive this object.
  static absl::StatusOr<std::unique_ptr<ServingMetrics>> Create(
      metrics::MetricSet* metric_set, const Cluster* cluster,
      const BurstPool* burst_pool = nullptr, const BacklogShedder* shedder = nullptr,
      const Clock* clock = SteadyClock::Get());
  ~ServingMetrics();

  // One query's outcome. `model` and `variant` are "" when the query did
  // not name a registered model or never reached a variant.
  void RecordQuery(const std::string& model, const std::string& variant,
                   const absl::Status& status, const InferTimings* timings);

  // One query to the registered pipeline `pipeline` (its stages are each
  // recorded as model queries too): its outcome, and when served, its time
  // from the front-end to the reply.
  void RecordPipelineQuery(const std::string& pipeline, const absl::Status& status,
                           Nanos total);

  // A query answered DEADLINE_EXCEEDED `lateness` after its deadline (0 or
  // less when it was refused before the deadline: it could not make it).
  void RecordExpiry(Nanos lateness);

  // A query the Bouncer admitted on `estimate`, answered `answered_after`
  // it (or, not in time, at its deadline): the same figure the simulator
  // reports (policy::EstimateTally), as a histogram of answer ÷ estimate.
  void RecordBouncerEstimate(Nanos estimate, Nanos answered_after, bool in_time);

  // One query the HTTP front-end shed from a standing backlog
  // (dataplane/backlog_shedder.h); RecordQuery counts it as refused too.
  void RecordShed() { shed_.Increment(); }

  // One Infer call to a worker carrying `queries` queries (the call
  // coalescer's grouping: docs/architecture.md, "How a query travels").
  void RecordWorkerCall(int queries) { call_queries_.Observe(queries); }

  // One decision of the allocator ("replicate", "upgrade", "add-worker", ...).
  void RecordAutoscalerAction(absl::string_view action);

  // The model autoscaler chose `variant` ("model:variant") to load, for
  // `reason` ("headroom", "capacity", "savings"). With the loads selection
  // started (Cluster::SelectionLoadCounts, reason "quickest" or "capacity")
  // it makes maitre_variant_choices_total{by, variant, reason}.
  void RecordVariantChoice(absl::string_view variant, absl::string_view reason);

  metrics::MetricSet& metric_set() { return *metric_set_; }

 private:
  struct Series {
    metrics::Counter ok;
    metrics::Counter queue_seconds, compute_seconds, total_seconds;
    metrics::Histogram queue, compute, total;
  };
  ServingMetrics() = default;
  Series& SeriesFor(const std::string& model, const std::string& variant);

  metrics::MetricSet* metric_set_ = nullptr;
  const Cluster* cluster_ = nullptr;
  metrics::CounterFamily* requests_ = nullptr;
  metrics::CounterFamily* queue_seconds_ = nullptr;
  metrics::CounterFamily* compute_seconds_ = nullptr;
  metrics::CounterFamily* total_seconds_ = nullptr;
  metrics::HistogramFamily* queue_ = nullptr;
  metrics::HistogramFamily* compute_ = nullptr;
  metrics::HistogramFamily* total_ = nullptr;
  metrics::CounterFamily* autoscaler_actions_ = nullptr;
  metrics::CounterFamily* pipeline_requests_ = nullptr;
  metrics::HistogramFamily* pipeline_seconds_ = nullptr;
  metrics::Histogram expiry_lateness_;
  metrics::Histogram call_queries_;
  metrics::Histogram bouncer_ratio_;
  metrics::Counter bouncer_late_;
  metrics::Counter shed_;
  metrics::CollectedFamily* instances_ = nullptr;
  metrics::CollectedFamily* workers_ = nullptr;
  metrics::CollectedFamily* utilisation_ = nullptr;
  metrics::CollectedFamily* worker_memory_ = nullptr;
  metrics::CollectedFamily* cost_rate_ = nullptr;
  metrics::CollectedFamily* instance_queue_ = nullptr;
  metrics::CollectedFamily* instance_rate_ = nullptr;
  metrics::CollectedFamily* variant_choices_ = nullptr;
  metrics::CollectedFamily* burst_queries_ = nullptr;
  metrics::CollectedFamily* burst_workers_ = nullptr;
  const BurstPool* burst_pool_ = nullptr;
  metrics::CollectedFamily* shedding_ = nullptr;
  const BacklogShedder* shedder_ = nullptr;
  const Clock* clock_ = nullptr;
  metrics::CollectorId collector_ = 0;

  // The model autoscaler's variant choices by (variant, reason).
  mutable absl::Mutex choices_mu_;
  std::map<std::pair<std::string, std::string>, int64_t> autoscaler_choices_
      ABSL_GUARDED_BY(choices_mu_);

  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<Series>> series_ ABSL_GUARDED_BY(mu_);
};

}  // namespace maitre::controller
