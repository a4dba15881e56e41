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
  // The windows start at one query's service time: both stages at batch 1
  // on their planned hardware (2.1 + 10.5 ms), not a full batch at each.
  EXPECT_EQ(f.plan.windows.front(), FromMillis(2.1 + 10.5));
  ASSERT_EQ(f.plan.planned_deviations.size(), f.plan.windows.size());
  // The busiest short window's count spreads less than a Poisson count of
  // its size; the longest, nearly one count, about as much.
  const double first = f.plan.planned_rates.front() * ToSeconds(f.plan.windows.front());
  const double last = f.plan.planned_rates.back() * ToSeconds(f.plan.windows.back());
  EXPECT_LT(f.plan.planned_deviations.front(), 0.5 * std::sqrt(first));
  EXPECT_GT(f.plan.planned_deviations.back(), 0.5 * std::sqrt(last));
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

// Twenty fresh minutes of the gamma process at `qps` and `cv`, each from a
// new tuner on `plan`: none scales up.
void ExpectFreshDrawsNeverScaleUp(const TunerPlan& plan, double qps, double cv,
                                  uint64_t first_seed) {
  for (uint64_t seed = first_seed; seed < first_seed + 20; ++seed) {
    Tuner tuner = *Tuner::Create(plan, {}, 0);
    for (const TunerDecision& d :
         Drive(tuner, GammaArrivals(qps, cv, 60 * kSecond, seed), 60 * kSecond)) {
      EXPECT_NE(d.kind, TunerDecision::Kind::kUp) << "seed " << seed << ": " << d.reason;
    }
  }
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
  ExpectFreshDrawsNeverScaleUp(plan, 100, 1, 100);
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

// A minute of the planned process, then a minute at the same mean rate
// four times as bursty (σ²/µ² 1 -> 4; Fig. 11 in shape).
std::vector<Nanos> CvStep(double qps, uint64_t seed) {
  std::vector<Nanos> live = GammaArrivals(qps, 1, 60 * kSecond, seed);
  for (Nanos t : GammaArrivals(qps, 4, 60 * kSecond, seed + 1)) live.push_back(60 * kSecond + t);
  return live;
}

// §7.2: the tuner detects a rise of burstiness at a constant mean rate. It
// shows in the short windows within seconds of the step; nothing changes
// before it. Both stages on the CPU at batch 64: a full batch through both
// takes 610 ms, one query 43 ms (as the experiment's plan: 543 and 39 ms).
TEST(TunerTest, ACvStepAtTheSameMeanRateScalesUpWithinSeconds) {
  Fixture f;
  const PipelineConfig large_batches = {{1, 64, 1}, {1, 64, 1}};
  const TunerPlan plan = *MakeTunerPlan(f.problem, large_batches, f.planning);
  EXPECT_EQ(plan.windows.front(), FromMillis(5 + 38));
  for (uint64_t seed : {31, 33, 35}) {
    Tuner tuner = *Tuner::Create(plan, {}, 0);
    Driver driver(tuner, CvStep(100, seed));
    for (const TunerDecision& d : driver.Until(60 * kSecond)) {
      ADD_FAILURE() << "seed " << seed << ", before the step: " << d.reason;
    }
    const std::vector<TunerDecision> changes = driver.Until(70 * kSecond);
    ASSERT_FALSE(changes.empty()) << "seed " << seed;
    EXPECT_EQ(changes.front().kind, TunerDecision::Kind::kUp);
    EXPECT_LT(changes.front().window, kSecond) << changes.front().reason;
    EXPECT_GE(tuner.replicas()[1], 2) << changes.front().reason;
  }
}

// A burst is provisioned for in the plan's terms: the window's live count
// over its planned count, times the planned mean rate; not as the burst's
// own rate, which in a short window is several times the mean even in the
// planning trace (whose bursts ρ_m already leaves room for).
TEST(TunerTest, ABurstIsProvisionedForByItsRiseOverThePlan) {
  Fixture f;
  Tuner tuner = *Tuner::Create(f.plan, {}, 0);
  const std::vector<TunerDecision> changes = Drive(tuner, CvStep(100, 31), 70 * kSecond);
  ASSERT_FALSE(changes.empty());
  const TunerDecision& d = changes.front();
  size_t i = 0;
  while (f.plan.windows[i] != d.window) ++i;
  // The planning trace's own rate in that window is above what a rise of
  // its bursts asks for.
  EXPECT_LT(d.rate_qps, f.plan.planned_rates[i]) << d.reason;
  EXPECT_GT(d.rate_qps, f.plan.planned_rates.back()) << d.reason;
}

// The noise margin is measured on the planning trace, so a burstier
// planned process gets a wider one: fresh minutes of it change nothing.
TEST(TunerTest, FreshTracesOfABurstyPlannedProcessNeverScaleUp) {
  Fixture f;
  const TunerPlan plan =
      *MakeTunerPlan(f.problem, f.config, GammaArrivals(100, 4, 60 * kSecond, 41));
  ExpectFreshDrawsNeverScaleUp(plan, 100, 4, 200);
}

// A plan without deviations (one written before them) falls back to a
// Poisson count's: the planning trace still changes nothing, and a rate
// rise is still seen.
TEST(TunerTest, APlanWithoutDeviationsTakesPoissonNoise) {
  Fixture f;
  f.plan.planned_deviations.clear();
  Tuner same = *Tuner::Create(f.plan, {}, 0);
  EXPECT_TRUE(Drive(same, f.planning, 60 * kSecond).empty());
  Tuner faster = *Tuner::Create(f.plan, {}, 0);
  const std::vector<TunerDecision> changes =
      Drive(faster, GammaArrivals(400, 1, 20 * kSecond, 12), 20 * kSecond);
  ASSERT_FALSE(changes.empty());
  EXPECT_EQ(changes.front().kind, TunerDecision::Kind::kUp);
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
  bad = f.plan;
  bad.planned_deviations.pop_back();
  EXPECT_FALSE(Tuner::Create(bad, {}, 0).ok());
  bad = f.plan;
  bad.planned_deviations[0] = -1;
  EXPECT_FALSE(Tuner::Create(bad, {}, 0).ok());
  EXPECT_FALSE(MakeTunerPlan(f.problem, f.config, std::vector<Nanos>{0}).ok());
}

}  // namespace
}  // namespace maitre::pipeline
