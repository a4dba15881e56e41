#include "policy/autoscaling_consolidation.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <iostream>
#include <map>

#include "policy/testing/scaling_variant.h"

namespace maitre::policy {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Pair;
using ::testing::SizeIs;

ScalingVariant V(std::string name, double qps, double cost, double load_s, int replicas = 0,
                 double accuracy = 0.9) {
  return testing::MakeVariant(std::move(name), qps, cost, load_s, replicas, accuracy);
}

WorkerScalingSnapshot W(std::string worker, double load, std::vector<ScalingVariant> variants,
                        std::string model = "cnn") {
  WorkerScalingSnapshot w;
  w.worker = std::move(worker);
  w.snapshot.cores = 2;
  ScalingModel m;
  m.model = std::move(model);
  m.load_qps = load;
  m.variants = std::move(variants);
  w.snapshot.models.push_back(std::move(m));
  return w;
}

// The per-worker scale-down waits, without the 30 s floor of giving a
// model up, so that the cases stay short.
ModelAutoscalerOptions ShortWaits() {
  ModelAutoscalerOptions o;
  o.min_consolidation_wait = 0;
  return o;
}

// Runs the policy once a second from t=0 to `seconds` with the same
// snapshots and returns the first decision that gives something up, else
// the last. (After a give-up the snapshots would change: a worker that
// still held the model a round later would read as the model spreading
// again, which the hysteresis below marks.)
ConsolidationDecision RunFor(const std::vector<WorkerScalingSnapshot>& workers, int seconds,
                             ModelAutoscalerOptions o = ShortWaits()) {
  ConsolidationState state;
  ConsolidationDecision last;
  for (int t = 0; t <= seconds; ++t) {
    auto d = DecideConsolidation(workers, state, t * kSecond, o);
    EXPECT_TRUE(d.ok()) << d.status();
    state = d->state;
    last = *std::move(d);
    if (!last.actions.empty()) break;
  }
  return last;
}

TEST(Consolidation, GivesUpTheCostlierWorkerOnceTheOtherCarriedTheLoadForTheWait) {
  // 20 qps in all; each worker's one replica serves 100.
  std::vector<WorkerScalingSnapshot> workers = {W("w1", 10, {V("int8", 100, 2, 1, 1)}),
                                                W("w2", 10, {V("opt", 100, 1, 1, 1)})};
  // The history must cover the wait (3 s by default) first.
  EXPECT_THAT(RunFor(workers, 2).actions, IsEmpty());
  ConsolidationDecision d = RunFor(workers, 3);
  ASSERT_THAT(d.actions, SizeIs(1));
  EXPECT_EQ(d.actions[0].model, "cnn");
  EXPECT_EQ(d.actions[0].worker, "w1");
  EXPECT_THAT(d.actions[0].replicas, ElementsAre(Pair("int8", 1)));
  EXPECT_DOUBLE_EQ(d.actions[0].saves_per_s, 2);
}

TEST(Consolidation, KeepsBothWhileTheRestWouldLackHeadroom) {
  // 180 qps: one 100-qps replica alone would not do.
  std::vector<WorkerScalingSnapshot> workers = {W("w1", 90, {V("a", 100, 1, 1, 1)}),
                                                W("w2", 90, {V("a", 100, 1, 1, 1)})};
  EXPECT_THAT(RunFor(workers, 10).actions, IsEmpty());
  // 87 qps: 100 < 1.15 x 87 still; 86: 100 >= 98.9, and the tie on cost
  // and capacity goes by name.
  workers[0].snapshot.models[0].load_qps = 40;
  workers[1].snapshot.models[0].load_qps = 47;
  EXPECT_THAT(RunFor(workers, 10).actions, IsEmpty());
  workers[1].snapshot.models[0].load_qps = 46;
  ConsolidationDecision d = RunFor(workers, 10);
  ASSERT_THAT(d.actions, SizeIs(1));
  EXPECT_EQ(d.actions[0].worker, "w1");
}

TEST(Consolidation, ReplicasBeyondAWorkersCoresDeliverOnlyTheCores) {
  // 150 qps of cnn. w1 has one core and holds a 200-qps replica of cnn and
  // one of mlp, a core each: its cnn replica delivers 100 in truth, not
  // enough to carry 150 alone. w2's 200-qps replica can.
  WorkerScalingSnapshot w1 = W("w1", 75, {V("a", 200, 3, 1, 1)});
  WorkerScalingSnapshot mlp = W("w1", 5, {V("m", 100, 1, 1, 1)}, "mlp");
  w1.snapshot.models.push_back(mlp.snapshot.models[0]);
  w1.snapshot.models[0].variants[0].cores = 1;
  w1.snapshot.models[1].variants[0].cores = 1;
  w1.snapshot.cores = 1;
  WorkerScalingSnapshot w2 = W("w2", 75, {V("a", 200, 1, 1, 1)});
  ConsolidationDecision d = RunFor({w1, w2}, 10);
  ASSERT_THAT(d.actions, SizeIs(1));
  EXPECT_EQ(d.actions[0].worker, "w1");
  // Were w2 the costlier, it still could not go: w1 delivers 100 < 1.15 x 150
  // (counted at 200 it would have gone).
  w2.snapshot.models[0].variants[0].cost_per_s = 10;
  d = RunFor({w1, w2}, 10);
  ASSERT_THAT(d.actions, SizeIs(1));
  EXPECT_EQ(d.actions[0].worker, "w1");
}

TEST(Consolidation, AWorkerWithSeveralReplicasMayGiveThemAllUpAtOnce) {
  // w1's two dear replicas go together once w2 alone carries the load: the
  // per-worker policy could only trim them to one.
  std::vector<WorkerScalingSnapshot> workers = {W("w1", 1, {V("a", 100, 5, 1, 2)}),
                                                W("w2", 1, {V("a", 100, 1, 1, 1)})};
  ConsolidationDecision d = RunFor(workers, 10);
  ASSERT_THAT(d.actions, SizeIs(1));
  EXPECT_EQ(d.actions[0].worker, "w1");
  EXPECT_THAT(d.actions[0].replicas, ElementsAre(Pair("a", 2)));
  // The cheap one goes instead when the dear one holds capacity the load
  // needs: 150 qps need w1's 200 with headroom, w2's 100 are spare.
  workers[0].snapshot.models[0].load_qps = 75;
  workers[1].snapshot.models[0].load_qps = 75;
  d = RunFor(workers, 10);
  ASSERT_THAT(d.actions, SizeIs(1));
  EXPECT_EQ(d.actions[0].worker, "w2");
}

TEST(Consolidation, AKeptWorkerDoesNotGoAndNoCheaperOneGoesInItsPlace) {
  std::vector<WorkerScalingSnapshot> workers = {W("w1", 1, {V("a", 100, 5, 1, 2)}),
                                                W("w2", 1, {V("a", 100, 1, 1, 1)})};
  workers[0].keep.insert("cnn");
  EXPECT_THAT(RunFor(workers, 10).actions, IsEmpty());  // w1 should go, but not yet
  // A kept cheaper worker stays, and its capacity lets the dearer one go.
  workers[0].keep.clear();
  workers[1].keep.insert("cnn");
  ConsolidationDecision d = RunFor(workers, 10);
  ASSERT_THAT(d.actions, SizeIs(1));
  EXPECT_EQ(d.actions[0].worker, "w1");
}

// The first second at which a worker gives the model up, when a peak of
// 150 qps at t=0..2 is followed by 2 qps.
int FirstVacateAfterAPeak(double load_s, const ModelAutoscalerOptions& o) {
  ConsolidationState state;
  std::vector<WorkerScalingSnapshot> workers = {W("w1", 0, {V("a", 100, 1, load_s, 1)}),
                                                W("w2", 0, {V("a", 100, 1, load_s, 1)})};
  for (int t = 0; t <= 100; ++t) {
    double load = t <= 2 ? 75 : 1;
    workers[0].snapshot.models[0].load_qps = load;
    workers[1].snapshot.models[0].load_qps = load;
    auto d = DecideConsolidation(workers, state, t * kSecond, o);
    EXPECT_TRUE(d.ok()) << d.status();
    state = d->state;
    if (!d->actions.empty()) return t;
  }
  return -1;
}

TEST(Consolidation, WaitsForThePeakOfTheLoadTimeNotJustThisSecond) {
  // The sample at t=2 leaves an 8 s window at t=11.
  EXPECT_EQ(FirstVacateAfterAPeak(8, ShortWaits()), 11);
  // By default giving a model up waits at least 30 s.
  EXPECT_EQ(FirstVacateAfterAPeak(8, ModelAutoscalerOptions{}), 33);
  EXPECT_EQ(FirstVacateAfterAPeak(40, ModelAutoscalerOptions{}), 43);
}

TEST(Consolidation, NeverDuringALoadNorTheLastWorkerNorAtLowerAccuracy) {
  std::vector<WorkerScalingSnapshot> loading = {W("w1", 1, {V("a", 100, 1, 1, 1)}),
                                                W("w2", 1, {V("a", 100, 1, 1, 1)})};
  loading[1].snapshot.models[0].variants[0].loading = 1;
  EXPECT_THAT(RunFor(loading, 10).actions, IsEmpty());

  EXPECT_THAT(RunFor({W("w1", 1, {V("a", 100, 1, 1, 2)})}, 10).actions, IsEmpty());

  // w1 runs the only accurate variant: only w2 may go, though w1 costs more.
  std::vector<WorkerScalingSnapshot> accuracy = {W("w1", 1, {V("wide", 100, 5, 1, 1, 0.92)}),
                                                 W("w2", 1, {V("small", 100, 1, 1, 1, 0.85)})};
  ConsolidationDecision d = RunFor(accuracy, 10);
  ASSERT_THAT(d.actions, SizeIs(1));
  EXPECT_EQ(d.actions[0].worker, "w2");

  // A worker that only sees the model's load (no replicas) holds nothing.
  std::vector<WorkerScalingSnapshot> bystander = {W("w1", 1, {V("a", 100, 1, 1, 1)}),
                                                  W("w2", 1, {V("a", 100, 1, 1, 0)})};
  EXPECT_THAT(RunFor(bystander, 10).actions, IsEmpty());
}

TEST(Consolidation, OneWorkerPerModelPerRoundAndModelsApart) {
  std::vector<WorkerScalingSnapshot> workers = {W("w1", 1, {V("a", 100, 1, 1, 1)}),
                                                W("w2", 1, {V("a", 100, 1, 1, 1)}),
                                                W("w3", 1, {V("a", 100, 1, 1, 1)})};
  WorkerScalingSnapshot other = W("w4", 1, {V("b", 100, 1, 1, 1)}, "mlp");
  workers[0].snapshot.models.push_back(other.snapshot.models[0]);
  workers[1].snapshot.models.push_back(other.snapshot.models[0]);
  ConsolidationDecision d = RunFor(workers, 10);
  ASSERT_THAT(d.actions, SizeIs(2));
  EXPECT_EQ(d.actions[0].model, "cnn");
  EXPECT_EQ(d.actions[1].model, "mlp");
  // The model's load is the sum over workers.
  EXPECT_DOUBLE_EQ(d.state.history.at("cnn").back().load_qps, 3);
}

// A steady load replayed over many rounds, with a stand-in for what undoes
// a wrong give-up in the controller: each worker's replica sustains
// `real_qps` (its profile says 100: the workers share a core, as the old
// default layout had cpu-1 and cpu-2 on core 1), and whenever the ready
// replicas sustain less than the load, selection (or the autoscaler's
// placement) loads the model on a worker without it, ready a round later.
// A reload within 10 s of a give-up closes a give-up/reload cycle. As the
// allocator does, a worker whose replica has been ready less than 30 s
// keeps the model (min_instance_age).
struct Replay {
  int give_ups = 0;
  int reloads = 0;
  int cycles = 0;
  std::vector<int> give_up_at;  // seconds
};

Replay ReplaySteadyLoad(const std::function<double(int)>& load_at, int seconds,
                        bool both_at_first, double real_qps = 60,
                        ConsolidationOptions c = ConsolidationOptions()) {
  enum class Held { kNone, kLoading, kReady };
  std::map<std::string, Held> held = {{"w1", Held::kReady},
                                      {"w2", both_at_first ? Held::kReady : Held::kNone}};
  ModelAutoscalerOptions o;  // the defaults: a 30 s wait before a give-up
  ConsolidationState state;
  Replay r;
  int last_give_up = -1000;
  std::map<std::string, int> ready_since = {{"w1", -1000}, {"w2", -1000}};
  for (int t = 0; t <= seconds; ++t) {
    const double load = load_at(t);
    int holders = 0;
    for (const auto& [w, h] : held) holders += h != Held::kNone ? 1 : 0;
    std::vector<WorkerScalingSnapshot> workers;
    for (const auto& [w, h] : held) {
      if (h == Held::kNone) continue;
      ScalingVariant v = V("opt", 100, 1, 0.5, h == Held::kReady ? 1 : 0);
      v.loading = h == Held::kLoading ? 1 : 0;
      workers.push_back(W(w, load / holders, {v}));
      if (h != Held::kReady || t - ready_since[w] < 30) workers.back().keep.insert("cnn");
    }
    auto d = DecideConsolidation(workers, state, t * kSecond, o, c);
    EXPECT_TRUE(d.ok()) << d.status();
    if (!d.ok()) return r;
    state = d->state;
    for (const VacateAction& a : d->actions) {
      held[a.worker] = Held::kNone;
      ++r.give_ups;
      r.give_up_at.push_back(t);
      last_give_up = t;
    }
    double sustained = 0;
    for (auto& [w, h] : held) {
      if (h == Held::kLoading) {
        h = Held::kReady;
        ready_since[w] = t;
      }
      if (h == Held::kReady) sustained += real_qps;
    }
    if (sustained < load) {
      for (auto& [w, h] : held) {
        if (h != Held::kNone) continue;
        h = Held::kLoading;
        ++r.reloads;
        if (t - last_give_up <= 10) ++r.cycles;
        break;
      }
    }
  }
  return r;
}

// 70 qps, ±5% from second to second.
double Steady70(int t) { return 70 * (1 + 0.05 * std::sin(1.7 * t)); }

TEST(ConsolidationHysteresis, ASteadyLoadGivesNothingUpThatItSpreadFor) {
  // The model serves on w1, whose replica sustains 60 of the 70 qps; it
  // spreads to w2 and stays: 15 minutes of rounds without a cycle.
  Replay r = ReplaySteadyLoad(Steady70, 900, /*both_at_first=*/false);
  EXPECT_EQ(r.reloads, 1);  // the spread itself
  EXPECT_EQ(r.give_ups, 0);
  EXPECT_EQ(r.cycles, 0);
  // Without the hysteresis, w2's replica (100 qps by its profile, 1.15 x 73.5
  // = 84.5 needed) is given up as soon as the 30 s wait allows, and loaded
  // again a second later: about twice a minute, as the issue saw.
  ConsolidationOptions off;
  off.spread_memory = 0;
  Replay before = ReplaySteadyLoad(Steady70, 900, false, 60, off);
  EXPECT_GE(before.cycles, 25);
  std::cerr << "without the hysteresis: " << before.give_ups << " give-ups, " << before.cycles
            << " cycles in 15 minutes\n";
  EXPECT_EQ(before.cycles, before.give_ups);
}

TEST(ConsolidationHysteresis, AModelHeldTwiceBeforeItWasSeenCyclesOnceAtMost) {
  // No mark for a spread the policy did not see: the first give-up goes
  // ahead, its reload leaves a mark, and that holds.
  Replay r = ReplaySteadyLoad(Steady70, 900, /*both_at_first=*/true);
  EXPECT_EQ(r.give_ups, 1);
  EXPECT_EQ(r.cycles, 1);
}

TEST(ConsolidationHysteresis, AFallingLoadStillFreesTheWorker) {
  // 70 qps for 5 minutes, then 20: the model spread for 70 is given up once
  // the peak over the 30 s wait (20) is below 1/1.15 of the load it spread
  // at, and one replica sustains 20, so nothing reloads it.
  auto step = [](int t) { return t < 300 ? Steady70(t) : 20.0; };
  Replay r = ReplaySteadyLoad(step, 900, /*both_at_first=*/false);
  EXPECT_EQ(r.reloads, 1);
  ASSERT_EQ(r.give_ups, 1);
  EXPECT_EQ(r.cycles, 0);
  EXPECT_GE(r.give_up_at[0], 300 + 30);
  EXPECT_LE(r.give_up_at[0], 300 + 32);
  // A small dip is not enough: at 65 qps (x 1.15 = 74.8, above the 73.5
  // peak the spread was marked at) both keep it.
  auto dip = [](int t) { return t < 300 ? Steady70(t) : 65.0; };
  EXPECT_EQ(ReplaySteadyLoad(dip, 900, false).give_ups, 0);
}

TEST(ConsolidationHysteresis, AMarkIsForgottenAfterTheSpreadMemory) {
  ConsolidationOptions c;
  c.spread_memory = 300 * kSecond;
  Replay r = ReplaySteadyLoad(Steady70, 900, /*both_at_first=*/false, 60, c);
  // Forgotten at 301 s, given up, reloaded (a new mark), forgotten at 602 s,
  // and again: one cycle per memory instead of one per half-minute.
  EXPECT_EQ(r.cycles, 2);
  EXPECT_THAT(r.give_up_at, ElementsAre(301, 602));
}

// The mark follows the workers: a worker that goes takes the latest mark
// with it, and a spread while the model's first load was still under way
// (a cold start, not a capacity shortage) leaves none.
TEST(ConsolidationHysteresis, MarksFollowTheWorkers) {
  ModelAutoscalerOptions o = ShortWaits();
  ConsolidationState state;
  auto round = [&](std::vector<WorkerScalingSnapshot> workers, int t) {
    auto d = DecideConsolidation(workers, state, t * kSecond, o);
    EXPECT_TRUE(d.ok());
    state = d->state;
    return d->actions;
  };
  ScalingVariant loading = V("a", 100, 1, 1, 0);
  loading.loading = 1;
  round({W("w1", 10, {loading})}, 0);
  round({W("w1", 10, {loading}), W("w2", 10, {loading})}, 1);  // cold start
  EXPECT_THAT(state.spread.at("cnn").marks, IsEmpty());
  round({W("w1", 10, {V("a", 100, 1, 1, 1)})}, 2);              // w2's load failed
  round({W("w1", 10, {V("a", 100, 1, 1, 1)}), W("w2", 10, {loading})}, 3);
  ASSERT_THAT(state.spread.at("cnn").marks, SizeIs(1));
  EXPECT_DOUBLE_EQ(state.spread.at("cnn").marks[0].load_qps, 20);
  // 20 qps stays: nothing goes, however long.
  for (int t = 4; t < 60; ++t) {
    EXPECT_THAT(round({W("w1", 10, {V("a", 100, 1, 1, 1)}), W("w2", 10, {V("a", 100, 1, 1, 1)})},
                      t),
                IsEmpty())
        << t;
  }
  // w2 is lost: its mark goes with it, and a third worker added later at
  // the same load is marked afresh.
  round({W("w1", 20, {V("a", 100, 1, 1, 1)})}, 60);
  EXPECT_THAT(state.spread.at("cnn").marks, IsEmpty());
}

TEST(Consolidation, RejectsAWorkerNamedTwice) {
  auto d = DecideConsolidation({W("w1", 1, {V("a", 100, 1, 1, 1)}), W("w1", 1, {})}, {}, 0, {});
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace maitre::policy
