#include "policy/autoscaling_consolidation.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

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
// snapshots and returns the last decision.
ConsolidationDecision RunFor(const std::vector<WorkerScalingSnapshot>& workers, int seconds,
                             ModelAutoscalerOptions o = ShortWaits()) {
  ConsolidationState state;
  ConsolidationDecision last;
  for (int t = 0; t <= seconds; ++t) {
    auto d = DecideConsolidation(workers, state, t * kSecond, o);
    EXPECT_TRUE(d.ok()) << d.status();
    state = d->state;
    last = *std::move(d);
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

TEST(Consolidation, RejectsAWorkerNamedTwice) {
  auto d = DecideConsolidation({W("w1", 1, {V("a", 100, 1, 1, 1)}), W("w1", 1, {})}, {}, 0, {});
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace maitre::policy
