#include "policy/batching_clipper.h"

#include <gtest/gtest.h>

namespace maitre::policy {
namespace {

using Action = BatchDecision::Action;

std::vector<QueuedQuery> Queue(int n) { return std::vector<QueuedQuery>(n, {0, kSecond, 1}); }

BatchOutcome Outcome(int missed) { return BatchOutcome{1, 0, 1, missed}; }

TEST(ClipperAimdBatchingTest, AdditiveIncreaseMultiplicativeDecrease) {
  BatchingOptions o;
  o.policy = "clipper-aimd";
  o.max_batch = 8;
  auto created = CreateBatchingPolicy(o, Profile());  // Clipper needs no profile
  ASSERT_TRUE(created.ok()) << created.status();
  auto* p = static_cast<ClipperAimdBatching*>(created->get());

  // Work-conserving: dispatches at once, up to the current maximum.
  BatchDecision d = p->Decide(Queue(5), 0);
  EXPECT_EQ(d.action, Action::kDispatch);
  EXPECT_EQ(d.count, 1);

  // {observed misses, expected maximum afterwards}
  const std::vector<std::pair<int, int>> steps = {
      {0, 2}, {0, 3}, {0, 4}, {0, 5}, {0, 6}, {0, 7}, {0, 8}, {0, 8},  // capped at max_batch
      {1, 7},                                                          // 8 · 0.9 = 7.2
      {3, 6},                                                          // 7.2 · 0.9 = 6.48
      {0, 7},                                                          // 7.48
  };
  for (const auto& [missed, expected] : steps) {
    p->Observe(Outcome(missed));
    EXPECT_EQ(p->current_max_batch(), expected) << "after missed=" << missed;
  }
  EXPECT_EQ(p->Decide(Queue(20), 0).count, 7);
  EXPECT_EQ(p->Decide(Queue(3), 0).count, 3);
  for (int i = 0; i < 100; ++i) p->Observe(Outcome(1));
  EXPECT_EQ(p->current_max_batch(), 1);  // never below one
}

TEST(ClipperAimdBatchingTest, BatchLatencySignalIgnoresQueueing) {
  BatchingOptions o;
  o.policy = "clipper-aimd";
  o.max_batch = 8;
  o.slo = 10 * kMillisecond;
  o.aimd_batch_latency_signal = true;
  auto created = CreateBatchingPolicy(o, Profile());
  ASSERT_TRUE(created.ok()) << created.status();
  auto* p = static_cast<ClipperAimdBatching*>(created->get());
  // Every query late, but the batch itself ran in 5 ms: still an increase.
  p->Observe({4, 0, 5 * kMillisecond, 4});
  EXPECT_EQ(p->current_max_batch(), 2);
  // A batch that ran longer than the SLO is a miss.
  p->Observe({4, 0, 11 * kMillisecond, 0});
  EXPECT_EQ(p->current_max_batch(), 1);
  o.slo = 0;
  EXPECT_FALSE(CreateBatchingPolicy(o, Profile()).ok());
}

TEST(ClipperAimdBatchingTest, DropsExpiredHead) {
  auto p = CreateBatchingPolicy({"clipper-aimd"}, Profile());
  ASSERT_TRUE(p.ok());
  std::vector<QueuedQuery> q = {{0, 5, 1}, {0, 5, 1}, {0, 50, 1}};
  BatchDecision d = (*p)->Decide(q, 5);
  EXPECT_EQ(d.action, Action::kDrop);
  EXPECT_EQ(d.count, 2);
  EXPECT_EQ((*p)->Decide({}, 5).action, Action::kWait);
}

TEST(ClipperAimdBatchingTest, RejectsBadParameters) {
  BatchingOptions o;
  o.policy = "clipper-aimd";
  o.aimd_decrease = 1.5;
  EXPECT_FALSE(CreateBatchingPolicy(o, Profile()).ok());
  o.aimd_decrease = 0.9;
  o.aimd_step = 0;
  EXPECT_FALSE(CreateBatchingPolicy(o, Profile()).ok());
}

}  // namespace
}  // namespace maitre::policy
