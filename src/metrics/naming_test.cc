#include "metrics/naming.h"

#include "gtest/gtest.h"

namespace maitre::metrics {
namespace {

TEST(ValidateMetricNameTest, AcceptsConventionalNames) {
  EXPECT_TRUE(ValidateMetricName("maitre_requests_total", MetricType::kCounter).ok());
  EXPECT_TRUE(ValidateMetricName("maitre_compute_seconds_total", MetricType::kCounter).ok());
  EXPECT_TRUE(ValidateMetricName("maitre_queue_duration_seconds", MetricType::kHistogram).ok());
  EXPECT_TRUE(ValidateMetricName("maitre_instances", MetricType::kGauge).ok());
  EXPECT_TRUE(ValidateMetricName("maitre_worker_utilisation_ratio", MetricType::kGauge).ok());
  EXPECT_TRUE(ValidateMetricName("_leading_underscore", MetricType::kGauge).ok());
  EXPECT_TRUE(ValidateMetricName("build_info", MetricType::kGauge).ok());
  // A histogram may end in a reserved suffix; its own series are distinct.
  EXPECT_TRUE(ValidateMetricName("batch_count", MetricType::kHistogram).ok());
}

TEST(ValidateMetricNameTest, RejectsBadGrammar) {
  for (const char* name : {"", "1abc", "a-b", "a b", "a.b", "caf\xC3\xA9"}) {
    absl::Status status = ValidateMetricName(name, MetricType::kGauge);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << name;
  }
}

TEST(ValidateMetricNameTest, RejectsColonsReservedForRecordingRules) {
  absl::Status status = ValidateMetricName("job:requests:rate5m", MetricType::kGauge);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("recording rules"), absl::string_view::npos);
}

TEST(ValidateMetricNameTest, CounterSuffixRules) {
  absl::Status status = ValidateMetricName("maitre_requests", MetricType::kCounter);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("_total"), absl::string_view::npos) << status;
  EXPECT_FALSE(ValidateMetricName("x_total", MetricType::kGauge).ok());
  EXPECT_FALSE(ValidateMetricName("x_total", MetricType::kHistogram).ok());
  EXPECT_FALSE(ValidateMetricName("x_total_requests", MetricType::kCounter).ok());
}

TEST(ValidateMetricNameTest, RejectsHistogramSuffixesOnOtherTypes) {
  EXPECT_FALSE(ValidateMetricName("x_bucket", MetricType::kGauge).ok());
  EXPECT_FALSE(ValidateMetricName("x_count", MetricType::kGauge).ok());
  EXPECT_FALSE(ValidateMetricName("x_sum", MetricType::kGauge).ok());
}

TEST(ValidateMetricNameTest, RejectsCamelCase) {
  EXPECT_FALSE(ValidateMetricName("maitreRequests", MetricType::kGauge).ok());
  EXPECT_TRUE(ValidateMetricName("MAITRE_REQUESTS", MetricType::kGauge).ok());
}

TEST(ValidateMetricNameTest, RejectsNonBaseAndAbbreviatedUnits) {
  absl::Status status = ValidateMetricName("latency_milliseconds", MetricType::kHistogram);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("\"seconds\""), absl::string_view::npos) << status;
  EXPECT_FALSE(ValidateMetricName("uptime_hours", MetricType::kGauge).ok());
  EXPECT_FALSE(ValidateMetricName("model_kilobytes", MetricType::kGauge).ok());
  EXPECT_FALSE(ValidateMetricName("latency_ms", MetricType::kGauge).ok());
  EXPECT_FALSE(ValidateMetricName("latency_MS", MetricType::kGauge).ok());
  EXPECT_FALSE(ValidateMetricName("size_b_x", MetricType::kGauge).ok());
  // Only whole words count, and abbreviations only after the first word.
  EXPECT_TRUE(ValidateMetricName("msgs_in_flight", MetricType::kGauge).ok());
  EXPECT_TRUE(ValidateMetricName("ms_in_flight", MetricType::kGauge).ok());
}

TEST(ValidateMetricNameTest, RejectsTypeInName) {
  EXPECT_FALSE(ValidateMetricName("queue_gauge", MetricType::kGauge).ok());
  EXPECT_FALSE(ValidateMetricName("latency_histogram_seconds", MetricType::kHistogram).ok());
  EXPECT_TRUE(ValidateMetricName("gauge_readings", MetricType::kGauge).ok());
}

TEST(ValidateLabelNamesTest, AcceptsConventionalNames) {
  EXPECT_TRUE(ValidateLabelNames({}).ok());
  EXPECT_TRUE(ValidateLabelNames({"model", "variant", "reason", "_private"}).ok());
}

TEST(ValidateLabelNamesTest, RejectsBadNames) {
  for (const char* name : {"", "1a", "a-b", "a:b", "__name__", "__x", "myLabel", "le", "quantile"}) {
    EXPECT_EQ(ValidateLabelNames({name}).code(), absl::StatusCode::kInvalidArgument) << name;
  }
}

TEST(ValidateLabelNamesTest, RejectsDuplicates) {
  absl::Status status = ValidateLabelNames({"model", "variant", "model"});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("twice"), absl::string_view::npos);
}

}  // namespace
}  // namespace maitre::metrics
