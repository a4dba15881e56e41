#include "policy/autoscaling_ilp.h"

#include <cmath>
#include <functional>
#include <optional>
#include <random>

#include <gtest/gtest.h>

#include "policy/autoscaling_random.h"
#include "policy/testing/scaling_variant.h"

namespace maitre::policy {
namespace {

ScalingVariant V(std::string name, double qps, double cost, double load_s, int replicas = 0,
                 double accuracy = 0.9) {
  return testing::MakeVariant(std::move(name), qps, cost, load_s, replicas, accuracy);
}

ModelScalingSnapshot Worker(double cores, std::vector<ScalingVariant> variants, double load) {
  ModelScalingSnapshot s;
  s.cores = cores;
  s.memory_mb = 4096;
  s.models.push_back({"cnn", load, std::move(variants), std::nullopt});
  return s;
}

TEST(ScaleUpIlpTest, FindsTheUpgrade) {
  // As in the heuristic's table: one w replacing u costs 1.5·1.1 − 1.
  ModelScalingSnapshot s = Worker(8, {V("u", 10, 1, 1, 1), V("w", 100, 1.5, 1)}, 50);
  auto r = SolveScaleUpIlp(s, {});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_TRUE(r->feasible);
  EXPECT_TRUE(r->optimal);
  EXPECT_NEAR(r->objective_per_s, 0.65, 1e-9);
  EXPECT_EQ(r->replicas[0], (std::vector<int>{0, 1}));
}

TEST(ScaleUpIlpTest, CombinesMovesTheHeuristicDoesNot) {
  // One expensive u (140 qps at $7) at 190 qps; 199.5 needed. The optimum
  // switches u to one w and tops up with one x: 1.1·(4.7 + 1) − 7. The
  // heuristic's single moves cannot both switch and top up: its best adds
  // three x alongside u (3.3); switching u to w needs two w (10.34 − 7).
  ModelScalingSnapshot s =
      Worker(8, {V("u", 140, 7, 1, 1), V("w", 180, 4.7, 1), V("x", 20, 1, 1)}, 190);
  auto r = SolveScaleUpIlp(s, {});
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(r->feasible);
  EXPECT_EQ(r->replicas[0], (std::vector<int>{0, 1, 1}));
  EXPECT_NEAR(r->objective_per_s, 1.1 * 5.7 - 7, 1e-9);
  auto plan = (*ModelAutoscaler::Create({}))->PlanScaleUp(s);
  ASSERT_TRUE(plan.ok());
  EXPECT_NEAR(ScaleActionsCost(*plan), 3.3, 1e-9);
}

TEST(ScaleUpIlpTest, HeuristicConsolidatesLikeTheOptimum) {
  // One a (20 qps) and one b (47 qps) at 65 qps; 68.25 needed: both give way
  // to one w (2.75 − 1.6 − 2.8), in the heuristic as in the optimum.
  ModelScalingSnapshot s =
      Worker(8, {V("a", 20, 1.6, 1, 1), V("b", 47, 2.8, 1, 1), V("w", 77, 2.5, 1)}, 65);
  auto r = SolveScaleUpIlp(s, {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->replicas[0], (std::vector<int>{0, 0, 1}));
  auto plan = (*ModelAutoscaler::Create({}))->PlanScaleUp(s);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(plan->size(), 1u);
  EXPECT_NEAR(ScaleActionsCost(*plan), r->objective_per_s, 1e-9);
  EXPECT_EQ((*plan)[0].also_remove.size(), 1u);
}

TEST(ScaleUpIlpTest, LeavesModelsWithHeadroomAlone) {
  ModelScalingSnapshot s = Worker(8, {V("u", 10, 1, 1, 6), V("w", 100, 0.1, 1)}, 20);
  auto r = SolveScaleUpIlp(s, {});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->replicas[0], (std::vector<int>{6, 0}));
  EXPECT_NEAR(r->objective_per_s, 0, 1e-12);
}

TEST(ScaleUpIlpTest, InfeasibleWhenNothingFits) {
  auto r = SolveScaleUpIlp(Worker(1, {V("u", 10, 1, 1, 1)}, 50), {});
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->feasible);
}

// The heuristic's plan is one point of the ILP's feasible set, so the optimum
// is never worse; and when the heuristic places everything locally the ILP
// is feasible.
TEST(ScaleUpIlpTest, NeverWorseThanTheHeuristic) {
  std::mt19937_64 rng(17);
  ModelAutoscalerOptions o;
  auto heuristic = *ModelAutoscaler::Create(o);
  int compared = 0;
  for (int i = 0; i < 150; ++i) {
    SCOPED_TRACE(i);
    ModelScalingSnapshot s = testing::RandomScalingSnapshot(rng);
    auto plan = heuristic->PlanScaleUp(s);
    ASSERT_TRUE(plan.ok());
    bool local = true;
    for (const ModelScaleAction& a : *plan) local &= a.kind != ModelScaleAction::Kind::kNeedsPlacement;
    auto r = SolveScaleUpIlp(s, o);
    ASSERT_TRUE(r.ok());
    if (local) {
      ASSERT_TRUE(r->feasible);
      ASSERT_TRUE(r->optimal);
      double h = ScaleActionsCost(*plan);
      EXPECT_LE(r->objective_per_s, h + 1e-9 * std::max(1e-6, std::abs(h)));
      ++compared;
    }
    if (!r->feasible) EXPECT_FALSE(local);
  }
  EXPECT_GT(compared, 50);
}

// Every combination of replica counts within the ILP's bounds, for small
// instances: the ILP's objective must be the minimum.
std::optional<double> BruteForce(const ModelScalingSnapshot& s, const ModelAutoscalerOptions& o,
                                 int64_t max_points) {
  struct Var {
    const ScalingVariant* v;
    size_t model;
    int lo, hi;
  };
  std::vector<Var> vars;
  std::vector<bool> scale(s.models.size());
  int64_t points = 1;
  for (size_t mi = 0; mi < s.models.size(); ++mi) {
    const ScalingModel& m = s.models[mi];
    double target = o.slack * m.load_qps;
    scale[mi] = m.load_qps > 0 && ModelCapacityQps(m) < target - 1e-9;
    double floor = AccuracyFloor(m, o.max_accuracy_drop);
    for (const ScalingVariant& v : m.variants) {
      int n = v.replicas + v.loading;
      int lo = scale[mi] ? v.loading : n, hi = n;
      if (scale[mi] && MayAddReplicas(v, floor)) {
        hi = n + std::max(static_cast<int>(std::ceil(target / v.saturation_qps - 1e-9)),
                          o.min_replicas_per_model);
      }
      vars.push_back({&v, mi, lo, hi});
      points *= hi - lo + 1;
      if (points > max_points) return std::nullopt;
    }
  }
  double best = INFINITY;
  std::vector<int> x(vars.size());
  std::function<void(size_t)> walk = [&](size_t i) {
    if (i < vars.size()) {
      for (x[i] = vars[i].lo; x[i] <= vars[i].hi; ++x[i]) walk(i + 1);
      return;
    }
    std::vector<double> qps(s.models.size(), 0);
    std::vector<int> count(s.models.size(), 0);
    double cores = s.reserved_cores, memory = UsedMemoryMb(s), cost = 0;
    for (size_t k = 0; k < vars.size(); ++k) {
      const ScalingVariant& v = *vars[k].v;
      int n = v.replicas + v.loading, added = std::max(0, x[k] - n);
      qps[vars[k].model] += x[k] * v.saturation_qps;
      count[vars[k].model] += x[k];
      cores += x[k] * v.cores;  // once done; memory at the peak
      memory += added * v.memory_mb;
      cost += v.cost_per_s * (x[k] - n) + v.cost_per_s * o.lambda_per_s * v.load_s * added;
    }
    if (cores > s.cores + 1e-9 || memory > s.memory_mb + 1e-9) return;
    for (size_t mi = 0; mi < s.models.size(); ++mi) {
      if (!scale[mi]) continue;
      if (qps[mi] < o.slack * s.models[mi].load_qps - 1e-9) return;
      if (count[mi] < o.min_replicas_per_model) return;
    }
    best = std::min(best, cost);
  };
  walk(0);
  return best;
}

TEST(ScaleUpIlpTest, MatchesBruteForce) {
  std::mt19937_64 rng(19);
  testing::RandomScalingOptions shape;
  shape.max_models = 2;
  shape.max_variants = 3;
  ModelAutoscalerOptions o;
  int checked = 0;
  for (int i = 0; i < 400 && checked < 60; ++i) {
    ModelScalingSnapshot s = testing::RandomScalingSnapshot(rng, shape);
    std::optional<double> expected = BruteForce(s, o, 200'000);
    if (!expected.has_value()) continue;
    SCOPED_TRACE(i);
    auto r = SolveScaleUpIlp(s, o);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->feasible, !std::isinf(*expected));
    if (r->feasible) {
      EXPECT_TRUE(r->optimal);
      EXPECT_NEAR(r->objective_per_s, *expected, 1e-9 * std::max(1e-5, std::abs(*expected)));
    }
    ++checked;
  }
  EXPECT_GE(checked, 60);
}

}  // namespace
}  // namespace maitre::policy
