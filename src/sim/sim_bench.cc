// How many simulated queries per second the simulator processes (issue 4's
// goal: at least 2 million for a single-instance batching experiment). Each
// iteration simulates 100 s of Poisson arrivals at 87% of one instance's
// capacity at a 40 ms SLO (the proteus-batching setup), with lognormal
// service noise; items_per_second is simulated queries per wall second.
#include <benchmark/benchmark.h>

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

BENCHMARK(BM_Proteus_Poisson)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Proteus_Gamma)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Nexus_Poisson)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ClipperAimd_Poisson)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Timeout_Poisson)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Mark_Poisson)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Proteus_Poisson_16Instances)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace maitre::sim

BENCHMARK_MAIN();
