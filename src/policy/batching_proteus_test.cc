#include "policy/batching_proteus.h"

#include <gtest/gtest.h>

#include "policy/testing/test_profiles.h"

namespace maitre::policy {
namespace {

using Action = BatchDecision::Action;
constexpr Nanos kMs = kMillisecond;

// n queries that arrived at 0 with the given deadline.
std::vector<QueuedQuery> Same(int n, Nanos deadline) {
  return std::vector<QueuedQuery>(n, QueuedQuery{0, deadline, 1});
}

std::vector<QueuedQuery> WithHead(Nanos head_deadline, int rest, Nanos rest_deadline) {
  std::vector<QueuedQuery> q = Same(1, head_deadline);
  for (int i = 0; i < rest; ++i) q.push_back({0, rest_deadline, 1});
  return q;
}

struct Case {
  const char* name;
  Nanos slo;
  int32_t max_batch;
  std::vector<QueuedQuery> queue;
  Nanos now;
  bool median;
  Action action;
  int32_t count;  // for dispatch and drop
  Nanos wake_at;  // for wait
};

TEST(ProteusBatchingTest, Table) {
  // p50 = 4 + 2b ms, p99 = 1.1·p50 = 4.4 + 2.2b. With a 40 ms SLO the maximum
  // batch B is 8 (p50(8) = 20 ms = SLO/2).
  const Profile profile = testing::LinearProfile(4, 2);
  const Nanos slo = 40 * kMs;
  const std::vector<Case> cases = {
      {"empty queue waits forever", slo, 16, {}, 0, false, Action::kWait, 0, kInfiniteFuture},
      {"one query waits for a second while it fits", slo, 16, Same(1, 40 * kMs), 0, false,
       Action::kWait, 0, 40 * kMs - 8'800'000},
      {"dispatches at the last moment", slo, 16, Same(1, 40 * kMs), 40 * kMs - 8'800'000, false,
       Action::kDispatch, 1, 0},
      {"median planning waits longer", slo, 16, Same(1, 40 * kMs), 0, true, Action::kWait, 0,
       32 * kMs},
      {"five queued: wait until a sixth would no longer fit", slo, 16, Same(5, 40 * kMs), 0, false,
       Action::kWait, 0, 40 * kMs - 17'600'000},
      {"B queued: dispatch at once", slo, 16, Same(8, 40 * kMs), 0, false, Action::kDispatch, 8, 0},
      {"long queue is cut at B", slo, 16, Same(20, 100 * kMs), 0, false, Action::kDispatch, 8, 0},
      {"max_batch below B caps it", slo, 4, Same(6, 40 * kMs), 0, false, Action::kDispatch, 4, 0},
      {"expired queries are dropped", slo, 16, Same(2, 10 * kMs), 10 * kMs, false, Action::kDrop, 2,
       0},
      {"hopeless head is dropped", slo, 16, WithHead(5 * kMs, 1, 40 * kMs), 0, false, Action::kDrop,
       1, 0},
      // Alone the head (6 ms) would fit its 10 ms, but not in a batch of the
      // queue up to B (p50(8) = 20 ms): the artifact's early drop.
      {"early drop by the queue's batch", slo, 16, WithHead(10 * kMs, 9, 40 * kMs), 0, false,
       Action::kDrop, 1, 0},
      {"a short queue keeps a tight head", slo, 16, WithHead(10 * kMs, 1, 40 * kMs), 0, false,
       Action::kDispatch, 2, 0},
      {"head fitting only at the median runs at once", slo, 16, Same(1, 6'300'000), 0, false,
       Action::kDispatch, 1, 0},
      {"no SLO: B from the head's budget", 0, 16, Same(20, 40 * kMs), 0, false, Action::kDispatch,
       8, 0},
      {"no SLO, tighter budget", 0, 16, Same(20, 24 * kMs), 0, false, Action::kDispatch, 4, 0},
  };
  for (const Case& c : cases) {
    BatchingOptions o;
    o.policy = "proteus";
    o.max_batch = c.max_batch;
    o.slo = c.slo;
    o.plan_with_median = c.median;
    o.demand_headroom = 0;  // the paper's rules alone; demand is tested below
    auto p = CreateBatchingPolicy(o, profile);
    ASSERT_TRUE(p.ok()) << p.status();
    BatchDecision d = (*p)->Decide(c.queue, c.now);
    EXPECT_EQ(d.action, c.action) << c.name;
    if (c.action == Action::kWait) {
      EXPECT_EQ(d.wake_at, c.wake_at) << c.name;
    } else {
      EXPECT_EQ(d.count, c.count) << c.name;
    }
  }
}

TEST(ProteusBatchingTest, MaxBatchFollowsHalfTheSlo) {
  ProteusBatching p(64, 40 * kMs, LatencyTable::Build(testing::LinearProfile(4, 2), 64), true,
                    {}, 0);
  EXPECT_EQ(p.MaxBatchFor(40 * kMs), 8);
  EXPECT_EQ(p.MaxBatchFor(100 * kMs), 23);
  EXPECT_EQ(p.MaxBatchFor(kMs), 1);  // never below one
}

// p50 = 4 + 2b ms, so one replica serves b / (4 + 2b) ms: 167 rows/s at
// batch 1, 250 at 2, 300 at 3, 400 at B = 8.
std::unique_ptr<BatchingPolicy> DemandAware(double headroom) {
  BatchingOptions o;
  o.policy = "proteus";
  o.max_batch = 16;
  o.slo = 40 * kMs;
  o.demand_headroom = headroom;
  return *CreateBatchingPolicy(o, testing::LinearProfile(4, 2));
}

TEST(ProteusBatchingTest, LightDemandEndsTheWait) {
  auto p = DemandAware(1.25);
  const auto one = Same(1, 40 * kMs);
  // No demand seen yet: like an idle instance, it does not wait.
  EXPECT_EQ(static_cast<ProteusBatching&>(*p).demand_cap(), 1);
  EXPECT_EQ(p->Decide(one, 0).action, Action::kDispatch);
  p->ObserveDemand(100);  // needs 125 rows/s: batch 1 serves it
  EXPECT_EQ(static_cast<ProteusBatching&>(*p).demand_cap(), 1);
  BatchDecision d = p->Decide(one, 0);
  EXPECT_EQ(d.action, Action::kDispatch);
  EXPECT_EQ(d.count, 1);
  p->ObserveDemand(0);  // an idle interval: the next query runs at once
  EXPECT_EQ(p->Decide(one, 0).action, Action::kDispatch);
}

TEST(ProteusBatchingTest, DemandSetsTheRowsThatEndAWait) {
  auto p = DemandAware(1.25);
  p->ObserveDemand(200);  // needs 250 rows/s: batch 2
  EXPECT_EQ(static_cast<ProteusBatching&>(*p).demand_cap(), 2);
  EXPECT_EQ(p->Decide(Same(1, 40 * kMs), 0).action, Action::kWait);
  BatchDecision d = p->Decide(Same(2, 40 * kMs), 0);
  EXPECT_EQ(d.action, Action::kDispatch);
  EXPECT_EQ(d.count, 2);
}

TEST(ProteusBatchingTest, DemandNoBatchServesLeavesTheSloCap) {
  auto p = DemandAware(1.25);
  p->ObserveDemand(390);  // needs 487 rows/s; B = 8 serves 400
  EXPECT_EQ(static_cast<ProteusBatching&>(*p).demand_cap(), 0);
  BatchDecision d = p->Decide(Same(5, 40 * kMs), 0);
  EXPECT_EQ(d.action, Action::kWait);
  EXPECT_EQ(d.wake_at, 40 * kMs - 17'600'000);
}

TEST(ProteusBatchingTest, ABacklogStillGoesOutInBatchesOfB) {
  auto p = DemandAware(1.25);
  p->ObserveDemand(50);  // cap 1, then a burst the report did not see
  BatchDecision d = p->Decide(Same(20, 100 * kMs), 0);
  EXPECT_EQ(d.action, Action::kDispatch);
  EXPECT_EQ(d.count, 8);
}

TEST(ProteusBatchingTest, ZeroHeadroomIgnoresDemand) {
  auto p = DemandAware(0);
  p->ObserveDemand(100);
  EXPECT_EQ(p->Decide(Same(1, 40 * kMs), 0).action, Action::kWait);
  BatchingOptions o;
  o.policy = "proteus";
  o.demand_headroom = -1;
  EXPECT_FALSE(CreateBatchingPolicy(o, testing::LinearProfile(4, 2)).ok());
}

TEST(ProteusBatchingTest, NeedsAProfile) {
  BatchingOptions o;
  o.policy = "proteus";
  EXPECT_FALSE(CreateBatchingPolicy(o, Profile()).ok());
}

}  // namespace
}  // namespace maitre::policy
