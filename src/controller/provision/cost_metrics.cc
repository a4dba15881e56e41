#include "controller/provision/cost_metrics.h"

#include "controller/provision/app_cost_split.h"
#include "core/status_macros.h"

namespace maitre::controller {

absl::StatusOr<std::unique_ptr<CostMetrics>> CostMetrics::Create(
    metrics::MetricSet* metric_set, const CostMeter* cost, const AppUsage* usage,
    const Clock* clock) {
  std::unique_ptr<CostMetrics> m(new CostMetrics());
  m->metric_set_ = metric_set;
  MAITRE_ASSIGN_OR_RETURN(
      m->cost_, metric_set->AddCollectedCounter(
                    {"maitre_cost_dollars_total",
                     "What the workers have cost since the server started, by worker type and "
                     "market (GET /v2/cluster/cost)",
                     {"type", "market"}}));
  // Gauges, not counters: an app's part shrinks while other apps' compute
  // grows faster than its own.
  MAITRE_ASSIGN_OR_RETURN(
      m->app_cost_, metric_set->AddCollectedGauge(
                        {"maitre_app_cost_dollars",
                         "Each app's part of what the workers have cost since the server "
                         "started: by its share of the compute seconds, plus its queries "
                         "charged by the request",
                         {"app"}}));
  MAITRE_ASSIGN_OR_RETURN(
      m->app_per_hour_,
      metric_set->AddCollectedGauge({"maitre_app_cost_dollars_per_hour",
                                     "Each app's part of what the workers cost an hour now, by "
                                     "its share of the compute seconds",
                                     {"app"}}));
  const CostMetrics* self = m.get();
  m->collector_ = metric_set->AddCollector([self, cost, usage, clock](metrics::Collector& c) {
    const std::map<std::string, AppUsed> used = usage->Snapshot();  // before the report
    const CostReport report = cost->At(clock->Now());
    for (const CostLine& line : report.lines) {
      c.Set(self->cost_, {line.type, line.market}, line.cost);
    }
    for (const AppCost& app : SplitCostByApp(report, used).apps) {
      c.Set(self->app_cost_, {app.app}, app.cost);
      c.Set(self->app_per_hour_, {app.app}, app.per_hour);
    }
  });
  return m;
}

CostMetrics::~CostMetrics() {
  if (collector_ != 0) metric_set_->RemoveCollector(collector_);
}

}  // namespace maitre::controller
