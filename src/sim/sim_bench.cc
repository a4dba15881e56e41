// How many simulated queries per second the simulator processes (the goal: at
// least 2 million for a single-instance batching experiment; figures in
// docs/experiments.md, "proteus-batching"). Each iteration simulates 100 s of
// Poisson arrivals at 87% of one instance's capacity at a 40 ms SLO (the
// proteus-batching setup), with lognormal service noise; items_per_second is
// simulated queries per second of CPU time. BM_Managed_* runs a managed cluster
// (selection and autoscalers).
#include <benchmark/benchmark.h>

#include "sim/experiment.h"
#include "sim/simulator.h"
#include "sim/testing/setups.h"

namespace maitre::sim {
namespace {

void RunSingleInstance(benchmark::State& state, const char* policy, GeneratorKind kind,
                       int instances) {
  SimulationSetup setup = testing::LinearSetup(policy, instances);
  setup.service_noise = true;
  setup.horizon = 100 * kSecond;
  GeneratorSpec spec;
  spec.kind = kind;
  spec.rate_qps = 348.0 * instances;  // 87% of SaturationQps(40 ms) = 400 per instance
  spec.cv = 4.47;
  spec.duration = setup.horizon;
  int64_t queries = 0;
  for (auto _ : state) {
    auto sim = Simulator::Create(setup, *CreateGenerator(spec));
    if (!sim.ok() || !(*sim)->Run().ok()) {
      state.SkipWithError("simulation failed");
      return;
    }
    queries += (*sim)->metrics().total.arrived;
    benchmark::DoNotOptimize((*sim)->metrics().total.on_time);
  }
  state.SetItemsProcessed(queries);
}

void BM_Proteus_Poisson(benchmark::State& s) {
  RunSingleInstance(s, "proteus", GeneratorKind::kPoisson, 1);
}
void BM_Proteus_Gamma(benchmark::State& s) {
  RunSingleInstance(s, "proteus", GeneratorKind::kGamma, 1);
}
void BM_Nexus_Poisson(benchmark::State& s) {
  RunSingleInstance(s, "nexus", GeneratorKind::kPoisson, 1);
}
void BM_ClipperAimd_Poisson(benchmark::State& s) {
  RunSingleInstance(s, "clipper-aimd", GeneratorKind::kPoisson, 1);
}
void BM_Timeout_Poisson(benchmark::State& s) {
  RunSingleInstance(s, "timeout", GeneratorKind::kPoisson, 1);
}
void BM_Mark_Poisson(benchmark::State& s) {
  RunSingleInstance(s, "mark", GeneratorKind::kPoisson, 1);
}
// Sixteen instances behind the least-queued router.
void BM_Proteus_Poisson_16Instances(benchmark::State& s) {
  RunSingleInstance(s, "proteus", GeneratorKind::kPoisson, 16);
}

// A managed cluster: every query routed by the selection policy, reports and
// the instance state machine every second, the model autoscaler per worker
// and the cluster autoscaler, on bursts between 50 and 1500 qps (100 s).
void BM_Managed_SelectionAndAutoscaling(benchmark::State& state) {
  constexpr char kYaml[] = R"(
name: bench-managed
cluster:
  worker_types:
    - {name: cpu, cores: 4, memory_mb: 8192, price_per_hour: 0.2, launch_s: 10}
    - {name: gpu, cores: 8, memory_mb: 16384, price_per_hour: 3, launch_s: 10}
  workers: {cpu: 1, gpu: 1}
profiles:
  - {model: cnn, variant: cpu, worker_type: cpu, accuracy: 0.76, load_ms: 800, memory_mb: 300,
     points: [[1, 30, 33], [4, 100, 110]]}
  - {model: cnn, variant: cpu, worker_type: gpu, accuracy: 0.76, load_ms: 800,
     points: [[1, 30, 33], [4, 100, 110]]}
  - {model: cnn, variant: trt, worker_type: gpu, accuracy: 0.76, load_ms: 4000, memory_mb: 12000,
     points: [[1, 3, 3.3], [8, 10, 11], [32, 40, 44]]}
apps:
  - {name: a, latency_ms: 150, models: [cnn]}
trace: {generator: mmpp, rates_qps: [50, 1500], mean_dwell_s: [10, 10], duration_s: 100, seed: 1}
policies:
  batching: {name: nexus, max_batch: 32}
  routing: selection
  model_autoscaler: infaas
  cluster_autoscaler: on
simulation: {service_noise: lognormal}
)";
  auto experiment = ParseExperiment(kYaml, ".");
  if (!experiment.ok()) {
    state.SkipWithError("bad experiment");
    return;
  }
  int64_t queries = 0;
  for (auto _ : state) {
    auto sim = BuildSimulator(*experiment);
    if (!sim.ok() || !(*sim)->Run().ok()) {
      state.SkipWithError("simulation failed");
      return;
    }
    queries += (*sim)->metrics().total.arrived;
    benchmark::DoNotOptimize((*sim)->metrics().total.on_time);
  }
  state.SetItemsProcessed(queries);
}

BENCHMARK(BM_Proteus_Poisson)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Proteus_Gamma)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Nexus_Poisson)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ClipperAimd_Poisson)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Timeout_Poisson)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Mark_Poisson)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Proteus_Poisson_16Instances)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Managed_SelectionAndAutoscaling)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace maitre::sim

BENCHMARK_MAIN();
