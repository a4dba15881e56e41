#include "policy/batching_mark.h"

#include <gtest/gtest.h>

#include "policy/testing/test_profiles.h"

namespace maitre::policy {
namespace {

using Action = BatchDecision::Action;
constexpr Nanos kMs = kMillisecond;

struct TuneCase {
  const char* name;
  Nanos rt_max;
  double rate;
  int32_t max_batch;
  int32_t n_batch;
  Nanos w_batch;
};

TEST(MarkBatchingTest, TuningTable) {
  // p99(b) = 4.4 + 2.2b ms.
  LatencyTable table = LatencyTable::Build(testing::LinearProfile(4, 2), 64);
  const std::vector<TuneCase> cases = {
      // Only W + T_b <= RTmax: b = 16 (39.6 ms), W = 0.4 ms.
      {"response time binds", 40 * kMs, 0, 32, 16, 400 * kMicrosecond},
      {"slow arrivals leave RTmax binding", 40 * kMs, 200, 32, 16, 400 * kMicrosecond},
      // 16 queries take 53.3 ms to arrive at 300 qps: W = 53.33 - 39.6 ms.
      {"stability binds", 100 * kMs, 300, 16, 16, 13'733'333},
      {"max batch caps b", 100 * kMs, 0, 8, 8, 78 * kMs},
      // Faster than the instance can ever serve: fall back to b = 1, W = 0.
      {"infeasible rate", 40 * kMs, 1000, 32, 1, 0},
      {"infeasible SLO", 5 * kMs, 0, 32, 1, 0},
  };
  for (const TuneCase& c : cases) {
    MarkParams p = TuneMark(table, c.rt_max, c.rate, c.max_batch, /*plan_with_p99=*/true);
    EXPECT_EQ(p.n_batch, c.n_batch) << c.name;
    EXPECT_NEAR(p.w_batch, c.w_batch, 2) << c.name;
  }
}

TEST(MarkBatchingTest, DecidesLikeATunedTimeout) {
  BatchingOptions o;
  o.policy = "mark";
  o.max_batch = 32;
  o.slo = 40 * kMs;
  auto p = CreateBatchingPolicy(o, testing::LinearProfile(4, 2));
  ASSERT_TRUE(p.ok()) << p.status();
  std::vector<QueuedQuery> q = {{0, 40 * kMs, 1}};
  BatchDecision d = (*p)->Decide(q, 0);
  EXPECT_EQ(d.action, Action::kWait);
  EXPECT_EQ(d.wake_at, 400 * kMicrosecond);
  EXPECT_EQ((*p)->Decide(q, 400 * kMicrosecond).action, Action::kDispatch);
  std::vector<QueuedQuery> full(20, {0, 40 * kMs, 1});
  d = (*p)->Decide(full, 0);
  EXPECT_EQ(d.action, Action::kDispatch);
  EXPECT_EQ(d.count, 16);
}

TEST(MarkBatchingTest, WithoutSloTunesFromTheHead) {
  BatchingOptions o;
  o.policy = "mark";
  o.max_batch = 32;
  auto p = CreateBatchingPolicy(o, testing::LinearProfile(4, 2));
  ASSERT_TRUE(p.ok());
  std::vector<QueuedQuery> full(20, {0, 40 * kMs, 1});
  EXPECT_EQ((*p)->Decide(full, 0).count, 16);
}

}  // namespace
}  // namespace maitre::policy
