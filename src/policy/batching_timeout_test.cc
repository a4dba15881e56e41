#include "policy/batching_timeout.h"

#include <gtest/gtest.h>

#include "policy/testing/test_profiles.h"

namespace maitre::policy {
namespace {

using Action = BatchDecision::Action;
constexpr Nanos kMs = kMillisecond;

TEST(TimeoutBatchingTest, WithAProfileNeverWaitsPastTheLastFeasibleDispatch) {
  BatchingOptions o;
  o.policy = "timeout";
  o.max_batch = 8;
  o.max_queue_delay = 50 * kMs;
  auto p = CreateBatchingPolicy(o, testing::LinearProfile(4, 2));
  ASSERT_TRUE(p.ok());
  // Alone, the head needs p99(1) = 6.6 ms: hold it until 40 - 6.6, not 50.
  std::vector<QueuedQuery> q = {{0, 40 * kMs, 1}};
  BatchDecision d = (*p)->Decide(q, 0);
  EXPECT_EQ(d.action, Action::kWait);
  EXPECT_EQ(d.wake_at, 33'400'000);
  // With three queued the batch needs p99(3) = 11 ms.
  q = {{0, 40 * kMs, 1}, {kMs, 41 * kMs, 1}, {2 * kMs, 42 * kMs, 1}};
  EXPECT_EQ((*p)->Decide(q, 2 * kMs).wake_at, 29 * kMs);
  EXPECT_EQ((*p)->Decide(q, 29 * kMs).action, Action::kDispatch);
}

TEST(TimeoutBatchingTest, DropsExpiredHead) {
  auto p = CreateBatchingPolicy({"timeout", 4, 2 * kMs}, Profile());
  ASSERT_TRUE(p.ok());
  std::vector<QueuedQuery> q = {{0, kMs, 1}, {0, 9 * kMs, 1}};
  BatchDecision d = (*p)->Decide(q, kMs);
  EXPECT_EQ(d.action, Action::kDrop);
  EXPECT_EQ(d.count, 1);
}

}  // namespace
}  // namespace maitre::policy
