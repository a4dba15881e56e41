#include "policy/autoscaling_cluster.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

namespace maitre::policy {
namespace {

using Kind = ClusterAction::Kind;
using State = InstanceState;

ClusterAutoscalerOptions Options() {
  ClusterAutoscalerOptions o;
  o.types = {{"cpu-1", 1, 2048, 0.0425}, {"cpu-2", 2, 4096, 0.085}, {"cuda", 8, 32768, 3.06}};
  o.max_workers = {{"cpu-1", 4}, {"cpu-2", 8}, {"cuda", 1}};
  return o;
}

ClusterInstance I(State state, double cores = 1, double memory = 200) {
  return {"cnn:torch", state, cores, memory};
}

ClusterWorker W(std::string id, std::string type, double cpu, std::vector<ClusterInstance> inst = {},
                double memory = 0.2) {
  ClusterWorker w;
  w.id = std::move(id);
  w.type = std::move(type);
  w.cpu_utilisation = cpu;
  w.memory_utilisation = memory;
  w.instances = std::move(inst);
  return w;
}

ClusterWorker Idle(std::string id, std::string type, double since_s) {
  ClusterWorker w = W(std::move(id), std::move(type), 0);
  w.idle_since = FromSeconds(since_s);
  return w;
}

ClusterWorker Starting(std::string id, std::string type) {
  ClusterWorker w = W(std::move(id), std::move(type), 0);
  w.starting = true;
  return w;
}

struct ClusterCase {
  std::string name;
  std::vector<ClusterWorker> workers;
  ClusterAutoscalerOptions options = Options();
  ClusterAutoscalerState state;
  double now_s = 100;
  // Expected actions as "add TYPE REASON" / "remove ID".
  std::vector<std::string> expected;
};

std::string Describe(const ClusterAction& a) {
  if (a.kind == Kind::kAddWorker) {
    return "add " + a.worker_type + " " + std::string(ClusterReasonName(a.reason));
  }
  return "remove " + a.worker_id;
}

std::vector<ClusterCase> Cases() {
  std::vector<ClusterCase> cases;
  cases.push_back({"quiet cluster", {W("a", "cpu-2", 0.5, {I(State::kActive)})}});
  cases.push_back({"cpu above 80%: cheapest type",
                   {W("a", "cpu-2", 0.9, {I(State::kActive)}), W("b", "cpu-2", 0.85)},
                   Options(), {}, 100, {"add cpu-1 cpu-utilisation"}});
  cases.push_back({"exactly 80% does not trigger", {W("a", "cpu-2", 0.8)}});
  cases.push_back({"weighted by capacity",  // (1·1.0 + 2·0.5) / 3 = 67%
                   {W("a", "cpu-1", 1.0), W("b", "cpu-2", 0.5)}});
  cases.push_back({"the need decides the type: a 2-core instance",
                   {W("a", "cpu-2", 0.95, {I(State::kActive, 2)})}, Options(), {}, 100,
                   {"add cpu-2 cpu-utilisation"}});
  cases.push_back({"memory above 80%",
                   {W("a", "cpu-2", 0.3, {I(State::kActive, 1, 3000)}, 0.9)}, Options(), {}, 100,
                   {"add cpu-2 memory-utilisation"}});
  cases.push_back({"a starting worker counts as empty capacity",
                   {W("a", "cpu-2", 0.9), Starting("b", "cpu-2")}});
  ClusterAutoscalerState recent;
  recent.last_add = FromSeconds(95);
  cases.push_back({"add cool-down", {W("a", "cpu-2", 0.95)}, Options(), recent, 100, {}});
  cases.push_back({"cool-down over", {W("a", "cpu-2", 0.95)}, Options(), recent, 106,
                   {"add cpu-1 cpu-utilisation"}});
  ClusterAutoscalerOptions full = Options();
  full.max_workers["cpu-1"] = 0;
  cases.push_back({"cheapest at its limit: the next", {W("a", "cpu-2", 0.95)}, full, {}, 100,
                   {"add cpu-2 cpu-utilisation"}});
  cases.push_back({"every instance of a type Interfered: same type",
                   {W("a", "cpu-2", 0.4, {I(State::kInterfered), I(State::kInactive)}),
                    W("b", "cpu-2", 0.3, {I(State::kInterfered)}),
                    W("c", "cpu-1", 0.3, {I(State::kActive)})},
                   Options(), {}, 100, {"add cpu-2 all-interfered"}});
  cases.push_back({"one healthy instance: no add",
                   {W("a", "cpu-2", 0.4, {I(State::kInterfered)}),
                    W("b", "cpu-2", 0.3, {I(State::kActive)})}});
  cases.push_back({"interfered type already starting a worker",
                   {W("a", "cpu-2", 0.4, {I(State::kInterfered)}), Starting("b", "cpu-2")}});
  cases.push_back({"more than 80% of workers overloaded",
                   {W("a", "cuda", 0.5, {I(State::kOverloaded)}),
                    W("b", "cpu-2", 0.5, {I(State::kOverloaded)}),
                    W("c", "cpu-2", 0.5, {I(State::kOverloaded)}),
                    W("d", "cpu-2", 0.5, {I(State::kOverloaded)}),
                    W("e", "cpu-2", 0.5, {I(State::kOverloaded)})},
                   Options(), {}, 100, {"add cpu-2 overloaded"}});
  cases.push_back({"80% overloaded is not more than 80%",
                   {W("a", "cpu-2", 0.5, {I(State::kOverloaded)}),
                    W("b", "cpu-2", 0.5, {I(State::kOverloaded)}),
                    W("c", "cpu-2", 0.5, {I(State::kOverloaded)}),
                    W("d", "cpu-2", 0.5, {I(State::kOverloaded)}),
                    W("e", "cpu-2", 0.5, {I(State::kActive)})}});
  cases.push_back({"idle past the cool-down", {W("a", "cpu-2", 0.3), Idle("b", "cpu-2", 30)},
                   Options(), {}, 100, {"remove b"}});
  cases.push_back({"idle within the cool-down", {W("a", "cpu-2", 0.3), Idle("b", "cpu-2", 50)}});
  cases.push_back({"min workers kept", {Idle("a", "cpu-2", 0)}});
  cases.push_back({"most expensive idle first, all that can go",
                   {W("a", "cpu-1", 0.2), Idle("b", "cpu-1", 0), Idle("c", "cuda", 10),
                    Idle("d", "cpu-2", 20)},
                   Options(), {}, 100, {"remove c", "remove d", "remove b"}});
  cases.push_back({"removal that would push the rest over the limit",
                   {W("a", "cpu-2", 0.75), Idle("b", "cpu-2", 0)}});
  cases.push_back({"no removal in a round that adds",
                   {W("a", "cpu-2", 0.95), W("b", "cpu-2", 0.95), W("c", "cpu-2", 0.95),
                    Idle("d", "cpu-1", 0)},  // 5.7 of 7 cores busy
                   Options(), {}, 100, {"add cpu-1 cpu-utilisation"}});
  return cases;
}

TEST(ClusterAutoscalerTest, Table) {
  for (const ClusterCase& c : Cases()) {
    SCOPED_TRACE(c.name);
    auto autoscaler = ClusterAutoscaler::Create(c.options);
    ASSERT_TRUE(autoscaler.ok()) << autoscaler.status();
    ClusterSnapshot snapshot{c.workers};
    auto d = (*autoscaler)->Decide(snapshot, c.state, FromSeconds(c.now_s));
    ASSERT_TRUE(d.ok()) << d.status();
    std::vector<std::string> got;
    for (const ClusterAction& a : d->actions) {
      got.push_back(Describe(a));
      EXPECT_FALSE(a.detail.empty());
    }
    EXPECT_EQ(got, c.expected);
  }
}

TEST(ClusterAutoscalerTest, AddStartsTheCoolDownAndReportsFigures) {
  auto a = *ClusterAutoscaler::Create(Options());
  ClusterSnapshot s{{W("a", "cpu-2", 0.9), W("b", "cpu-2", 0.9)}};
  auto first = a->Decide(s, {}, FromSeconds(10));
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->actions.size(), 1u);
  EXPECT_EQ(first->state.last_add, FromSeconds(10));
  EXPECT_NEAR(first->cpu_utilisation, 0.9, 1e-12);
  auto second = a->Decide(s, first->state, FromSeconds(12));
  ASSERT_TRUE(second.ok());
  EXPECT_THAT(second->actions, ::testing::IsEmpty());
  EXPECT_THAT(second->held_back, ::testing::ElementsAre(::testing::HasSubstr("cool-down")));
}

TEST(ClusterAutoscalerTest, NoTypeFitsIsHeldBack) {
  auto a = *ClusterAutoscaler::Create(Options());
  ClusterSnapshot s{{W("a", "cuda", 0.95, {I(State::kActive, 16)})}};
  auto d = a->Decide(s, {}, 0);
  ASSERT_TRUE(d.ok());
  EXPECT_THAT(d->actions, ::testing::IsEmpty());
  ASSERT_EQ(d->held_back.size(), 1u);
}

TEST(ClusterAutoscalerTest, RejectsBadInput) {
  ClusterAutoscalerOptions o = Options();
  o.utilisation_threshold = 1.5;
  EXPECT_FALSE(ClusterAutoscaler::Create(o).ok());
  o = Options();
  o.removal_utilisation_limit = 0.9;
  EXPECT_FALSE(ClusterAutoscaler::Create(o).ok());
  o = Options();
  o.types.push_back(o.types[0]);
  EXPECT_FALSE(ClusterAutoscaler::Create(o).ok());
  EXPECT_FALSE(ClusterAutoscaler::Create(ClusterAutoscalerOptions{}).ok());
  auto a = *ClusterAutoscaler::Create(Options());
  EXPECT_EQ(a->Decide({{W("a", "tpu", 0.5)}}, {}, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// A cluster whose load stays put neither adds and removes in turn: after an
// idle worker is removed the rest stay below the add threshold.
TEST(ClusterAutoscalerTest, RemovalNeverTriggersAnAdd) {
  auto a = *ClusterAutoscaler::Create(Options());
  for (double load = 0; load <= 0.8; load += 0.01) {
    ClusterSnapshot s{{W("a", "cpu-2", load), W("b", "cpu-2", load), Idle("c", "cpu-2", 0)}};
    auto d = a->Decide(s, {}, FromSeconds(100));
    ASSERT_TRUE(d.ok());
    ClusterSnapshot after;
    for (const ClusterWorker& w : s.workers) {
      bool removed = false;
      for (const ClusterAction& x : d->actions) removed |= x.worker_id == w.id;
      if (!removed) after.workers.push_back(w);
    }
    auto next = a->Decide(after, d->state, FromSeconds(102));
    ASSERT_TRUE(next.ok());
    for (const ClusterAction& x : next->actions) EXPECT_NE(x.kind, Kind::kAddWorker) << load;
  }
}

}  // namespace
}  // namespace maitre::policy

namespace maitre::policy {
namespace {

// INFaaS Table 3's machines: a CPU box, an Inferentia box and a V100 box at
// 1 : 3 : 16 in price, serving one model at 5 / 100 / 800 qps per worker.
ClusterAutoscalerOptions Table3Types() {
  ClusterAutoscalerOptions o;
  o.types = {{"cpu", 4, 8192, 0.19125}, {"inferentia", 4, 8192, 0.57375}, {"gpu", 8, 16384, 3.06}};
  return o;
}

ClusterDemand Unmet(double qps, std::map<std::string, double> per_worker = {
                                    {"cpu", 20}, {"inferentia", 100}, {"gpu", 800}}) {
  return {"resnet50", qps, std::move(per_worker)};
}

// One CPU worker whose only instance is Overloaded (rule 3 holds).
ClusterSnapshot OverloadedCpu(std::vector<ClusterDemand> demands) {
  ClusterSnapshot s;
  s.workers = {W("w1", "cpu", 0.5, {I(State::kOverloaded)})};
  s.demands = std::move(demands);
  return s;
}

std::multiset<std::string> AddedTypes(const ClusterDecision& d) {
  std::multiset<std::string> types;
  for (const ClusterAction& a : d.actions) {
    if (a.kind == Kind::kAddWorker) types.insert(a.worker_type);
  }
  return types;
}

TEST(ClusterDemandTest, BuysTheCheapestCapacityNotTheCheapestMachine) {
  auto scaler = *ClusterAutoscaler::Create(Table3Types());
  // 1000 qps short: 1 gpu + 2 inferentia ($4.21/h) beats 10 inferentia
  // ($5.74/h) and any mix with CPU boxes.
  auto d = scaler->Decide(OverloadedCpu({Unmet(1000)}), {}, FromSeconds(100));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(AddedTypes(*d), (std::multiset<std::string>{"gpu", "inferentia", "inferentia"}));
  for (const ClusterAction& a : d->actions) {
    EXPECT_EQ(a.reason, ClusterReason::kOverloaded);
    EXPECT_EQ(a.for_model, "resnet50");
    EXPECT_THAT(a.detail, ::testing::HasSubstr("1000.0 qps unmet"));
  }
  EXPECT_EQ(d->state.last_add, FromSeconds(100));
}

TEST(ClusterDemandTest, ASmallShortfallBuysACheapMachine) {
  auto scaler = *ClusterAutoscaler::Create(Table3Types());
  auto d = scaler->Decide(OverloadedCpu({Unmet(10)}), {}, FromSeconds(100));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(AddedTypes(*d), (std::multiset<std::string>{"cpu"}));
}

TEST(ClusterDemandTest, TheLargestShortfallIsServedFirst) {
  auto scaler = *ClusterAutoscaler::Create(Table3Types());
  ClusterDemand small{"small", 10, {{"cpu", 20}}};
  auto d = scaler->Decide(OverloadedCpu({small, Unmet(150)}), {}, FromSeconds(100));
  ASSERT_TRUE(d.ok());
  ASSERT_FALSE(d->actions.empty());
  for (const ClusterAction& a : d->actions) EXPECT_EQ(a.for_model, "resnet50");
}

TEST(ClusterDemandTest, RespectsLimitsAndTheAddsPerRound) {
  ClusterAutoscalerOptions o = Table3Types();
  o.max_workers = {{"gpu", 0}};
  o.max_adds_per_round = 3;
  auto scaler = *ClusterAutoscaler::Create(o);
  // No GPU may be bought: inferentia is next best, three at most this round.
  auto d = scaler->Decide(OverloadedCpu({Unmet(1000)}), {}, FromSeconds(100));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(AddedTypes(*d),
            (std::multiset<std::string>{"inferentia", "inferentia", "inferentia"}));
}

TEST(ClusterDemandTest, NothingIsAddedWithoutATriggerOrDuringTheCooldown) {
  auto scaler = *ClusterAutoscaler::Create(Table3Types());
  ClusterSnapshot calm;
  calm.workers = {W("w1", "cpu", 0.3, {I(State::kActive)})};
  calm.demands = {Unmet(1000)};
  auto d = scaler->Decide(calm, {}, FromSeconds(100));
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(AddedTypes(*d).empty());
  ClusterAutoscalerState recent;
  recent.last_add = FromSeconds(95);
  d = scaler->Decide(OverloadedCpu({Unmet(1000)}), recent, FromSeconds(100));
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(AddedTypes(*d).empty());
}

TEST(ClusterDemandTest, WorkersOnTheirWayCoverDemand) {
  ClusterAutoscalerOptions o = Table3Types();
  o.max_workers = {{"cpu", 9}};
  auto scaler = *ClusterAutoscaler::Create(o);
  // Nine Overloaded CPU workers keep rule 3 true (9 of 11 workers).
  ClusterSnapshot s = OverloadedCpu({Unmet(1000)});
  for (int i = 2; i <= 9; ++i) {
    s.workers.push_back(W("w" + std::to_string(i), "cpu", 0.5, {I(State::kOverloaded)}));
  }
  s.workers.push_back(Starting("g1", "gpu"));       // 800 of it on its way
  s.workers.push_back(W("n1", "inferentia", 0.0));  // up, nothing loaded yet: 100
  auto d = scaler->Decide(s, {}, FromSeconds(100));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(AddedTypes(*d), (std::multiset<std::string>{"inferentia"}));
  EXPECT_THAT(d->actions[0].detail, ::testing::HasSubstr("100.0 qps unmet"));
}

TEST(ClusterDemandTest, CoveredDemandAddsNothingWhateverTheTriggers) {
  auto scaler = *ClusterAutoscaler::Create(Table3Types());
  auto d = scaler->Decide(OverloadedCpu({Unmet(0)}), {}, FromSeconds(100));
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(AddedTypes(*d).empty());
  ASSERT_EQ(d->held_back.size(), 1u);
  EXPECT_THAT(d->held_back[0], ::testing::HasSubstr("no unmet demand"));
  // Without demand figures the rules alone size the add, as before.
  d = scaler->Decide(OverloadedCpu({}), {}, FromSeconds(100));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(AddedTypes(*d), (std::multiset<std::string>{"cpu"}));
  EXPECT_TRUE(d->actions[0].for_model.empty());
}

}  // namespace
}  // namespace maitre::policy

namespace maitre::policy {
namespace {

TEST(WorkerCapacityTest, ReplicasThatFitTimesOneReplicasRate) {
  // p50 = 10 ms at batch 1 and 20 ms at 2: at a 100 ms objective one
  // replica sustains 100 qps (batch 2 within half the objective).
  auto profile = *Profile::Create({{1, 10, 11}, {2, 20, 22}}, 0, 3000);
  WorkerType four_cores{"w", 4, 8192, 1};
  EXPECT_DOUBLE_EQ(WorkerCapacityQps(profile, 100, four_cores), 2 * 100);  // memory: 2 fit
  EXPECT_DOUBLE_EQ(WorkerCapacityQps(profile, 100, four_cores, 4), 100);   // cores: 1 fits
  WorkerType no_memory_limit{"w", 4, 0, 1};
  EXPECT_DOUBLE_EQ(WorkerCapacityQps(profile, 100, no_memory_limit), 4 * 100);
  EXPECT_DOUBLE_EQ(WorkerCapacityQps(profile, 5, four_cores), 0);  // too slow for 5 ms
}

}  // namespace
}  // namespace maitre::policy
