#include "controller/serving_metrics.h"

#include <iterator>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "policy/admission.h"

namespace maitre::controller {
namespace {

// "ok", "invalid_argument", "deadline_exceeded", ...
std::string Reason(const absl::Status& status) {
  if (status.ok()) return "ok";
  return absl::AsciiStrToLower(absl::StatusCodeToString(status.code()));
}

}  // namespace

absl::StatusOr<std::unique_ptr<ServingMetrics>> ServingMetrics::Create(
    metrics::MetricSet* metric_set, const Cluster* cluster, const BurstPool* burst_pool,
    const BacklogShedder* shedder, const Clock* clock) {
  std::unique_ptr<ServingMetrics> m(new ServingMetrics());
  m->metric_set_ = metric_set;
  m->cluster_ = cluster;
  m->burst_pool_ = burst_pool;
  m->shedder_ = shedder;
  m->clock_ = clock;
  const std::vector<std::string> mv = {"model", "variant"};
  MAITRE_ASSIGN_OR_RETURN(
      m->requests_,
      metric_set->AddCounter({"maitre_inference_requests_total",
                            "Inference requests by model, variant and outcome (ok or the "
                            "failure reason)",
                            {"model", "variant", "status"}}));
  MAITRE_ASSIGN_OR_RETURN(m->queue_seconds_,
                          metric_set->AddCounter({"maitre_inference_queue_seconds_total",
                                                "Time served requests waited in worker queues",
                                                mv}));
  MAITRE_ASSIGN_OR_RETURN(m->compute_seconds_,
                          metric_set->AddCounter({"maitre_inference_compute_seconds_total",
                                                "Executor time of the batches served requests "
                                                "ran in",
                                                mv}));
  MAITRE_ASSIGN_OR_RETURN(m->total_seconds_,
                          metric_set->AddCounter({"maitre_inference_request_seconds_total",
                                                "Front-end to reply time of served requests", mv}));
  MAITRE_ASSIGN_OR_RETURN(m->queue_, metric_set->AddHistogram({"maitre_inference_queue_seconds",
                                                             "Worker queue wait per request", mv}));
  MAITRE_ASSIGN_OR_RETURN(m->compute_,
                          metric_set->AddHistogram({"maitre_inference_compute_seconds",
                                                  "Executor time per request's batch", mv}));
  MAITRE_ASSIGN_OR_RETURN(m->total_,
                          metric_set->AddHistogram({"maitre_inference_request_seconds",
                                                  "Front-end to reply time per request", mv}));
  metrics::HistogramOptions lateness{
      "maitre_deadline_exceeded_lateness_seconds",
      "How long after its deadline each DEADLINE_EXCEEDED answer was sent (0: before it)",
      {},
      {0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.5}};
  MAITRE_ASSIGN_OR_RETURN(auto* lateness_family, metric_set->AddHistogram(lateness));
  m->expiry_lateness_ = lateness_family->With();
  metrics::HistogramOptions call_queries{"maitre_worker_call_queries",
                                         "Queries carried by each Infer call to a worker",
                                         {},
                                         {1, 2, 4, 8, 12, 16}};
  MAITRE_ASSIGN_OR_RETURN(auto* call_queries_family, metric_set->AddHistogram(call_queries));
  m->call_queries_ = call_queries_family->With();
  metrics::HistogramOptions bouncer{
      "maitre_bouncer_answer_over_estimate",
      "For each query the Bouncer admitted with the burst pool on: the time to its answer "
      "(or its deadline) over the Bouncer's estimate",
      {},
      std::vector<double>(std::begin(policy::EstimateTally::kBounds),
                          std::end(policy::EstimateTally::kBounds))};
  MAITRE_ASSIGN_OR_RETURN(auto* bouncer_family, metric_set->AddHistogram(bouncer));
  m->bouncer_ratio_ = bouncer_family->With();
  MAITRE_ASSIGN_OR_RETURN(
      auto* bouncer_late,
      metric_set->AddCounter({"maitre_bouncer_admitted_late_total",
                              "Queries the Bouncer admitted that were not answered by their "
                              "deadline",
                              {}}));
  m->bouncer_late_ = bouncer_late->With();
  MAITRE_ASSIGN_OR_RETURN(
      auto* shed,
      metric_set->AddCounter({"maitre_frontend_shed_total",
                              "Queries the HTTP front-end refused before decoding them, having "
                              "waited past its target in a standing backlog",
                              {}}));
  m->shed_ = shed->With();
  if (shedder != nullptr) {
    MAITRE_ASSIGN_OR_RETURN(
        m->shedding_,
        metric_set->AddCollectedGauge({"maitre_frontend_shedding",
                                       "1 while the HTTP front-end sheds queries from a standing "
                                       "backlog, else 0",
                                       {}}));
  }
  MAITRE_ASSIGN_OR_RETURN(
      m->pipeline_requests_,
      metric_set->AddCounter({"maitre_pipeline_requests_total",
                            "Pipeline queries by pipeline and outcome (ok or the failure reason)",
                            {"pipeline", "status"}}));
  MAITRE_ASSIGN_OR_RETURN(
      m->pipeline_seconds_,
      metric_set->AddHistogram({"maitre_pipeline_request_seconds",
                              "Front-end to reply time per served pipeline query, all stages",
                              {"pipeline"}}));
  MAITRE_ASSIGN_OR_RETURN(m->autoscaler_actions_,
                          metric_set->AddCounter({"maitre_autoscaler_actions_total",
                                                "Scaling actions taken, by kind", {"action"}}));
  MAITRE_ASSIGN_OR_RETURN(m->instances_,
                          metric_set->AddCollectedGauge({"maitre_instances",
                                                       "Loaded instances by variant and phase",
                                                       {"model", "variant", "phase"}}));
  MAITRE_ASSIGN_OR_RETURN(m->workers_,
                          metric_set->AddCollectedGauge({"maitre_workers",
                                                       "Registered workers by type", {"type"}}));
  MAITRE_ASSIGN_OR_RETURN(
      m->utilisation_,
      metric_set->AddCollectedGauge({"maitre_worker_cpu_utilisation_ratio",
                                   "Each worker's CPU use as a fraction of its type's cores",
                                   {"worker", "type"}}));
  MAITRE_ASSIGN_OR_RETURN(m->worker_memory_,
                          metric_set->AddCollectedGauge({"maitre_worker_resident_memory_bytes",
                                                       "Each worker's resident memory",
                                                       {"worker", "type"}}));
  MAITRE_ASSIGN_OR_RETURN(
      m->cost_rate_,
      metric_set->AddCollectedGauge({"maitre_cluster_cost_dollars_per_hour",
                                   "What the registered workers cost, from the worker-type "
                                   "price table",
                                   {}}));
  MAITRE_ASSIGN_OR_RETURN(m->instance_queue_,
                          metric_set->AddCollectedGauge({"maitre_instance_queue_length",
                                                       "Queries waiting at each instance",
                                                       {"model", "variant", "worker"}}));
  MAITRE_ASSIGN_OR_RETURN(
      m->instance_rate_,
      metric_set->AddCollectedGauge({"maitre_instance_served_requests_per_second",
                                   "Each instance's served rate over its last report",
                                   {"model", "variant", "worker"}}));
  MAITRE_ASSIGN_OR_RETURN(
      m->variant_choices_,
      metric_set->AddCollectedCounter(
          {"maitre_variant_choices_total",
           "Variants chosen to load, by who chose (selection, autoscaler), the variant and the "
           "rule that chose it (quickest, capacity, headroom, savings)",
           {"by", "variant", "reason"}}));
  if (burst_pool != nullptr) {
    MAITRE_ASSIGN_OR_RETURN(
        m->burst_queries_,
        metric_set->AddCollectedCounter(
            {"maitre_burst_pool_queries_total",
             "Queries the Bouncer sent to the burst pool, by what became of them: taken (sent "
             "to a pool worker and charged), answered (by it), cold_start (waited for a load "
             "on the pool), full (the pool could not take them)",
             {"outcome"}}));
    MAITRE_ASSIGN_OR_RETURN(m->burst_workers_,
                            metric_set->AddCollectedGauge(
                                {"maitre_burst_pool_workers", "The burst pool's workers", {}}));
  }
  ServingMetrics* self = m.get();
  m->collector_ = metric_set->AddCollector([self](metrics::Collector& c) {
    if (self->shedder_ != nullptr) {
      c.Set(self->shedding_, {}, self->shedder_->standing(self->clock_->Now()) ? 1 : 0);
    }
    if (self->burst_pool_ != nullptr) {
      const BurstPool::Stats s = self->burst_pool_->stats();
      c.Set(self->burst_queries_, {"taken"}, static_cast<double>(s.queries));
      c.Set(self->burst_queries_, {"answered"}, static_cast<double>(s.answered));
      c.Set(self->burst_queries_, {"cold_start"}, static_cast<double>(s.cold_starts));
      c.Set(self->burst_queries_, {"full"}, static_cast<double>(s.full));
      c.Set(self->burst_workers_, {}, s.workers);
    }
    double cost = 0;
    for (const WorkerView& w : self->cluster_->Snapshot()) {
      cost += w.type.price_per_hour;
      c.Add(self->workers_, {w.type.name}, 1);
      c.Set(self->utilisation_, {w.id, w.type.name}, w.cpu_utilisation);
      c.Set(self->worker_memory_, {w.id, w.type.name}, w.memory_mb * 1024 * 1024);
      for (const InstanceView& inst : w.instances) {
        c.Add(self->instances_, {inst.key.model, inst.key.variant, InstancePhaseName(inst.phase)},
              1);
        c.Set(self->instance_queue_, {inst.key.model, inst.key.variant, w.id},
              inst.stats.queue_length);
        c.Set(self->instance_rate_, {inst.key.model, inst.key.variant, w.id},
              inst.stats.served_qps);
      }
    }
    c.Set(self->cost_rate_, {}, cost);
    for (const auto& [key, n] : self->cluster_->SelectionLoadCounts()) {
      c.Set(self->variant_choices_, {"selection", key.first, key.second},
            static_cast<double>(n));
    }
    absl::MutexLock lock(&self->choices_mu_);
    for (const auto& [key, n] : self->autoscaler_choices_) {
      c.Set(self->variant_choices_, {"autoscaler", key.first, key.second},
            static_cast<double>(n));
    }
  });
  return m;
}

ServingMetrics::~ServingMetrics() {
  if (collector_ != 0) metric_set_->RemoveCollector(collector_);
}

ServingMetrics::Series& ServingMetrics::SeriesFor(const std::string& model,
                                                  const std::string& variant) {
  std::string key = absl::StrCat(model, ":", variant);
  {
    absl::ReaderMutexLock lock(&mu_);
    auto it = series_.find(key);
    if (it != series_.end()) return *it->second;
  }
  absl::MutexLock lock(&mu_);
  auto& slot = series_[key];
  if (slot == nullptr) {
    auto s = std::make_unique<Series>();
    s->ok = requests_->With({model, variant, "ok"});
    s->queue_seconds = queue_seconds_->With({model, variant});
    s->compute_seconds = compute_seconds_->With({model, variant});
    s->total_seconds = total_seconds_->With({model, variant});
    s->queue = queue_->With({model, variant});
    s->compute = compute_->With({model, variant});
    s->total = total_->With({model, variant});
    slot = std::move(s);
  }
  return *slot;
}

void ServingMetrics::RecordQuery(const std::string& model, const std::string& variant,
                                 const absl::Status& status, const InferTimings* timings) {
  if (!status.ok()) {
    // Failures are rarer; their series are looked up each time.
    requests_->With({model, variant, Reason(status)}).Increment();
    return;
  }
  Series& s = SeriesFor(model, variant);
  s.ok.Increment();
  if (timings == nullptr) return;
  double queue = timings->queue_us * 1e-6;
  double compute = timings->compute_us * 1e-6;
  double total = timings->total_us * 1e-6;
  s.queue_seconds.Add(queue);
  s.compute_seconds.Add(compute);
  s.total_seconds.Add(total);
  s.queue.Observe(queue);
  s.compute.Observe(compute);
  s.total.Observe(total);
}

void ServingMetrics::RecordPipelineQuery(const std::string& pipeline, const absl::Status& status,
                                         Nanos total) {
  // Pipeline queries are a small share of the traffic: the series are
  // looked up each time.
  pipeline_requests_->With({pipeline, status.ok() ? std::string("ok") : Reason(status)})
      .Increment();
  if (status.ok()) pipeline_seconds_->With({pipeline}).Observe(total * 1e-9);
}

void ServingMetrics::RecordExpiry(Nanos lateness) {
  expiry_lateness_.Observe(std::max<Nanos>(lateness, 0) * 1e-9);
}

void ServingMetrics::RecordBouncerEstimate(Nanos estimate, Nanos answered_after, bool in_time) {
  bouncer_ratio_.Observe(policy::EstimateTally::Ratio(estimate, answered_after));
  if (!in_time) bouncer_late_.Increment();
}

void ServingMetrics::RecordAutoscalerAction(absl::string_view action) {
  autoscaler_actions_->With({action}).Increment();
}

void ServingMetrics::RecordVariantChoice(absl::string_view variant, absl::string_view reason) {
  absl::MutexLock lock(&choices_mu_);
  ++autoscaler_choices_[{std::string(variant), std::string(reason)}];
}

}  // namespace maitre::controller
