#include "policy/batching.h"

#include <gtest/gtest.h>

namespace maitre::policy {
namespace {

using Action = BatchDecision::Action;

TEST(BatchingTest, PrefixWithinRespectsRowsButAlwaysTakesOne) {
  std::vector<QueuedQuery> q = {{0, 10, 3}, {0, 10, 3}, {0, 10, 3}};
  EXPECT_EQ(PrefixWithin(q, 7), 2);
  EXPECT_EQ(PrefixWithin(q, 2), 1);
  EXPECT_EQ(RowsIn(q, 3), 9);
  EXPECT_EQ(PrefixWithin({}, 4), 0);
}

TEST(TimeoutBatchingTest, WaitsUntilFullOrDelayed) {
  auto p = CreateBatchingPolicy({"timeout", 4, 2 * kMillisecond}, Profile());
  ASSERT_TRUE(p.ok());
  EXPECT_EQ((*p)->Decide({}, 0).action, Action::kWait);
  std::vector<QueuedQuery> q = {{0, kSecond, 1}, {kMillisecond, kSecond, 1}};
  BatchDecision d = (*p)->Decide(q, kMillisecond);
  EXPECT_EQ(d.action, Action::kWait);
  EXPECT_EQ(d.wake_at, 2 * kMillisecond);
  d = (*p)->Decide(q, 2 * kMillisecond);
  EXPECT_EQ(d.action, Action::kDispatch);
  EXPECT_EQ(d.count, 2);
  q.push_back({kMillisecond, kSecond, 2});
  d = (*p)->Decide(q, kMillisecond);
  EXPECT_EQ(d.action, Action::kDispatch);
  EXPECT_EQ(d.count, 3);
}

TEST(BatchingTest, BestEffortQueriesAloneGoAtOnceWithinTheRowLimit) {
  auto p = CreateBatchingPolicy({"timeout", 4, 2 * kMillisecond}, Profile());
  ASSERT_TRUE(p.ok());
  std::vector<QueuedQuery> q = {{0, kSecond, 1}, {0, kSecond, 1}, {0, kSecond, 1}};
  // With objectives waiting, the policy decides (it would wait for more).
  EXPECT_EQ(DecideForInstance(**p, q, 3, 2, kMillisecond).action, Action::kWait);
  // Best-effort only: at once, as many as fit in 2 rows.
  BatchDecision d = DecideForInstance(**p, q, 0, 2, kMillisecond);
  EXPECT_EQ(d.action, Action::kDispatch);
  EXPECT_EQ(d.count, 2);
  // The policy's own dispatch is held to the limit too.
  d = DecideForInstance(**p, q, 3, 2, 2 * kMillisecond);
  EXPECT_EQ(d.action, Action::kDispatch);
  EXPECT_EQ(d.count, 2);
}

TEST(BatchingTest, ADroppedQueryIsServedBestEffortOnlyOnceAndOnlyInTime) {
  EXPECT_TRUE(ServeDroppedBestEffort(false, 10, 9));
  EXPECT_FALSE(ServeDroppedBestEffort(false, 10, 10));  // its deadline has come
  EXPECT_FALSE(ServeDroppedBestEffort(true, 10, 9));    // dropped before
}

TEST(BatchingTest, UnknownPolicyIsAnError) {
  EXPECT_FALSE(CreateBatchingPolicy({"fifo"}, Profile()).ok());
  BatchingOptions zero;
  zero.policy = "timeout";
  zero.max_batch = 0;
  EXPECT_FALSE(CreateBatchingPolicy(zero, Profile()).ok());
}

}  // namespace
}  // namespace maitre::policy
