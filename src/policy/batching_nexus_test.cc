#include "policy/batching_nexus.h"

#include <gtest/gtest.h>

#include "policy/testing/test_profiles.h"

namespace maitre::policy {
namespace {

using Action = BatchDecision::Action;
constexpr Nanos kMs = kMillisecond;

struct Case {
  const char* name;
  Nanos slo;
  std::vector<QueuedQuery> queue;
  Nanos now;
  Action action;
  int32_t count;
};

std::vector<QueuedQuery> Same(int n, Nanos deadline) {
  return std::vector<QueuedQuery>(n, QueuedQuery{0, deadline, 1});
}

std::vector<QueuedQuery> WithHead(Nanos head_deadline, int rest, Nanos rest_deadline) {
  std::vector<QueuedQuery> q = Same(1, head_deadline);
  for (int i = 0; i < rest; ++i) q.push_back({0, rest_deadline, 1});
  return q;
}

TEST(NexusBatchingTest, Table) {
  // p50 = 4 + 2b ms: with a 40 ms SLO the target batch is 8 (p50(8) = 20 = SLO/2).
  const Profile profile = testing::LinearProfile(4, 2);
  const std::vector<Case> cases = {
      {"empty waits", 40 * kMs, {}, 0, Action::kWait, 0},
      {"work-conserving: a lone query goes at once", 40 * kMs, Same(1, 40 * kMs), 0,
       Action::kDispatch, 1},
      {"batch capped at the SLO's target", 40 * kMs, Same(12, 40 * kMs), 0, Action::kDispatch, 8},
      {"expired head dropped", 40 * kMs, WithHead(3 * kMs, 4, 40 * kMs), 3 * kMs, Action::kDrop, 1},
      // The head alone (6 ms) would fit its 10 ms, but not in a window of 8 (20 ms).
      {"early drop by window", 40 * kMs, WithHead(10 * kMs, 9, 40 * kMs), 0, Action::kDrop, 1},
      // With only two queued, the head's window is 2 (8 ms) and fits.
      {"short window keeps the head", 40 * kMs, WithHead(10 * kMs, 1, 40 * kMs), 0,
       Action::kDispatch, 2},
      {"no SLO: target from the head's budget", 0, Same(12, 40 * kMs), 0, Action::kDispatch, 8},
      {"no SLO, tighter budget", 0, Same(12, 24 * kMs), 0, Action::kDispatch, 4},
  };
  for (const Case& c : cases) {
    BatchingOptions o;
    o.policy = "nexus";
    o.max_batch = 32;
    o.slo = c.slo;
    auto p = CreateBatchingPolicy(o, profile);
    ASSERT_TRUE(p.ok()) << p.status();
    BatchDecision d = (*p)->Decide(c.queue, c.now);
    EXPECT_EQ(d.action, c.action) << c.name;
    if (c.action != Action::kWait) EXPECT_EQ(d.count, c.count) << c.name;
  }
}

TEST(NexusBatchingTest, TargetBatchFollowsHalfTheSlo) {
  NexusBatching p(64, 40 * kMs, LatencyTable::Build(testing::LinearProfile(4, 2), 64));
  EXPECT_EQ(p.TargetBatch(40 * kMs), 8);
  EXPECT_EQ(p.TargetBatch(100 * kMs), 23);
  EXPECT_EQ(p.TargetBatch(kMs), 1);  // never below one
}

}  // namespace
}  // namespace maitre::policy
