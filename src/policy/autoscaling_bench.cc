// autoscaling_bench: the model autoscaler's heuristic (ModelAutoscaler::
// PlanScaleUp) against the reference ILP solved by CBC (SolveScaleUpIlp) on
// random small workers (policy/autoscaling_random.h).
//
//   BM_HeuristicScaleUp/<models>  time per heuristic decision
//   BM_IlpScaleUp/<models>        time per ILP solve
//   BM_GapToOptimum/<models>      one pass over the instances; its counters
//                                 report the cost gap (median, p90, max), how
//                                 often the heuristic is optimal, how often it
//                                 asks for placement elsewhere although the
//                                 worker could take an optimal plan, and the
//                                 median decision times and their ratio.
//
// The gap of one instance is (H - O) / (O + S): H and O are the heuristic's
// and the optimum's move costs Σ C·(δ + λ·T_load·max(δ,0)) and S the running
// cost of the setup before the move, so O + S is what the optimal setup costs
// per second, loading penalty included. Instances where the ILP is
// infeasible (nothing fits) are left out; the heuristic then asks for
// placement, as it should.
#include <algorithm>
#include <chrono>
#include <random>
#include <vector>

#include <benchmark/benchmark.h>

#include "policy/autoscaling_ilp.h"
#include "policy/autoscaling_model.h"
#include "policy/autoscaling_random.h"

namespace maitre::policy {
namespace {

constexpr int kInstances = 300;

std::vector<ModelScalingSnapshot> Instances(int max_models) {
  std::mt19937_64 rng(20240607 + max_models);
  testing::RandomScalingOptions shape;
  shape.max_models = max_models;
  std::vector<ModelScalingSnapshot> out;
  for (int i = 0; i < kInstances; ++i) out.push_back(testing::RandomScalingSnapshot(rng, shape));
  return out;
}

const ModelAutoscaler& Heuristic() {
  static const ModelAutoscaler* a = ModelAutoscaler::Create({})->release();
  return *a;
}

void BM_HeuristicScaleUp(benchmark::State& state) {
  std::vector<ModelScalingSnapshot> instances = Instances(static_cast<int>(state.range(0)));
  size_t i = 0;
  for (auto _ : state) {
    auto plan = Heuristic().PlanScaleUp(instances[i++ % instances.size()]);
    benchmark::DoNotOptimize(plan);
  }
}
BENCHMARK(BM_HeuristicScaleUp)->Arg(1)->Arg(3);

void BM_IlpScaleUp(benchmark::State& state) {
  std::vector<ModelScalingSnapshot> instances = Instances(static_cast<int>(state.range(0)));
  size_t i = 0;
  for (auto _ : state) {
    auto result = SolveScaleUpIlp(instances[i++ % instances.size()], Heuristic().options());
    benchmark::DoNotOptimize(result);
  }
}
BENCHMARK(BM_IlpScaleUp)->Arg(1)->Arg(3)->Unit(benchmark::kMillisecond);

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * (v.size() - 1) + 0.5)];
}

void BM_GapToOptimum(benchmark::State& state) {
  using Clock = std::chrono::steady_clock;
  std::vector<ModelScalingSnapshot> instances = Instances(static_cast<int>(state.range(0)));
  std::vector<double> gaps, heuristic_us, ilp_us;
  int optimal = 0, misses = 0, infeasible = 0, unproven = 0;
  for (auto _ : state) {
    gaps.clear();
    heuristic_us.clear();
    ilp_us.clear();
    optimal = misses = infeasible = unproven = 0;
    for (const ModelScalingSnapshot& s : instances) {
      // The heuristic is too fast to time once; repeat it.
      constexpr int kRepeats = 200;
      auto start = Clock::now();
      absl::StatusOr<std::vector<ModelScaleAction>> plan;
      for (int r = 0; r < kRepeats; ++r) {
        plan = Heuristic().PlanScaleUp(s);
        benchmark::DoNotOptimize(plan);
      }
      heuristic_us.push_back(
          std::chrono::duration<double, std::micro>(Clock::now() - start).count() / kRepeats);
      start = Clock::now();
      auto ilp = SolveScaleUpIlp(s, Heuristic().options());
      ilp_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
      if (!plan.ok() || !ilp.ok()) {
        state.SkipWithError("a solve failed");
        return;
      }
      if (!ilp->feasible) {
        ++infeasible;
        continue;
      }
      if (!ilp->optimal) ++unproven;
      bool local = true;
      for (const ModelScaleAction& a : *plan) {
        local &= a.kind != ModelScaleAction::Kind::kNeedsPlacement;
      }
      if (!local) {
        ++misses;
        continue;
      }
      double h = ScaleActionsCost(*plan), o = ilp->objective_per_s;
      double gap = (h - o) / (o + SetupCostPerSecond(s));
      gaps.push_back(std::max(0.0, gap));
      if (gap <= 1e-9) ++optimal;
    }
  }
  state.counters["instances"] = static_cast<double>(instances.size());
  state.counters["compared"] = static_cast<double>(gaps.size());
  state.counters["ilp_infeasible"] = infeasible;
  state.counters["ilp_unproven"] = unproven;
  state.counters["heuristic_misses"] = misses;
  state.counters["heuristic_optimal_pct"] = gaps.empty() ? 0 : 100.0 * optimal / gaps.size();
  state.counters["gap_median_pct"] = 100 * Quantile(gaps, 0.5);
  state.counters["gap_p90_pct"] = 100 * Quantile(gaps, 0.9);
  state.counters["gap_max_pct"] = 100 * Quantile(gaps, 1.0);
  double h_us = Quantile(heuristic_us, 0.5), i_us = Quantile(ilp_us, 0.5);
  state.counters["heuristic_us_median"] = h_us;
  state.counters["ilp_us_median"] = i_us;
  state.counters["ilp_over_heuristic_time"] = h_us > 0 ? i_us / h_us : 0;
}
BENCHMARK(BM_GapToOptimum)->Arg(1)->Arg(3)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace maitre::policy

BENCHMARK_MAIN();
