// The MArk allocator's driving of prediction and Algorithm 1, on hand-made
// observations and a sink that records what it is asked: the greedy's own
// choices are tested in src/policy (mark_provisioning_test.cc); here, what
// the driver adds (demand to unit peaks, types priced per unit from the
// profiles, launches ahead of demand, joined workers taken as the app's,
// paid blocks kept, the cool-down, the floor and ceiling, route weights).
#include "control/mark_allocator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>

#include "control/testing/recording_sink.h"

namespace maitre::control {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::RecordingSink;

class MarkAllocatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // 10 ms at batch 1, 40 ms at batch 8: one replica sustains 200 qps
    // within a 100 ms objective (batch 8, 2 × 40 ms within it).
    auto profile = Profile::Create({{1, 10, 11}, {8, 40, 44}}, 100, 50);
    ASSERT_TRUE(profile.ok());
    profile_ = *profile;
    // c1 holds one replica (200 qps), c4 four (800 qps) and is cheaper per
    // query.
    options_.types = {{"c1", 1, 4000, 0.1}, {"c4", 4, 16000, 0.2}};
    options_.cluster_scaling = true;
    options_.mark.default_launch_time = 10 * kSecond;  // one 60 s unit ahead
  }

  std::unique_ptr<MarkAllocator> Make() {
    auto made = MarkAllocator::Create(options_);
    EXPECT_TRUE(made.ok()) << made.status();
    return made.ok() ? *std::move(made) : nullptr;
  }

  Observation At(Nanos now, std::vector<ObservedWorker> workers = {},
                 int64_t refused_rows = 0) const {
    Observation o;
    o.now = now;
    o.types = options_.types;
    ModelOption m;
    m.name = "m";
    m.app = "fashion";
    m.slo_ms = 100;
    for (const WorkerType& t : options_.types) {
      m.variants.push_back({"v", t.name, 0.9, &profile_, 1});
    }
    o.models.push_back(m);
    o.workers = std::move(workers);
    if (refused_rows > 0) o.refused_rows["fashion"] = refused_rows;
    return o;
  }

  static ObservedWorker Worker(std::string id, std::string type, int ready = 0, double qps = 0) {
    ObservedWorker w;
    w.id = std::move(id);
    w.type = std::move(type);
    if (ready > 0) {
      ObservedInstance inst;
      inst.key = {"m", "v"};
      inst.ready = ready;
      inst.arrival_qps = inst.served_qps = qps;
      inst.state = policy::InstanceState::kActive;
      w.instances.push_back(inst);
    }
    return w;
  }

  // Model rounds every second over (from, to], each refusing `qps` rows.
  static void Offer(MarkAllocator& allocator, RecordingSink& sink, Nanos from, Nanos to,
                    int64_t qps, const std::function<Observation(Nanos, int64_t)>& at) {
    for (Nanos t = from + kSecond; t <= to; t += kSecond) {
      ASSERT_TRUE(allocator.ModelRound(at(t, qps), sink).ok());
    }
  }

  // The decisions that act: the plan the allocator logs once a unit is
  // left out (PlansAreLoggedOnceAUnit tests it).
  std::vector<std::string> Kinds(const RecordingSink& sink) const {
    std::vector<std::string> kinds;
    for (const Decision& d : sink.decisions) {
      if (d.kind != "plan") kinds.push_back(d.kind + " " + d.worker);
    }
    return kinds;
  }

  Profile profile_;
  AllocatorOptions options_;
};

TEST_F(MarkAllocatorTest, LaunchesTheCheapestTypePerQueryForTheDemandSeen) {
  auto allocator = Make();
  RecordingSink sink;
  auto at = [&](Nanos t, int64_t rows) { return At(t, {}, rows); };
  Offer(*allocator, sink, 0, 10 * kSecond, 500, at);
  ASSERT_TRUE(allocator->ClusterRound(At(10 * kSecond), sink).ok());
  // 500 qps: one c4 (800 qps for $0.2/h) beats three c1 ($0.3/h).
  EXPECT_THAT(sink.added, ElementsAre("c4"));
  const MarkAllocator::AppPlan* plan = allocator->PlanFor("fashion");
  ASSERT_NE(plan, nullptr);
  EXPECT_DOUBLE_EQ(plan->forecast_qps[0], 500);
  EXPECT_DOUBLE_EQ(plan->capacity_qps, 800);
  // No worker can serve the unit in progress: a launch takes until the next.
  EXPECT_DOUBLE_EQ(plan->uncovered_qps[0], 500);

  // The launch is on its way: the next round launches nothing more.
  std::vector<ObservedWorker> starting = {Worker("starting-c4-0", "c4")};
  starting[0].starting = true;
  ASSERT_TRUE(allocator->ClusterRound(At(12 * kSecond, starting), sink).ok());
  EXPECT_EQ(sink.added.size(), 1u);

  // It joins as w7: the app's, loaded with its variant, four replicas.
  ASSERT_TRUE(allocator->ModelRound(At(20 * kSecond, {Worker("w7", "c4")}, 500), sink).ok());
  EXPECT_EQ(allocator->AppOf("w7"), "fashion");
  ASSERT_EQ(sink.loads.size(), 1u);
  EXPECT_EQ(sink.loads[0].worker, "w7");
  EXPECT_EQ(sink.loads[0].key.ToString(), "m:v");
  EXPECT_EQ(sink.loads[0].add, 4);
  // While the load runs, the worker is not asked again.
  ASSERT_TRUE(allocator->ModelRound(At(21 * kSecond, {Worker("w7", "c4")}, 500), sink).ok());
  EXPECT_EQ(sink.loads.size(), 1u);
  sink.loads[0].done();
  // Serving, it gets the app's queries in proportion to its capacity.
  ASSERT_TRUE(allocator->ModelRound(At(22 * kSecond, {Worker("w7", "c4", 4, 500)}), sink).ok());
  ASSERT_EQ(sink.route_weights.size(), 1u);
  EXPECT_EQ(sink.route_weights[0].worker, "w7");
  EXPECT_DOUBLE_EQ(sink.route_weights[0].weight, 800);
}

TEST_F(MarkAllocatorTest, PicksSpotWhileItsPriceInForceIsCheaper) {
  // A spot c4 whose list price ($0.5/h) is dearer than the on-demand c4's,
  // but whose trace asks $0.06/h for its first 100 s and $0.5/h after.
  WorkerType spot{"c4-spot", 4, 16000, 0.5};
  spot.market = WorkerType::Market::kSpot;
  auto trace = PriceTrace::Parse("0,0.06\n100,0.5\n", "spot.csv");
  ASSERT_TRUE(trace.ok());
  spot.price_trace = std::make_shared<const PriceTrace>(*trace);
  options_.types.push_back(spot);
  for (const Nanos start : {Nanos{0}, 200 * kSecond}) {
    auto allocator = Make();
    RecordingSink sink;
    auto at = [&](Nanos t, int64_t rows) { return At(t, {}, rows); };
    Offer(*allocator, sink, start, start + 10 * kSecond, 500, at);
    ASSERT_TRUE(allocator->ClusterRound(At(start + 10 * kSecond), sink).ok());
    // At $0.06/h the spot c4 is the cheapest per query; at $0.5/h the
    // on-demand c4 ($0.2/h) is.
    EXPECT_THAT(sink.added, ElementsAre(start == 0 ? "c4-spot" : "c4")) << ToSeconds(start);
  }
}

TEST_F(MarkAllocatorTest, LaunchesAheadOfAPredictedRiseByTheLaunchTime) {
  // The oracle knows the load rises to 700 qps in the fourth unit.
  options_.mark.predictor = "oracle";
  options_.mark.known_peaks["fashion"] = {0, 0, 0, 700, 700, 700};
  auto allocator = Make();
  RecordingSink sink;
  auto at = [&](Nanos t, int64_t rows) { return At(t, {}, rows); };
  // Units run from the first round (1 s): unit 1 is [61 s, 121 s).
  Offer(*allocator, sink, 0, 61 * kSecond, 0, at);
  ASSERT_TRUE(allocator->ClusterRound(At(61 * kSecond), sink).ok());
  EXPECT_TRUE(sink.added.empty()) << "two units early";
  Offer(*allocator, sink, 61 * kSecond, 121 * kSecond, 0, at);
  ASSERT_TRUE(allocator->ClusterRound(At(121 * kSecond), sink).ok());
  // In unit 2 a worker launched now serves unit 3 when it starts.
  EXPECT_THAT(sink.added, ElementsAre("c4"));
  EXPECT_DOUBLE_EQ(allocator->PlanFor("fashion")->forecast_qps[1], 700);
}

TEST_F(MarkAllocatorTest, AnAppsHistoryStartsWithItsFirstQuery) {
  // A season of four units: two at 700 qps, two at 50. One app registered
  // two seasons and a half before its first query, one whose queries began
  // at once: the silence is no record of demand, and units start with the
  // load, so both forecast alike, and the season as it is.
  options_.mark.predictor = "holt-winters:4";
  const Nanos unit = 60 * kSecond;
  auto forecast_after = [&](int silent_units) {
    auto allocator = Make();
    RecordingSink sink;
    auto at = [&](Nanos t, int64_t rows) { return At(t, {}, rows); };
    Nanos t = 0;
    Offer(*allocator, sink, t, t + silent_units * unit + unit / 2, 0, at);
    t += silent_units * unit + unit / 2;
    for (int u = 0; u < 14; ++u, t += unit) {
      Offer(*allocator, sink, t, t + unit, u % 4 < 2 ? 700 : 50, at);
    }
    EXPECT_TRUE(allocator->ClusterRound(At(t), sink).ok());
    const MarkAllocator::AppPlan* plan = allocator->PlanFor("fashion");
    return plan != nullptr ? plan->forecast_qps : std::vector<double>{};
  };
  const std::vector<double> at_once = forecast_after(0);
  const std::vector<double> after_silence = forecast_after(8);
  ASSERT_GE(at_once.size(), 4u);
  ASSERT_EQ(after_silence.size(), at_once.size());
  // The coming season, after the unit in progress: two units high, two low.
  for (size_t u = 0; u < 5; ++u) EXPECT_NEAR(after_silence[u], at_once[u], 1e-6) << u;
  const auto [low, high] = std::minmax_element(at_once.begin() + 1, at_once.begin() + 5);
  EXPECT_GT(*high, 500);
  EXPECT_LT(*low, 300);
}

TEST_F(MarkAllocatorTest, PlansAreLoggedOnceAUnit) {
  auto allocator = Make();
  RecordingSink sink;
  auto at = [&](Nanos t, int64_t rows) { return At(t, {}, rows); };
  auto plans = [&] {
    std::vector<std::string> lines;
    for (const Decision& d : sink.decisions) {
      if (d.kind == "plan") lines.push_back(DecisionLine(d));
    }
    return lines;
  };
  Offer(*allocator, sink, 0, 10 * kSecond, 500, at);
  ASSERT_TRUE(allocator->ClusterRound(At(10 * kSecond), sink).ok());
  ASSERT_TRUE(allocator->ClusterRound(At(20 * kSecond), sink).ok());
  // Two rounds in the first unit: one line, with the forecast it planned
  // on (no unit has ended: the load seen holds until a launch can serve).
  ASSERT_EQ(plans().size(), 1u);
  EXPECT_THAT(plans()[0], HasSubstr("plan fashion: forecast 500 500 0 0"));
  EXPECT_THAT(plans()[0], HasSubstr("launches 1 now and 0 later: 800 qps"));
  Offer(*allocator, sink, 20 * kSecond, 70 * kSecond, 500, at);
  ASSERT_TRUE(allocator->ClusterRound(At(70 * kSecond), sink).ok());
  EXPECT_EQ(plans().size(), 2u) << "a new unit";
}

TEST_F(MarkAllocatorTest, KeepsAnUnneededWorkerUntilItsPaidHourEnds) {
  options_.types[1].billing_unit = 3600 * kSecond;
  auto allocator = Make();
  RecordingSink sink;
  // w1 serves the app from the first round (t = 1 s): paid until 3601 s.
  auto at = [&](Nanos t, int64_t) {
    ObservedWorker w = Worker("w1", "c4", 4, 0);
    w.idle_since = t - kSecond;
    return At(t, {w});
  };
  Offer(*allocator, sink, 0, 5 * kSecond, 0, at);
  EXPECT_EQ(allocator->AppOf("w1"), "fashion");
  ASSERT_TRUE(allocator->ClusterRound(at(5 * kSecond, 0), sink).ok());
  ASSERT_TRUE(allocator->ClusterRound(at(600 * kSecond, 0), sink).ok());
  ASSERT_TRUE(allocator->ClusterRound(at(3580 * kSecond, 0), sink).ok());
  EXPECT_TRUE(sink.retired.empty()) << "the hour is paid for";
  EXPECT_TRUE(Kinds(sink).empty());
  // Within the margin of the hour's end it stops taking queries, then goes.
  ASSERT_TRUE(allocator->ClusterRound(at(3595 * kSecond, 0), sink).ok());
  EXPECT_THAT(Kinds(sink), ElementsAre("drain w1"));
  ASSERT_TRUE(allocator->ModelRound(at(3596 * kSecond, 0), sink).ok());
  EXPECT_TRUE(sink.route_weights.empty());
  ASSERT_TRUE(allocator->ClusterRound(at(3597 * kSecond, 0), sink).ok());
  EXPECT_THAT(sink.retired, ElementsAre("w1"));
  EXPECT_EQ(allocator->AppOf("w1"), "");
}

TEST_F(MarkAllocatorTest, ByTheSecondAWorkerGoesAfterTheCoolDownUnlessDemandReturns) {
  options_.mark.predictor = "last";  // forgets the past load at once
  auto allocator = Make();
  RecordingSink sink;
  double qps = 0;
  auto at = [&](Nanos t, int64_t) {
    ObservedWorker w = Worker("w1", "c4", 4, qps);
    if (qps == 0) w.idle_since = t - kSecond;
    return At(t, {w});
  };
  Offer(*allocator, sink, 0, 5 * kSecond, 0, at);
  ASSERT_TRUE(allocator->ClusterRound(at(5 * kSecond, 0), sink).ok());
  ASSERT_TRUE(allocator->ClusterRound(at(50 * kSecond, 0), sink).ok());
  EXPECT_TRUE(Kinds(sink).empty()) << "within the cool-down";
  // Demand returns before the cool-down ends: the plan keeps it, and the
  // cool-down starts again when it is unneeded again.
  qps = 300;
  Offer(*allocator, sink, 50 * kSecond, 60 * kSecond, 0, at);
  ASSERT_TRUE(allocator->ClusterRound(at(60 * kSecond, 0), sink).ok());
  qps = 0;
  Offer(*allocator, sink, 60 * kSecond, 200 * kSecond, 0, at);  // past the next unit
  ASSERT_TRUE(allocator->ClusterRound(at(200 * kSecond, 0), sink).ok());
  EXPECT_TRUE(Kinds(sink).empty());
  ASSERT_TRUE(allocator->ClusterRound(at(261 * kSecond, 0), sink).ok());
  EXPECT_THAT(Kinds(sink), ElementsAre("drain w1"));
  ASSERT_TRUE(allocator->ClusterRound(at(263 * kSecond, 0), sink).ok());
  EXPECT_THAT(sink.retired, ElementsAre("w1"));
}

TEST_F(MarkAllocatorTest, KeepsTheTypesMinimumAndLaunchesNoMoreThanItsMaximum) {
  options_.min_workers["c4"] = 1;
  options_.max_workers["c4"] = 2;
  options_.max_workers["c1"] = 0;
  auto allocator = Make();
  RecordingSink sink;
  auto idle = [&](Nanos t, int64_t rows) {
    ObservedWorker w = Worker("w1", "c4", 4, 0);
    w.idle_since = t - kSecond;
    return At(t, {w}, rows);
  };
  Offer(*allocator, sink, 0, 5 * kSecond, 0, idle);
  ASSERT_TRUE(allocator->ClusterRound(idle(5 * kSecond, 0), sink).ok());
  ASSERT_TRUE(allocator->ClusterRound(idle(300 * kSecond, 0), sink).ok());
  EXPECT_TRUE(sink.retired.empty());
  EXPECT_TRUE(Kinds(sink).empty()) << "the minimum stays";
  // 5000 qps would take seven c4: the maximum allows one more.
  Offer(*allocator, sink, 300 * kSecond, 310 * kSecond, 5000, idle);
  ASSERT_TRUE(allocator->ClusterRound(idle(310 * kSecond, 0), sink).ok());
  EXPECT_THAT(sink.added, ElementsAre("c4"));
}

TEST_F(MarkAllocatorTest, AnIdleWorkerOfNoAppIsTakenBeforeALaunch) {
  auto allocator = Make();
  RecordingSink sink;
  auto at = [&](Nanos t, int64_t rows) { return At(t, {Worker("spare", "c4")}, rows); };
  Offer(*allocator, sink, 0, 5 * kSecond, 300, at);
  EXPECT_EQ(allocator->AppOf("spare"), "");
  ASSERT_TRUE(allocator->ClusterRound(at(5 * kSecond, 0), sink).ok());
  EXPECT_TRUE(sink.added.empty());
  EXPECT_EQ(allocator->AppOf("spare"), "fashion");
  ASSERT_TRUE(allocator->ModelRound(at(6 * kSecond, 300), sink).ok());
  ASSERT_EQ(sink.loads.size(), 1u);
  EXPECT_EQ(sink.loads[0].worker, "spare");
}

// A worker the world started on its own (the provider's replacement of a
// spot worker under an interruption notice) is capacity on the way: the
// plan takes it instead of launching another, and it joins as the app's.
TEST_F(MarkAllocatorTest, AWorkerTheWorldStartedIsTakenInsteadOfALaunch) {
  auto allocator = Make();
  RecordingSink sink;
  ObservedWorker replacement = Worker("starting-c4-0", "c4");
  replacement.starting = true;
  auto at = [&](Nanos t, int64_t rows) { return At(t, {replacement}, rows); };
  Offer(*allocator, sink, 0, 5 * kSecond, 500, at);
  ASSERT_TRUE(allocator->ClusterRound(at(5 * kSecond, 0), sink).ok());
  EXPECT_TRUE(sink.added.empty());
  ASSERT_NE(allocator->PlanFor("fashion"), nullptr);
  EXPECT_DOUBLE_EQ(allocator->PlanFor("fashion")->capacity_qps, 800);
  ASSERT_TRUE(allocator->ModelRound(At(8 * kSecond, {Worker("w9", "c4")}, 500), sink).ok());
  EXPECT_EQ(allocator->AppOf("w9"), "fashion");
  ASSERT_EQ(sink.loads.size(), 1u);
  EXPECT_EQ(sink.loads[0].worker, "w9");
}

// A worker under an interruption notice is left out of the observation, yet
// serves until shortly before it stops: what it is offered
// (Observation::leaving_qps) is the app's demand, which the plan provisions
// for among the workers that stay (docs/operations.md, "Spot interruptions").
TEST_F(MarkAllocatorTest, WhatALeavingWorkerIsOfferedIsDemand) {
  auto allocator = Make();
  RecordingSink sink;
  auto at = [&](Nanos t, int64_t rows) {
    Observation o = At(t, {Worker("w1", "c1", 1, 200)}, rows);
    o.leaving_qps["fashion"] = 300;
    return o;
  };
  Offer(*allocator, sink, 0, 10 * kSecond, 0, at);
  ASSERT_TRUE(allocator->ClusterRound(at(10 * kSecond, 0), sink).ok());
  const MarkAllocator::AppPlan* plan = allocator->PlanFor("fashion");
  ASSERT_NE(plan, nullptr);
  EXPECT_DOUBLE_EQ(plan->forecast_qps[0], 500);
  EXPECT_GE(plan->capacity_qps, 500);
  EXPECT_FALSE(sink.added.empty());  // w1 alone carries 200
}

TEST_F(MarkAllocatorTest, AWorkerHoldingAnotherVariantUnloadsItFirst) {
  auto allocator = Make();
  RecordingSink sink;
  ObservedWorker w = Worker("w1", "c4");
  ObservedInstance old;
  old.key = {"other", "x"};
  old.ready = 2;
  w.instances.push_back(old);
  // "other" is no model of any app: w1 is taken for the demand.
  auto at = [&](Nanos t, int64_t rows) { return At(t, {w}, rows); };
  Offer(*allocator, sink, 0, 5 * kSecond, 300, at);
  ASSERT_TRUE(allocator->ClusterRound(at(5 * kSecond, 0), sink).ok());
  ASSERT_TRUE(allocator->ModelRound(at(6 * kSecond, 300), sink).ok());
  ASSERT_EQ(sink.removes.size(), 1u);
  EXPECT_EQ(sink.removes[0].second, "other:x x2");
  ASSERT_EQ(sink.loads.size(), 1u);
  EXPECT_TRUE(sink.loads[0].then_remove.empty());
}

TEST_F(MarkAllocatorTest, ALaunchThatNeverJoinsIsForgotten) {
  auto allocator = Make();
  RecordingSink sink;
  auto at = [&](Nanos t, int64_t rows) { return At(t, {}, rows); };
  Offer(*allocator, sink, 0, 5 * kSecond, 500, at);
  ASSERT_TRUE(allocator->ClusterRound(At(5 * kSecond), sink).ok());
  EXPECT_THAT(sink.added, ElementsAre("c4"));
  // The provider shows nothing starting: the launch failed, and the next
  // round asks again.
  Offer(*allocator, sink, 5 * kSecond, 7 * kSecond, 500, at);
  ASSERT_TRUE(allocator->ClusterRound(At(7 * kSecond), sink).ok());
  EXPECT_THAT(sink.added, ElementsAre("c4", "c4"));
}

TEST_F(MarkAllocatorTest, TheSloMonitorRaisesTheForecastBelowSlMinAndRelaxesItAfter) {
  options_.mark.predictor = "last";
  auto allocator = Make();
  RecordingSink sink;
  double within = 0.9;  // of the 200 queries a second
  auto at = [&](Nanos t, int64_t rows) {
    Observation o = At(t, {}, rows);
    o.service["fashion"] = {200, static_cast<int64_t>(200 * within)};
    return o;
  };
  auto boosts = [&] {
    std::vector<std::string> lines;
    for (const Decision& d : sink.decisions) {
      if (d.kind.rfind("slo-", 0) == 0) lines.push_back(d.kind + " " + d.reason);
    }
    return lines;
  };
  // 90% within against the default SL_min of 98%: raised at once by a step,
  // and not again within the window.
  Offer(*allocator, sink, 0, 30 * kSecond, 100, at);
  EXPECT_DOUBLE_EQ(allocator->BoostFor("fashion"), 0.1);
  ASSERT_EQ(boosts().size(), 1u);
  EXPECT_THAT(boosts()[0], HasSubstr("slo-raise service level 0.9000"));
  ASSERT_TRUE(allocator->ClusterRound(At(30 * kSecond), sink).ok());
  EXPECT_NEAR(allocator->PlanFor("fashion")->forecast_qps[0], 110, 1e-9);
  // Still short a window later: another step.
  Offer(*allocator, sink, 30 * kSecond, 61 * kSecond, 100, at);
  EXPECT_DOUBLE_EQ(allocator->BoostFor("fashion"), 0.2);
  // Met from then on: the window must first hold only good rounds, then the
  // level must hold for slo_relax_after (300 s) before a step goes.
  within = 1;
  Offer(*allocator, sink, 61 * kSecond, 300 * kSecond, 100, at);
  EXPECT_DOUBLE_EQ(allocator->BoostFor("fashion"), 0.2);
  Offer(*allocator, sink, 300 * kSecond, 362 * kSecond, 100, at);
  EXPECT_NEAR(allocator->BoostFor("fashion"), 0.1, 1e-12);
  EXPECT_EQ(boosts().back().substr(0, 9), "slo-relax");
  // The next step back ends at none, and nothing is relaxed past it.
  Offer(*allocator, sink, 362 * kSecond, 1000 * kSecond, 100, at);
  EXPECT_EQ(allocator->BoostFor("fashion"), 0);
  EXPECT_EQ(boosts().size(), 4u);  // two raises, two relaxes
}

TEST_F(MarkAllocatorTest, AnAppsOwnSlMinAndTooFewQueriesDecide) {
  auto allocator = Make();
  RecordingSink sink;
  int64_t answered = 50;
  auto at = [&](Nanos t, int64_t) {
    Observation o = At(t);
    o.models[0].sl_min = 0.8;  // 90% within meets it
    o.service["fashion"] = {answered, answered * 9 / 10};
    return o;
  };
  Offer(*allocator, sink, 0, 30 * kSecond, 0, at);
  EXPECT_DOUBLE_EQ(allocator->BoostFor("fashion"), 0);
  // Two queries in the window are too few to judge by, whatever they say.
  auto few = [&](Nanos t, int64_t) {
    Observation o = At(t);
    o.service["fashion"] = {1, 0};
    return o;
  };
  auto other = Make();
  Offer(*other, sink, 0, 2 * kSecond, 0, few);
  EXPECT_DOUBLE_EQ(other->BoostFor("fashion"), 0);
}

TEST_F(MarkAllocatorTest, RefusesBadOptions) {
  options_.mark.predictor = "crystal-ball";
  auto bad = MarkAllocator::Create(options_);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("ewma"));
  options_.mark.predictor = "oracle";  // without the peaks
  EXPECT_FALSE(MarkAllocator::Create(options_).ok());
  options_.mark.predictor = "lstm";
  EXPECT_THAT(MarkAllocator::Create(options_).status().message(), HasSubstr("not available"));
  options_.mark.predictor = "last";
  options_.mark.headroom = 0.5;
  EXPECT_FALSE(MarkAllocator::Create(options_).ok());
  options_.mark.headroom = 1;
  options_.mark.windows.sample = 7 * kSecond;  // 60 s is not whole 7 s windows
  EXPECT_FALSE(MarkAllocator::Create(options_).ok());
  options_.mark.windows.sample = 5 * kSecond;
  for (double sl_min : {0.0, 1.5, -0.1}) {
    options_.mark.sl_min = sl_min;
    auto refused = MarkAllocator::Create(options_);
    ASSERT_FALSE(refused.ok());
    EXPECT_THAT(refused.status().message(), HasSubstr("sl_min must be in (0, 1]"));
  }
  options_.mark.sl_min = 1;  // all of them: allowed
  EXPECT_TRUE(MarkAllocator::Create(options_).ok());
  options_.mark.slo_step = 0;
  EXPECT_FALSE(MarkAllocator::Create(options_).ok());
  options_.mark.slo_step = 0.1;
  options_.cluster_scaling = false;
  EXPECT_THAT(MarkAllocator::Create(options_).status().message(), HasSubstr("cluster scaling"));
  options_.cluster_scaling = true;
  EXPECT_TRUE(MarkAllocator::Create(options_).ok());
  EXPECT_TRUE(CheckAllocatorName("mark").ok());
  EXPECT_EQ(DefaultRouterFor("mark"), "weighted");
}

}  // namespace
}  // namespace maitre::control
