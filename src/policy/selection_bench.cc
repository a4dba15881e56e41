// How long one variant-selection decision takes (INFaaS reports a 2.2–3.5 ms
// median; the goal is 5 µs or less; docs/policies.md, "Speed"), and the ratio
// to the brute-force reference, measured in one run on the same requests.
//
// Setup, at four catalogue sizes (apps × models × variants, workers): 1 × 2
// × 5 on 4 workers and 1 × 22 × 8 on 10 (INFaaS Table 7's 10 and ~175
// variants), 10 × 10 × 10 on 50 and 100 × 10 × 10 on 100; 2 worker types
// (cpu-1 and cpu-2 at the default table's prices), workers under random
// utilisation and free memory, each holding 2–8 random instances (70%
// Active, 10% Overloaded, 10% Interfered, 10% loading) with random queues
// and batch sizes. Requests: a random app (10% name one model, 5% pin a
// variant), latency_ms (80%), min_accuracy (70%), max_cost (20%), deadline.
//
// BM_DecisionLatency times every decision one by one and reports, in
// counters (nanoseconds): median and p99 for Select() (and its medians when
// it served a ready instance and when it loaded), for the brute force
// over the app's candidates (kScopeOnly) and over everything (kEverything),
// the ratios of the medians, and the cost of reading the clock twice
// (included in every sample). It also checks that all three decide alike.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "policy/selection.h"
#include "policy/selection_testing.h"

namespace maitre::policy {
namespace {

using selection_testing::Draw;
using selection_testing::LinearProfile;
constexpr Nanos kNow = 3600 * kSecond;

struct World {
  SelectionIndex index;
  LiveState live;
  std::vector<SelectionRequest> requests;
};

// The catalogue's size: apps × models per app × variants per model, and
// how many workers hold instances.
struct Size {
  int apps = 100, models = 10, variants = 10, workers = 100;
  bool operator<(const Size& o) const {
    return std::tie(apps, models, variants, workers) <
           std::tie(o.apps, o.models, o.variants, o.workers);
  }
};

World* MakeWorld(const Size& size) {
  auto* w = new World;
  Draw d(2024);
  SelectionCatalogue c;
  c.worker_types = {{"cpu-1", 1, 4096, 0.0425}, {"cpu-2", 2, 8192, 0.085}};
  for (int a = 0; a < size.apps; ++a) {
    ServableApp app{absl::StrCat("app-", a), {}};
    for (int m = 0; m < size.models; ++m) {
      for (int v = 0; v < size.variants; ++v) {
        ServableVariant var;
        var.key = {absl::StrCat("app-", a, "-model-", m), absl::StrCat("variant-", v)};
        var.accuracy = d.Real(0.6, 0.99);
        const double fixed = d.Real(0.3, 30), per_row = d.Real(0.05, 4);
        const double load = d.Real(50, 800), memory = d.Real(20, 600);
        var.profiles["cpu-1"] = LinearProfile(fixed, per_row, load, memory);
        var.profiles["cpu-2"] = LinearProfile(fixed * 0.55, per_row * 0.55, load, memory);
        app.variants.push_back(std::move(var));
      }
    }
    c.apps.push_back(std::move(app));
  }
  w->index = *SelectionIndex::Create(c);
  const int variants = static_cast<int>(w->index.variants().size());
  for (int i = 0; i < size.workers; ++i) {
    LiveWorker worker;
    worker.type = static_cast<WorkerTypeId>(d.Int(0, 1));
    worker.utilisation = d.Real(0, 1);
    worker.free_memory_mb = d.Real(0, 4000);
    const WorkerId id = w->live.AddWorker(worker);
    const int64_t n = d.Int(2, 8);
    for (int64_t k = 0; k < n; ++k) {
      LiveInstance in;
      in.variant = static_cast<VariantId>(d.Int(0, variants - 1));
      in.worker = id;
      const int64_t s = d.Int(0, 9);
      in.state = s < 7   ? InstanceState::kActive
                 : s < 8 ? InstanceState::kOverloaded
                 : s < 9 ? InstanceState::kInterfered
                         : InstanceState::kInactive;
      in.ready_at = kNow + d.Int(0, 500) * kMillisecond;
      in.waiting = static_cast<int32_t>(d.Int(0, 20));
      in.mean_batch = d.Real(1, 16);
      in.replicas = static_cast<int32_t>(d.Int(1, 2));
      (void)w->live.AddInstance(w->index, in);
    }
  }
  for (int i = 0; i < 8192; ++i) {
    SelectionRequest r;
    r.app = static_cast<AppId>(d.Int(0, size.apps - 1));
    const auto& models = w->index.app(r.app).models;
    const int64_t last_model = static_cast<int64_t>(models.size()) - 1;
    const int64_t scope = d.Int(0, 19);
    if (scope < 2) {
      r.model = models[d.Int(0, last_model)];
    } else if (scope == 2) {
      const auto& vs = w->index.model(models[d.Int(0, last_model)]).variants;
      r.pinned = vs[d.Int(0, static_cast<int64_t>(vs.size()) - 1)];
    }
    if (d.Chance(0.8)) r.requirements.latency_ms = d.Real(2, 100);
    if (d.Chance(0.7)) r.requirements.min_accuracy = d.Real(0.6, 0.98);
    if (d.Chance(0.2)) r.requirements.max_cost = d.Chance(0.5) ? 0.05 : 0.1;
    r.now = kNow;
    r.deadline =
        kNow + (r.requirements.latency_ms ? FromMillis(*r.requirements.latency_ms) : kSecond);
    w->requests.push_back(r);
  }
  return w;
}

// Worlds are built once per size and kept for the process.
const World& TheWorld(const Size& size = {}) {
  static auto* worlds = new std::map<Size, World*>;
  World*& w = (*worlds)[size];
  if (w == nullptr) w = MakeWorld(size);
  return *w;
}

Size SizeOf(const benchmark::State& state) {
  return {static_cast<int>(state.range(0)), static_cast<int>(state.range(1)),
          static_cast<int>(state.range(2)), static_cast<int>(state.range(3))};
}

double Percentile(std::vector<double>& samples, double q) {
  if (samples.empty()) return 0;
  const size_t k = static_cast<size_t>(q * static_cast<double>(samples.size() - 1) + 0.5);
  std::nth_element(samples.begin(), samples.begin() + k, samples.end());
  return samples[k];
}

template <typename F>
double TimeOne(F&& decide) {
  const auto t0 = std::chrono::steady_clock::now();
  SelectionDecision d = decide();
  const auto t1 = std::chrono::steady_clock::now();
  benchmark::DoNotOptimize(d);
  return static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
}

void BM_DecisionLatency(benchmark::State& state) {
  const World& w = TheWorld(SizeOf(state));
  std::vector<double> fast, scope, brute, timer;
  // Select() times by what it decided: serve on a ready instance (INFaaS
  // Table 7's state (b)) or load (state (a): the chosen variant is not
  // running yet).
  std::vector<double> use, load;
  int64_t mismatches = 0;
  int64_t outcomes[5] = {0, 0, 0, 0, 0};
  std::vector<SelectionDecision> a(w.requests.size()), b(a.size()), c(a.size());
  for (auto _ : state) {
    // One pass per method, so that each runs with the caches its own
    // working set leaves (a dispatcher making decisions back to back).
    for (size_t i = 0; i < w.requests.size(); ++i) {
      fast.push_back(TimeOne([&] { return a[i] = Select(w.index, w.live, w.requests[i]); }));
    }
    for (size_t i = 0; i < w.requests.size(); ++i) {
      scope.push_back(TimeOne([&] {
        return b[i] =
                   SelectBruteForce(w.index, w.live, w.requests[i], {}, BruteForceScan::kScopeOnly);
      }));
    }
    for (size_t i = 0; i < w.requests.size(); ++i) {
      brute.push_back(
          TimeOne([&] { return c[i] = SelectBruteForce(w.index, w.live, w.requests[i]); }));
    }
    for (size_t i = 0; i < w.requests.size(); ++i) {
      timer.push_back(TimeOne([] { return SelectionDecision{}; }));
    }
    const size_t first = fast.size() - a.size();
    for (size_t i = 0; i < a.size(); ++i) {
      mismatches += (a[i] != b[i]) + (a[i] != c[i]);
      ++outcomes[static_cast<int>(a[i].outcome)];
      if (a[i].outcome == SelectionOutcome::kUseInstance) use.push_back(fast[first + i]);
      if (a[i].outcome == SelectionOutcome::kLoadAndServe ||
          a[i].outcome == SelectionOutcome::kServeAndLoad) {
        load.push_back(fast[first + i]);
      }
    }
  }
  if (mismatches > 0) {
    state.SkipWithError("Select and the brute force disagree");
    return;
  }
  const double median = Percentile(fast, 0.5), p99 = Percentile(fast, 0.99);
  const double scope_median = Percentile(scope, 0.5), brute_median = Percentile(brute, 0.5);
  state.counters["select_median_ns"] = median;
  state.counters["select_p99_ns"] = p99;
  state.counters["select_use_median_ns"] = Percentile(use, 0.5);
  state.counters["select_load_median_ns"] = Percentile(load, 0.5);
  state.counters["variants"] = static_cast<double>(w.index.variants().size());
  state.counters["scan_app_median_ns"] = scope_median;
  state.counters["scan_app_p99_ns"] = Percentile(scope, 0.99);
  state.counters["scan_all_median_ns"] = brute_median;
  state.counters["scan_all_p99_ns"] = Percentile(brute, 0.99);
  state.counters["ratio_scan_app"] = scope_median / median;
  state.counters["ratio_scan_all"] = brute_median / median;
  state.counters["clock_ns"] = Percentile(timer, 0.5);
  int instances = 0;
  for (InstanceId i = 0; i < w.live.instance_slots(); ++i) instances += w.live.has_instance(i);
  state.counters["instances"] = instances;
  const double n = static_cast<double>(fast.size());
  state.counters["use_pct"] = 100.0 * outcomes[0] / n;
  state.counters["load_pct"] = 100.0 * outcomes[1] / n;
  state.counters["serve_load_pct"] = 100.0 * outcomes[2] / n;
  state.counters["unsat_pct"] = 100.0 * outcomes[3] / n;
  state.counters["unavail_pct"] = 100.0 * outcomes[4] / n;
}
// Catalogues: INFaaS Table 7's smallest and largest (about 10 and 175
// variants, one app) and two larger ones.
void CatalogueSizes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"apps", "models", "variants", "workers"});
  b->Args({1, 2, 5, 4});
  b->Args({1, 22, 8, 10});
  b->Args({10, 10, 10, 50});
  b->Args({100, 10, 10, 100});
}
BENCHMARK(BM_DecisionLatency)->Apply(CatalogueSizes)->Iterations(3)->Unit(benchmark::kMillisecond);

// Mean decision time without per-decision clock reads, for comparison.
void BM_SelectMean(benchmark::State& state) {
  const World& w = TheWorld();
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(Select(w.index, w.live, w.requests[i]));
    i = (i + 1) % w.requests.size();
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_SelectMean);

// Name resolution (what the dispatcher adds per query) plus the decision.
void BM_ResolveAndSelect(benchmark::State& state) {
  const World& w = TheWorld();
  std::vector<std::string> names;
  for (const SelectionRequest& r : w.requests) names.push_back(w.index.app(r.app).name);
  size_t i = 0;
  for (auto _ : state) {
    SelectionRequest r = w.requests[i];
    r.app = w.index.FindApp(names[i]);
    benchmark::DoNotOptimize(Select(w.index, w.live, r));
    i = (i + 1) % w.requests.size();
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_ResolveAndSelect);

}  // namespace
}  // namespace maitre::policy

BENCHMARK_MAIN();
