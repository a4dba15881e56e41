// Cost of data-path metric updates on one child, from one thread and from
// two threads hitting the same child (the contended case: two request
// threads finishing queries of the same variant). With() and Render() are
// measured too, to show why handles are kept rather than looked up.
#include <memory>
#include <string>

#include "benchmark/benchmark.h"
#include "metrics/metric_set.h"

namespace maitre::metrics {
namespace {

// One metric_set for the whole run, so every benchmark thread shares children.
struct Fixture {
  Fixture() {
    counter = (*metric_set.AddCounter({"bench_requests_total", "b", {"model", "variant"}}))
                  ->With({"fmnist-cnn", "torch"});
    seconds = (*metric_set.AddCounter({"bench_compute_seconds_total", "b", {"model"}}))
                  ->With({"fmnist-cnn"});
    gauge = (*metric_set.AddGauge({"bench_queue_depth", "b", {"model"}}))->With({"fmnist-cnn"});
    histogram_family = *metric_set.AddHistogram(
        {"bench_duration_seconds", "b", {"model", "variant"}, LatencyBuckets()});
    histogram = histogram_family->With({"fmnist-cnn", "torch"});
  }
  MetricSet metric_set;
  Counter counter;
  Counter seconds;
  Gauge gauge;
  HistogramFamily* histogram_family;
  Histogram histogram;
};

Fixture& Get() {
  static Fixture* fixture = new Fixture();
  return *fixture;
}

void BM_CounterIncrement(benchmark::State& state) {
  Counter counter = Get().counter;
  for (auto _ : state) counter.Increment();
}
BENCHMARK(BM_CounterIncrement)->Threads(1)->Threads(2)->UseRealTime();

void BM_CounterAddDouble(benchmark::State& state) {
  Counter seconds = Get().seconds;
  for (auto _ : state) seconds.Add(0.001);
}
BENCHMARK(BM_CounterAddDouble)->Threads(1)->Threads(2)->UseRealTime();

void BM_GaugeSet(benchmark::State& state) {
  Gauge gauge = Get().gauge;
  double v = 0;
  for (auto _ : state) gauge.Set(v += 1);
}
BENCHMARK(BM_GaugeSet)->Threads(1)->Threads(2)->UseRealTime();

void BM_HistogramObserve(benchmark::State& state) {
  Histogram histogram = Get().histogram;
  // Latencies spread over the 16 buckets, so the search is not always short.
  static const double kValues[] = {0.00007, 0.0004, 0.0012, 0.003, 0.008, 0.02, 0.07, 0.3,
                                   0.9,     1.7,    4,      8,     12,    0.0002, 0.04, 0.15};
  size_t i = 0;
  for (auto _ : state) {
    histogram.Observe(kValues[i]);
    i = (i + 1) % (sizeof(kValues) / sizeof(kValues[0]));
  }
}
BENCHMARK(BM_HistogramObserve)->Threads(1)->Threads(2)->UseRealTime();

// What a per-request With() lookup would cost instead of a kept handle.
void BM_HistogramWithLookup(benchmark::State& state) {
  HistogramFamily* family = Get().histogram_family;
  for (auto _ : state) benchmark::DoNotOptimize(family->With({"fmnist-cnn", "torch"}));
}
BENCHMARK(BM_HistogramWithLookup)->Threads(1)->Threads(2)->UseRealTime();

// A scrape of 100 models x 4 variants, each with a counter and a histogram.
void BM_Render400Children(benchmark::State& state) {
  MetricSet metric_set;
  CounterFamily* counters = *metric_set.AddCounter({"r_total", "r", {"model", "variant"}});
  HistogramFamily* histograms = *metric_set.AddHistogram({"r_seconds", "r", {"model", "variant"}});
  for (int m = 0; m < 100; ++m) {
    for (int v = 0; v < 4; ++v) {
      std::string model = "model-" + std::to_string(m);
      std::string variant = "variant-" + std::to_string(v);
      counters->With({model, variant}).Increment(m * v);
      histograms->With({model, variant}).Observe(0.001 * m);
    }
  }
  size_t bytes = 0;
  for (auto _ : state) {
    std::string text = metric_set.Render();
    bytes = text.size();
    benchmark::DoNotOptimize(text);
  }
  state.counters["bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_Render400Children)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace maitre::metrics

BENCHMARK_MAIN();
