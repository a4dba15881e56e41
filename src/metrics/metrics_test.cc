#include "metrics/metrics.h"

#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "metrics/metric_set.h"

namespace maitre::metrics {
namespace {

using ::testing::HasSubstr;

// Unwraps a registration that the test expects to succeed.
template <typename T>
T* Must(absl::StatusOr<T*> family) {
  EXPECT_TRUE(family.ok()) << family.status();
  return family.ok() ? *family : nullptr;
}

TEST(CounterTest, IntegerAndFractionalIncrements) {
  MetricSet metric_set;
  CounterFamily* requests = Must(metric_set.AddCounter(
      {"maitre_requests_total", "Requests answered.", {"model", "variant"}}));
  Counter torch = requests->With({"fmnist-cnn", "torch"});
  torch.Increment();
  torch.Increment(4);
  EXPECT_EQ(torch.Value(), 5);

  CounterFamily* compute = Must(metric_set.AddCounter(
      {"maitre_compute_seconds_total", "Seconds spent computing.", {}}));
  Counter seconds = compute->With();
  seconds.Add(0.25);
  seconds.Add(0.5);
  EXPECT_EQ(seconds.Value(), 0.75);
}

TEST(CounterTest, NeverGoesDown) {
  MetricSet metric_set;
  Counter c = Must(metric_set.AddCounter({"c_total", "c", {}}))->With();
  c.Increment(3);
  c.Increment(-2);
  c.Add(-1.5);
  c.Add(std::nan(""));
  EXPECT_EQ(c.Value(), 3);
}

TEST(CounterTest, WithReturnsTheSameChildForTheSameLabels) {
  MetricSet metric_set;
  CounterFamily* family = Must(metric_set.AddCounter({"c_total", "c", {"model"}}));
  family->With({"a"}).Increment();
  family->With({"a"}).Increment();
  EXPECT_EQ(family->With({"a"}).Value(), 2);
  EXPECT_EQ(family->With({"b"}).Value(), 0);
}

TEST(HandleTest, DetachedHandlesDropUpdates) {
  Counter counter;
  Gauge gauge;
  Histogram histogram;
  counter.Increment();
  counter.Add(1.5);
  gauge.Set(3);
  gauge.Add(1);
  histogram.Observe(0.1);
  EXPECT_FALSE(counter.attached());
  EXPECT_EQ(counter.Value(), 0);
  EXPECT_EQ(gauge.Value(), 0);
  EXPECT_EQ(histogram.Snapshot().count, 0u);
}

TEST(GaugeTest, SetAndAdd) {
  MetricSet metric_set;
  Gauge g = Must(metric_set.AddGauge({"queue_depth", "Queued queries.", {}}))->With();
  g.Set(10);
  g.Add(2.5);
  g.Decrement();
  g.Increment();
  g.Add(-4);
  EXPECT_EQ(g.Value(), 8.5);
}

TEST(HistogramTest, BucketsAreInclusiveUpperBounds) {
  MetricSet metric_set;
  Histogram h = Must(metric_set.AddHistogram({"lat_seconds", "Latency.", {}, {0.1, 0.5, 1}}))->With();
  h.Observe(0.05);
  h.Observe(0.1);  // on a bound: counts in le="0.1"
  h.Observe(0.3);
  h.Observe(2);
  h.ObserveNanos(500 * kMillisecond);
  HistogramSnapshot s = h.Snapshot();
  EXPECT_EQ(s.bounds, (std::vector<double>{0.1, 0.5, 1}));
  EXPECT_EQ(s.cumulative_counts, (std::vector<uint64_t>{2, 4, 4, 5}));
  EXPECT_EQ(s.count, 5u);
  EXPECT_DOUBLE_EQ(s.sum, 2.95);
}

TEST(HistogramTest, NanGoesToInfBucket) {
  MetricSet metric_set;
  Histogram h = Must(metric_set.AddHistogram({"h_seconds", "h", {}, {1}}))->With();
  h.Observe(std::nan(""));
  HistogramSnapshot s = h.Snapshot();
  EXPECT_EQ(s.cumulative_counts, (std::vector<uint64_t>{0, 1}));
  EXPECT_TRUE(std::isnan(s.sum));
}

TEST(RenderTest, GoldenCounterGaugeHistogram) {
  MetricSet metric_set;
  CounterFamily* requests = Must(metric_set.AddCounter(
      {"maitre_requests_total", "Requests answered, by model and variant.", {"model", "variant"}}));
  GaugeFamily* depth =
      Must(metric_set.AddGauge({"maitre_queue_depth", "Queries waiting.", {"variant"}}));
  HistogramFamily* latency = Must(metric_set.AddHistogram(
      {"maitre_request_duration_seconds", "End-to-end latency.", {"model"}, {0.005, 0.1, 1}}));
  CounterFamily* compute =
      Must(metric_set.AddCounter({"maitre_compute_seconds_total", "Compute time.", {}}));

  // Created out of order: rendering sorts children by label values.
  requests->With({"resnet", "torch"}).Increment(7);
  requests->With({"fmnist-cnn", "torch"}).Increment(3);
  requests->With({"fmnist-cnn", "onnx"}).Increment();
  depth->With({"b"}).Set(-2);
  depth->With({"a"}).Set(0.25);
  Histogram fmnist = latency->With({"fmnist-cnn"});
  fmnist.Observe(0.004);
  fmnist.Observe(0.05);
  fmnist.Observe(3);
  compute->With().Add(1.5);
  compute->With().Increment(2);

  EXPECT_EQ(metric_set.Render(),
            "# HELP maitre_compute_seconds_total Compute time.\n"
            "# TYPE maitre_compute_seconds_total counter\n"
            "maitre_compute_seconds_total 3.5\n"
            "# HELP maitre_queue_depth Queries waiting.\n"
            "# TYPE maitre_queue_depth gauge\n"
            "maitre_queue_depth{variant=\"a\"} 0.25\n"
            "maitre_queue_depth{variant=\"b\"} -2\n"
            "# HELP maitre_request_duration_seconds End-to-end latency.\n"
            "# TYPE maitre_request_duration_seconds histogram\n"
            "maitre_request_duration_seconds_bucket{model=\"fmnist-cnn\",le=\"0.005\"} 1\n"
            "maitre_request_duration_seconds_bucket{model=\"fmnist-cnn\",le=\"0.1\"} 2\n"
            "maitre_request_duration_seconds_bucket{model=\"fmnist-cnn\",le=\"1\"} 2\n"
            "maitre_request_duration_seconds_bucket{model=\"fmnist-cnn\",le=\"+Inf\"} 3\n"
            "maitre_request_duration_seconds_sum{model=\"fmnist-cnn\"} 3.054\n"
            "maitre_request_duration_seconds_count{model=\"fmnist-cnn\"} 3\n"
            "# HELP maitre_requests_total Requests answered, by model and variant.\n"
            "# TYPE maitre_requests_total counter\n"
            "maitre_requests_total{model=\"fmnist-cnn\",variant=\"onnx\"} 1\n"
            "maitre_requests_total{model=\"fmnist-cnn\",variant=\"torch\"} 3\n"
            "maitre_requests_total{model=\"resnet\",variant=\"torch\"} 7\n");
}

TEST(RenderTest, UnlabelledFamiliesAreExportedBeforeFirstUpdate) {
  MetricSet metric_set;
  Must(metric_set.AddCounter({"actions_total", "Autoscaler actions.", {}}));
  Must(metric_set.AddHistogram({"h_seconds", "h", {}, {1}}));
  // A labelled family has no children yet, so it is left out.
  Must(metric_set.AddGauge({"g", "g", {"x"}}));
  EXPECT_EQ(metric_set.Render(),
            "# HELP actions_total Autoscaler actions.\n"
            "# TYPE actions_total counter\n"
            "actions_total 0\n"
            "# HELP h_seconds h\n"
            "# TYPE h_seconds histogram\n"
            "h_seconds_bucket{le=\"1\"} 0\n"
            "h_seconds_bucket{le=\"+Inf\"} 0\n"
            "h_seconds_sum 0\n"
            "h_seconds_count 0\n");
}

TEST(RenderTest, EmptyMetricSetRendersNothing) {
  MetricSet metric_set;
  EXPECT_EQ(metric_set.Render(), "");
}

TEST(RenderTest, HistogramWithoutFiniteBounds) {
  MetricSet metric_set;
  Histogram h = Must(metric_set.AddHistogram({"h_seconds", "h", {}, {}}))->With();
  h.Observe(4);
  EXPECT_EQ(metric_set.Render(),
            "# HELP h_seconds h\n"
            "# TYPE h_seconds histogram\n"
            "h_seconds_bucket{le=\"+Inf\"} 1\n"
            "h_seconds_sum 4\n"
            "h_seconds_count 1\n");
}

TEST(RenderTest, SpecialFloatValues) {
  MetricSet metric_set;
  GaugeFamily* g = Must(metric_set.AddGauge({"g", "g", {"v"}}));
  g->With({"nan"}).Set(std::nan(""));
  g->With({"pos"}).Set(std::numeric_limits<double>::infinity());
  g->With({"neg"}).Set(-std::numeric_limits<double>::infinity());
  g->With({"big"}).Set(1.5e9);
  g->With({"small"}).Set(2e-7);
  EXPECT_EQ(metric_set.Render(),
            "# HELP g g\n"
            "# TYPE g gauge\n"
            "g{v=\"big\"} 1.5e+09\n"
            "g{v=\"nan\"} NaN\n"
            "g{v=\"neg\"} -Inf\n"
            "g{v=\"pos\"} +Inf\n"
            "g{v=\"small\"} 2e-07\n");
}

TEST(RenderTest, IntegerCountersStayExactPastDoublePrecision) {
  MetricSet metric_set;
  Counter c = Must(metric_set.AddCounter({"c_total", "c", {}}))->With();
  c.Increment(uint64_t{9007199254740993});  // 2^53 + 1: not a double
  EXPECT_THAT(metric_set.Render(), HasSubstr("\nc_total 9007199254740993\n"));
}

TEST(RenderTest, EscapesLabelValuesAndHelp) {
  MetricSet metric_set;
  GaugeFamily* g = Must(metric_set.AddGauge(
      {"g", "Help with a \\ backslash,\na newline and \"quotes\".", {"path"}}));
  g->With({"C:\\models\\\"new\"\nline"}).Set(1);
  EXPECT_EQ(metric_set.Render(),
            "# HELP g Help with a \\\\ backslash,\\na newline and \"quotes\".\n"
            "# TYPE g gauge\n"
            "g{path=\"C:\\\\models\\\\\\\"new\\\"\\nline\"} 1\n");
}

TEST(RenderTest, InvalidUtf8LabelValueIsReplaced) {
  MetricSet metric_set;
  GaugeFamily* g = Must(metric_set.AddGauge({"g", "g", {"model"}}));
  g->With({"bad\xFF"}).Set(1);
  // The sanitised value is the child's key: the same bytes find it again.
  g->With({"bad\xFF"}).Add(1);
  EXPECT_EQ(metric_set.Render(), "# HELP g g\n# TYPE g gauge\ng{model=\"bad\xEF\xBF\xBD\"} 2\n");
}

TEST(MetricSetTest, RejectsInvalidNames) {
  MetricSet metric_set;
  EXPECT_EQ(metric_set.AddCounter({"requests", "r", {}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(metric_set.AddGauge({"bad-name", "x", {}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(metric_set.AddGauge({"g", "x", {"__reserved"}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(metric_set.AddGauge({"g", "x", {"a", "a"}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(metric_set.AddHistogram({"h_seconds", "x", {"le"}, {1}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(metric_set.AddCollectedGauge({"x:y", "x", {}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(metric_set.AddCollectedCounter({"workers", "x", {}}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(MetricSetTest, RequiresHelp) {
  MetricSet metric_set;
  absl::Status status = metric_set.AddGauge({"g", "", {}}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("help"));
}

TEST(MetricSetTest, RejectsBadBucketBounds) {
  MetricSet metric_set;
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(metric_set.AddHistogram({"a_seconds", "x", {}, {1, 1}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(metric_set.AddHistogram({"b_seconds", "x", {}, {2, 1}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(metric_set.AddHistogram({"c_seconds", "x", {}, {1, inf}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(metric_set.AddHistogram({"d_seconds", "x", {}, {std::nan("")}}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(MetricSetTest, RejectsDuplicateAndCollidingNames) {
  MetricSet metric_set;
  Must(metric_set.AddGauge({"g", "g", {}}));
  EXPECT_EQ(metric_set.AddGauge({"g", "g", {}}).status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(metric_set.AddCollectedGauge({"g", "g", {}}).status().code(),
            absl::StatusCode::kAlreadyExists);
  // Histogram "batch" exports batch_count; a histogram named batch_count
  // would be a second family claiming that series.
  Must(metric_set.AddHistogram({"batch", "Batch sizes.", {}, {1, 2, 4}}));
  EXPECT_EQ(metric_set.AddHistogram({"batch_count", "x", {}, {1}}).status().code(),
            absl::StatusCode::kAlreadyExists);
}

TEST(MetricSetTest, TryWithChecksArity) {
  MetricSet metric_set;
  CounterFamily* c = Must(metric_set.AddCounter({"c_total", "c", {"model", "variant"}}));
  absl::StatusOr<Counter> child = c->TryWith({"only-model"});
  EXPECT_EQ(child.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(child.status().message()), HasSubstr("model, variant"));
  EXPECT_TRUE(c->TryWith({"m", "v"}).ok());
  GaugeFamily* g = Must(metric_set.AddGauge({"g", "g", {}}));
  EXPECT_FALSE(g->TryWith({"extra"}).ok());
  HistogramFamily* h = Must(metric_set.AddHistogram({"h_seconds", "h", {"a"}, {1}}));
  EXPECT_FALSE(h->TryWith({}).ok());
}

TEST(MetricSetDeathTest, WithAbortsOnWrongArity) {
  MetricSet metric_set;
  CounterFamily* c = Must(metric_set.AddCounter({"c_total", "c", {"model"}}));
  EXPECT_DEATH(c->With({"a", "b"}), "takes 1 label values");
}

TEST(CollectorTest, CollectedGaugesAndCountersAreFilledAtScrape) {
  MetricSet metric_set;
  CollectedFamily* instances = Must(
      metric_set.AddCollectedGauge({"maitre_instances", "Instances by state.", {"state"}}));
  CollectedFamily* cost =
      Must(metric_set.AddCollectedGauge({"maitre_cost_rate_dollars", "Cluster cost rate.", {}}));
  CollectedFamily* served = Must(metric_set.AddCollectedCounter(
      {"maitre_worker_requests_total", "Requests reported by workers.", {"worker"}}));
  std::vector<std::string> states = {"ready", "loading", "ready"};
  double cost_rate = 1.25;
  int scrapes = 0;
  metric_set.AddCollector([&](Collector& c) {
    ++scrapes;
    c.Set(instances, {"failed"}, 0);
    for (const std::string& state : states) c.Add(instances, {state}, 1);
    c.Set(cost, {}, cost_rate);
  });
  metric_set.AddCollector([&](Collector& c) { c.Set(served, {"w1"}, 42); });

  const std::string expected_first =
      "# HELP maitre_cost_rate_dollars Cluster cost rate.\n"
      "# TYPE maitre_cost_rate_dollars gauge\n"
      "maitre_cost_rate_dollars 1.25\n"
      "# HELP maitre_instances Instances by state.\n"
      "# TYPE maitre_instances gauge\n"
      "maitre_instances{state=\"failed\"} 0\n"
      "maitre_instances{state=\"loading\"} 1\n"
      "maitre_instances{state=\"ready\"} 2\n"
      "# HELP maitre_worker_requests_total Requests reported by workers.\n"
      "# TYPE maitre_worker_requests_total counter\n"
      "maitre_worker_requests_total{worker=\"w1\"} 42\n";
  EXPECT_EQ(metric_set.Render(), expected_first);
  // Samples belong to one scrape: the next one starts from nothing.
  states = {"loading"};
  cost_rate = 0.5;
  std::string second = metric_set.Render();
  EXPECT_THAT(second, HasSubstr("maitre_instances{state=\"loading\"} 1\n"));
  EXPECT_THAT(second, ::testing::Not(HasSubstr("state=\"ready\"")));
  EXPECT_THAT(second, HasSubstr("maitre_cost_rate_dollars 0.5\n"));
  EXPECT_EQ(scrapes, 2);
}

TEST(CollectorTest, RemovedCollectorNoLongerRuns) {
  MetricSet metric_set;
  CollectedFamily* g = Must(metric_set.AddCollectedGauge({"g", "g", {}}));
  int calls = 0;
  CollectorId id = metric_set.AddCollector([&](Collector& c) {
    ++calls;
    c.Set(g, {}, 1);
  });
  EXPECT_EQ(metric_set.Render(), "# HELP g g\n# TYPE g gauge\ng 1\n");
  metric_set.RemoveCollector(id);
  metric_set.RemoveCollector(id);  // unknown ids are ignored
  EXPECT_EQ(metric_set.Render(), "");
  EXPECT_EQ(calls, 1);
}

TEST(CollectorDeathTest, FamilyFromAnotherMetricSetAborts) {
  MetricSet mine;
  MetricSet other;
  CollectedFamily* foreign = Must(other.AddCollectedGauge({"g", "g", {}}));
  mine.AddCollector([&](Collector& c) { c.Set(foreign, {}, 1); });
  EXPECT_DEATH(mine.Render(), "not declared in the metric_set");
}

TEST(CollectorDeathTest, WrongArityAborts) {
  MetricSet metric_set;
  CollectedFamily* g = Must(metric_set.AddCollectedGauge({"g", "g", {"state"}}));
  metric_set.AddCollector([&](Collector& c) { c.Set(g, {}, 1); });
  EXPECT_DEATH(metric_set.Render(), "takes 1 label values");
}

TEST(ConcurrencyTest, UpdatesFromManyThreadsSumExactly) {
  MetricSet metric_set;
  CounterFamily* counters = Must(metric_set.AddCounter({"c_total", "c", {"kind"}}));
  Counter whole = counters->With({"whole"});
  Counter fraction = counters->With({"fraction"});
  Gauge gauge = Must(metric_set.AddGauge({"g", "g", {}}))->With();
  Histogram histogram =
      Must(metric_set.AddHistogram({"h_seconds", "h", {}, {0.5, 1.5, 2.5}}))->With();

  constexpr int kThreads = 8;
  constexpr int kIterations = 100000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kIterations; ++i) {
        whole.Increment();
        fraction.Add(0.5);  // exact in binary, so the total is exact too
        gauge.Add(t % 2 == 0 ? 1 : -1);
        histogram.Observe(static_cast<double>(i % 3));  // 0, 1, 2
      }
    });
  }
  // Scrapes and new children while the updates run must be safe; their
  // values are not checked here.
  for (int i = 0; i < 20; ++i) {
    counters->With({"extra" + std::to_string(i)}).Increment();
    EXPECT_FALSE(metric_set.Render().empty());
  }
  for (std::thread& thread : threads) thread.join();

  EXPECT_EQ(whole.Value(), kThreads * kIterations);
  EXPECT_EQ(fraction.Value(), kThreads * kIterations * 0.5);
  EXPECT_EQ(gauge.Value(), 0);
  HistogramSnapshot s = histogram.Snapshot();
  // 100000 = 3 * 33333 + 1: value 0 occurs 33334 times per thread.
  EXPECT_EQ(s.cumulative_counts,
            (std::vector<uint64_t>{kThreads * 33334u, kThreads * 66667u, kThreads * 100000u,
                                   kThreads * 100000u}));
  EXPECT_EQ(s.count, uint64_t{kThreads} * kIterations);
  EXPECT_EQ(s.sum, kThreads * (33333.0 * 1 + 33333.0 * 2));
}

TEST(ConcurrencyTest, ConcurrentWithReturnsOneChildPerLabelSet) {
  MetricSet metric_set;
  CounterFamily* family = Must(metric_set.AddCounter({"c_total", "c", {"model"}}));
  constexpr int kThreads = 8;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) family->With({"m" + std::to_string(i % 10)}).Increment();
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int m = 0; m < 10; ++m) {
    EXPECT_EQ(family->With({"m" + std::to_string(m)}).Value(), kThreads * 100);
  }
}

TEST(BucketsTest, Helpers) {
  EXPECT_EQ(ExponentialBuckets(1, 2, 4), (std::vector<double>{1, 2, 4, 8}));
  EXPECT_EQ(LinearBuckets(0, 5, 3), (std::vector<double>{0, 5, 10}));
  std::vector<double> latency = LatencyBuckets();
  EXPECT_TRUE(std::is_sorted(latency.begin(), latency.end()));
  EXPECT_EQ(latency.front(), 0.0001);
  EXPECT_EQ(latency.back(), 10);
}

}  // namespace
}  // namespace maitre::metrics
