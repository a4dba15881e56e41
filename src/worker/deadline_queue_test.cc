#include "worker/deadline_queue.h"

#include <gtest/gtest.h>

namespace maitre::worker {
namespace {

TEST(DeadlineQueueTest, OrdersByDeadlineKeepingArrivalOrderOnTies) {
  DeadlineQueue<int> q;
  q.Push({0, 30, 1}, 1);
  q.Push({1, 10, 1}, 2);
  q.Push({2, 30, 1}, 3);
  q.Push({3, 20, 1}, 4);
  ASSERT_EQ(q.size(), 4u);
  EXPECT_EQ(q.View()[0].deadline, 10);
  EXPECT_EQ(q.PopFront(2), (std::vector<int>{2, 4}));
  EXPECT_EQ(q.PopFront(5), (std::vector<int>{1, 3}));
  EXPECT_TRUE(q.empty());
}

TEST(DeadlineQueueTest, StaysCorrectAcrossCompaction) {
  DeadlineQueue<int> q;
  int next_out = 0;
  for (int i = 0; i < 1000; ++i) {
    q.Push({i, i, 1}, i);
    if (i % 3 == 2) {
      for (int v : q.PopFront(2)) EXPECT_EQ(v, next_out++);
    }
  }
  while (!q.empty()) {
    for (int v : q.PopFront(1)) EXPECT_EQ(v, next_out++);
  }
  EXPECT_EQ(next_out, 1000);
}

TEST(DeadlineQueueTest, TakeWhereKeepsTheRestInOrder) {
  DeadlineQueue<int> q;
  for (int i = 0; i < 6; ++i) q.Push({i, i, 1}, i);
  (void)q.PopFront(1);
  EXPECT_EQ(q.TakeWhere([](int v) { return v % 2 == 0; }), (std::vector<int>{2, 4}));
  ASSERT_EQ(q.size(), 3u);
  EXPECT_EQ(q.View()[1].deadline, 3);
  EXPECT_EQ(q.PopFront(3), (std::vector<int>{1, 3, 5}));
}

}  // namespace
}  // namespace maitre::worker
