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
  // The windows stop at the trace's length (just under a minute here).
  EXPECT_EQ(f.plan.windows.back(), f.planning.back() - f.planning.front());
}

// The real run's planning trace: Poisson at 100 qps for 20 s, so the
// envelope ends at a 20 s window.
TEST(TunerTest, WindowsStopAtAShortTracesLength) {
  Fixture f;
  const std::vector<Nanos> trace = GammaArrivals(100, 1, 20 * kSecond, 21);
  const TunerPlan plan = *MakeTunerPlan(f.problem, f.config, trace);
  EXPECT_EQ(plan.windows.back(), trace.back() - trace.front());
  EXPECT_NEAR(plan.planned_rates.back(), 100, 10);  // the trace's mean, not a third of it
}

// `copies` of `trace` back to back, each starting where the last ended.
std::vector<Nanos> Repeated(const std::vector<Nanos>& trace, Nanos period, int copies) {
  std::vector<Nanos> out;
  for (int c = 0; c < copies; ++c) {
    for (Nanos t : trace) out.push_back(t + c * period);
  }
  return out;
}

TEST(TunerTest, PoissonAtThePlannedRateNeverScalesUp) {
  Fixture f;
  const std::vector<Nanos> trace = GammaArrivals(100, 1, 20 * kSecond, 21);
  const TunerPlan plan = *MakeTunerPlan(f.problem, f.config, trace);
  // The planning trace itself, replayed three times over a minute.
  Tuner replayed = *Tuner::Create(plan, {}, 0);
  for (const TunerDecision& d : Drive(replayed, Repeated(trace, 20 * kSecond, 3), 60 * kSecond)) {
    EXPECT_NE(d.kind, TunerDecision::Kind::kUp) << d.reason;
  }
  // Fresh draws of the same process, a minute each.
  for (uint64_t seed = 100; seed < 120; ++seed) {
    Tuner tuner = *Tuner::Create(plan, {}, 0);
    for (const TunerDecision& d :
         Drive(tuner, GammaArrivals(100, 1, 60 * kSecond, seed), 60 * kSecond)) {
      EXPECT_NE(d.kind, TunerDecision::Kind::kUp) << "seed " << seed << ": " << d.reason;
    }
  }
}

// §5: the tuner detects a change "as it occurs"; a rise of the mean shows
// first in the windows of about a second, so the first decision after a
// second or two of the raised rate scales up.
TEST(TunerTest, ARateRiseScalesUpWithinSeconds) {
  Fixture f;
  const std::vector<Nanos> trace = GammaArrivals(100, 1, 20 * kSecond, 21);
  const TunerPlan plan = *MakeTunerPlan(f.problem, f.config, trace);
  std::vector<Nanos> live = trace;
  for (Nanos t : GammaArrivals(250, 1, 20 * kSecond, 22)) live.push_back(20 * kSecond + t);
  Tuner tuner = *Tuner::Create(plan, {}, 0);
  Driver driver(tuner, live);
  EXPECT_TRUE(driver.Until(20 * kSecond).empty());
  const std::vector<TunerDecision> changes = driver.Until(23 * kSecond);
  ASSERT_FALSE(changes.empty());
  EXPECT_EQ(changes.front().kind, TunerDecision::Kind::kUp);
  EXPECT_GE(tuner.replicas()[1], 2) << changes.front().reason;
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

// §5's s_m as measured: when twice the planned share of the traffic
// reaches the slow stage, a rise asks for twice its replicas.
TEST(TunerTest, MeasuredScaleFactorsReplaceThePlans) {
  Fixture f;
  const std::vector<Nanos> rise = GammaArrivals(400, 1, 20 * kSecond, 12);
  Tuner planned = *Tuner::Create(f.plan, {}, 0);
  Tuner measured = *Tuner::Create(f.plan, {}, 0);
  ASSERT_TRUE(measured.SetScales({1, 0.6}).ok());
  const std::vector<TunerDecision> a = Drive(planned, rise, 2 * kSecond);
  const std::vector<TunerDecision> b = Drive(measured, rise, 2 * kSecond);
  ASSERT_FALSE(a.empty());
  ASSERT_FALSE(b.empty());
  ASSERT_DOUBLE_EQ(a.front().rate_qps, b.front().rate_qps);
  const TunerStage& slow = f.plan.stages[1];
  EXPECT_EQ(a.front().replicas[1],
            static_cast<int>(std::ceil(a.front().rate_qps * 0.3 / (slow.mu_qps * slow.rho))));
  EXPECT_EQ(b.front().replicas[1],
            static_cast<int>(std::ceil(b.front().rate_qps * 0.6 / (slow.mu_qps * slow.rho))));
  EXPECT_EQ(a.front().replicas[0], b.front().replicas[0]);
  EXPECT_FALSE(measured.SetScales({1}).ok());
  EXPECT_FALSE(measured.SetScales({1, 1.5}).ok());
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
