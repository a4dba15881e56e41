// The cluster's cost on /metrics (docs/operations.md, "Metrics"), read from
// the cost meter and the apps' usage at scrape time: the cost so far by
// worker type and market, and each app's part of it and of the rate now
// (provision/app_cost_split.h).
//
// Thread-safety: thread-safe; what Create is given outlives this object.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "controller/provision/app_usage.h"
#include "controller/provision/cost_meter.h"
#include "core/clock.h"
#include "metrics/metric_set.h"

namespace maitre::controller {

class CostMetrics {
 public:
  // Registers the families in `metric_set` and a collector reading `cost`
  // and `usage` at `clock`'s now.
  static absl::StatusOr<std::unique_ptr<CostMetrics>> Create(
      metrics::MetricSet* metric_set, const CostMeter* cost, const AppUsage* usage,
      const Clock* clock = SteadyClock::Get());
  ~CostMetrics();
  CostMetrics(const CostMetrics&) = delete;
  CostMetrics& operator=(const CostMetrics&) = delete;

 private:
  CostMetrics() = default;

  metrics::MetricSet* metric_set_ = nullptr;
  metrics::CollectorId collector_ = 0;
  metrics::CollectedFamily* cost_ = nullptr;
  metrics::CollectedFamily* app_cost_ = nullptr;
  metrics::CollectedFamily* app_per_hour_ = nullptr;
};

}  // namespace maitre::controller
