#include "policy/autoscaling_cluster.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

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
