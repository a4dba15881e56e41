// The cost families on /metrics, read from a real cost meter and usage.
#include "controller/provision/cost_metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace maitre::controller {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(CostMetricsTest, CostByTypeAndByApp) {
  auto types = WorkerTypeTable::Parse("hourly:1:100:0.36:3600");
  ASSERT_TRUE(types.ok()) << types.status();
  CostMeter meter(*types);
  WorkerEvent started;
  started.kind = WorkerEvent::Kind::kStarted;
  started.type = "hourly";
  started.launch_token = "a";
  meter.Record(started);
  AppUsage usage;
  usage.AddCompute("fashion", 3000, 1);
  usage.AddCompute("news", 1000, 1);
  ManualClock clock(60 * kSecond);
  metrics::MetricSet metric_set;
  auto cost_metrics = CostMetrics::Create(&metric_set, &meter, &usage, &clock);
  ASSERT_TRUE(cost_metrics.ok()) << cost_metrics.status();

  const std::string text = metric_set.Render();
  EXPECT_THAT(text, HasSubstr("maitre_cost_dollars_total{type=\"hourly\",market=\"on-demand\"} "
                              "0.36\n"));
  EXPECT_THAT(text, HasSubstr("maitre_app_cost_dollars{app=\"fashion\"} 0.27\n"));
  EXPECT_THAT(text, HasSubstr("maitre_app_cost_dollars{app=\"news\"} 0.09\n"));
  EXPECT_THAT(text, HasSubstr("maitre_app_cost_dollars_per_hour{app=\"fashion\"} 0.27\n"));

  cost_metrics->reset();  // its collector goes with it
  EXPECT_THAT(metric_set.Render(), Not(HasSubstr("maitre_app_cost_dollars{")));
}

}  // namespace
}  // namespace maitre::controller
