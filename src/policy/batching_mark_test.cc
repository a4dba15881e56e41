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
  int32_t max_batch;
  int32_t n_batch;
  Nanos w_batch;
};

TEST(MarkBatchingTest, TuningTable) {
  // p99(b) = 4.4 + 2.2b ms, so T_1 = 6.6 ms (1/µ*_nb) and a batch of b
  // always beats b queries one by one (4.4 + 2.2b <= 6.6b).
  LatencyTable table = LatencyTable::Build(testing::LinearProfile(4, 2), 64);
  const std::vector<TuneCase> cases = {
      // b = 16 takes 39.6 ms; b = 17 (41.8 ms) misses RTmax: W = 40 - 39.6.
      {"response time binds", 40 * kMs, 32, 16, 400 * kMicrosecond},
      // b = 8: one by one would take 52.8 ms, sooner than RTmax: W = 52.8 - 22.
      {"one-by-one time binds", 100 * kMs, 8, 8, 30'800'000},
      // b = 32 (74.8 ms) fits; W = min(100, 211.2) - 74.8.
      {"max batch caps b", 100 * kMs, 32, 32, 25'200'000},
      {"infeasible SLO", 5 * kMs, 32, 1, 0},
  };
  for (const TuneCase& c : cases) {
    MarkParams p = TuneMark(table, c.rt_max, c.max_batch, /*plan_with_p99=*/true);
    EXPECT_EQ(p.n_batch, c.n_batch) << c.name;
    EXPECT_NEAR(p.w_batch, c.w_batch, 2) << c.name;
  }
}

TEST(MarkBatchingTest, StopsWhereBatchingStopsPaying) {
  // A batch of 2 takes longer than two queries one after the other, so the
  // throughput constraint fails at b = 2 and MArk stops there, although a
  // batch of 4 (33 ms against 40 ms one by one) would fit again.
  LatencyTable table = LatencyTable::Build(
      *Profile::Create({{1, 9.0, 10.0}, {2, 21.0, 23.0}, {4, 30.0, 33.0}}, 0, 0), 4);
  MarkParams p = TuneMark(table, 100 * kMs, 4, /*plan_with_p99=*/true);
  EXPECT_EQ(p.n_batch, 1);
  EXPECT_EQ(p.w_batch, 0);
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
