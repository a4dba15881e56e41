#include "pipeline/tuner.h"

#include <cmath>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "pipeline/testing/problems.h"

namespace maitre::pipeline {
namespace {

using ::testing::HasSubstr;
using testing::Cascade;
using testing::GammaArrivals;

// The cascade at 100 qps, branch 0.3: fast on the GPU at batch 4 (2.4 ms,
// 1667 q/s), 1 replica; slow at batch 2 (11 ms, 182 q/s), 1 replica.
struct Fixture {
  PlanningProblem problem = Cascade(0.3);
  PipelineConfig config = {{0, 4, 1}, {0, 2, 1}};
  std::vector<Nanos> planning = GammaArrivals(100, 1, 60 * kSecond, 11);
  TunerPlan plan = *MakeTunerPlan(problem, config, planning);
};

// Feeds a trace to a tuner and asks it to decide once a second, as the
// control plane would.
class Driver {
 public:
  Driver(Tuner& tuner, std::vector<Nanos> arrivals)
      : tuner_(tuner), arrivals_(std::move(arrivals)) {}
  // Runs up to `until`; returns the decisions that changed something.
  std::vector<TunerDecision> Until(Nanos until) {
    std::vector<TunerDecision> changes;
    for (; now_ + kSecond <= until;) {
      now_ += kSecond;
      while (next_ < arrivals_.size() && arrivals_[next_] < now_) {
        tuner_.Observe(arrivals_[next_++]);
      }
      TunerDecision d = tuner_.Decide(now_);
      if (d.kind != TunerDecision::Kind::kNone) changes.push_back(d);
    }
    return changes;
  }

 private:
  Tuner& tuner_;
  std::vector<Nanos> arrivals_;
  size_t next_ = 0;
  Nanos now_ = 0;
};

std::vector<TunerDecision> Drive(Tuner& tuner, std::vector<Nanos> arrivals, Nanos until) {
  return Driver(tuner, std::move(arrivals)).Until(until);
}

TEST(TunerTest, ThePlanCarriesMuScaleAndRho) {
  Fixture f;
  ASSERT_EQ(f.plan.stages.size(), 2u);
  const double lambda = (f.planning.size() - 1) / ToSeconds(f.planning.back() - f.planning[0]);
  EXPECT_NEAR(f.plan.stages[1].mu_qps, 2 / 0.011, 1e-6);
  EXPECT_DOUBLE_EQ(f.plan.stages[1].scale, 0.3);
  EXPECT_NEAR(f.plan.stages[1].rho, lambda * 0.3 / (2 / 0.011), 1e-9);
  EXPECT_EQ(f.plan.windows.front(), FromMillis(2.4 + 11));
  EXPECT_EQ(f.plan.windows.back(), 60 * kSecond);
}

TEST(TunerTest, ThePlanningTraceItselfChangesNothing) {
  Fixture f;
  Tuner tuner = *Tuner::Create(f.plan, {}, 0);
  EXPECT_TRUE(Drive(tuner, f.planning, 60 * kSecond).empty());
  EXPECT_EQ(tuner.replicas(), (std::vector<int32_t>{1, 1}));
}

TEST(TunerTest, AFasterTraceScalesUpByTheFormula) {
  Fixture f;
  Tuner tuner = *Tuner::Create(f.plan, {}, 0);
  const std::vector<TunerDecision> changes =
      Drive(tuner, GammaArrivals(400, 1, 60 * kSecond, 12), 60 * kSecond);
  ASSERT_FALSE(changes.empty());
  EXPECT_EQ(changes.front().kind, TunerDecision::Kind::kUp);
  // k_m = ceil(r_max · s_m / (µ_m · ρ_m)) for every stage, from each decision's r_max.
  for (const TunerDecision& d : changes) {
    ASSERT_EQ(d.kind, TunerDecision::Kind::kUp) << d.reason;
    for (size_t m = 0; m < 2; ++m) {
      const TunerStage& s = f.plan.stages[m];
      EXPECT_GE(d.replicas[m], std::ceil(d.rate_qps * s.scale / (s.mu_qps * s.rho) - 1e-6));
    }
  }
  // At four times the rate, the slow stage needs about four times its replicas.
  EXPECT_GE(tuner.replicas()[1], 4);
  EXPECT_THAT(changes.front().reason, HasSubstr("up:"));
}

TEST(TunerTest, ABurstierTraceTripsAShortWindow) {
  Fixture f;
  Tuner tuner = *Tuner::Create(f.plan, {}, 0);
  const std::vector<TunerDecision> changes =
      Drive(tuner, GammaArrivals(100, 4, 60 * kSecond, 13), 60 * kSecond);
  ASSERT_FALSE(changes.empty());
  EXPECT_EQ(changes.front().kind, TunerDecision::Kind::kUp);
  EXPECT_LT(changes.front().window, 10 * kSecond) << changes.front().reason;
}

TEST(TunerTest, ScalesDownOnlyAfterTheQuietPeriodToTheRecentPeakWithTheSmallestRho) {
  Fixture f;
  f.plan.stages[0].replicas = 6;  // over-provisioned
  f.plan.stages[1].replicas = 6;
  Tuner tuner = *Tuner::Create(f.plan, {}, 0);
  // A third of the planned rate: nothing exceeds the plan.
  Driver driver(tuner, GammaArrivals(30, 1, 120 * kSecond, 14));
  std::vector<TunerDecision> changes = driver.Until(14 * kSecond);
  EXPECT_TRUE(changes.empty()) << "within the 15 s quiet period";
  changes = driver.Until(16 * kSecond);
  ASSERT_EQ(changes.size(), 1u);
  const TunerDecision& d = changes[0];
  EXPECT_EQ(d.kind, TunerDecision::Kind::kDown);
  const double rho_p = std::min(f.plan.stages[0].rho, f.plan.stages[1].rho);
  EXPECT_DOUBLE_EQ(tuner.rho_pipeline(), rho_p);
  for (size_t m = 0; m < 2; ++m) {
    const TunerStage& s = f.plan.stages[m];
    EXPECT_EQ(d.replicas[m],
              std::max(1, static_cast<int>(std::ceil(d.rate_qps * s.scale / (s.mu_qps * rho_p)))));
  }
  EXPECT_LT(d.replicas[1], 6);
}

TEST(TunerTest, NoStageScalesPastTheCeiling) {
  Fixture f;
  TunerOptions options;
  options.max_replicas = 3;
  Tuner tuner = *Tuner::Create(f.plan, options, 0);
  // Ten times the planned rate wants about ten times the replicas.
  const std::vector<TunerDecision> changes =
      Drive(tuner, GammaArrivals(1000, 1, 20 * kSecond, 15), 20 * kSecond);
  ASSERT_FALSE(changes.empty());
  EXPECT_EQ(changes.front().kind, TunerDecision::Kind::kUp);
  EXPECT_EQ(tuner.replicas()[1], 3);
  for (const TunerDecision& d : changes) {
    for (int32_t r : d.replicas) EXPECT_LE(r, 3) << d.reason;
  }
  options.max_replicas = 0;
  EXPECT_FALSE(Tuner::Create(f.plan, options, 0).ok());
}

TEST(TunerTest, RefusesABadPlan) {
  Fixture f;
  TunerPlan bad = f.plan;
  bad.stages[0].mu_qps = 0;
  EXPECT_FALSE(Tuner::Create(bad, {}, 0).ok());
  bad = f.plan;
  bad.planned_rates.pop_back();
  EXPECT_FALSE(Tuner::Create(bad, {}, 0).ok());
  EXPECT_FALSE(MakeTunerPlan(f.problem, f.config, std::vector<Nanos>{0}).ok());
}

}  // namespace
}  // namespace maitre::pipeline
