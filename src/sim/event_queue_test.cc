#include "sim/event_queue.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <tuple>

namespace maitre::sim {
namespace {

TEST(EventQueueTest, OrdersByTimeThenScheduling) {
  EventQueue q;
  q.Push(30, 0, 1);
  q.Push(10, 0, 2);
  q.Push(30, 0, 3);
  q.Push(10, 0, 4);
  q.Push(20, 0, 5);
  std::vector<uint32_t> order;
  while (!q.empty()) order.push_back(q.Pop().target);
  EXPECT_EQ(order, (std::vector<uint32_t>{2, 4, 5, 1, 3}));
}

TEST(EventQueueTest, MatchesASortedReference) {
  std::mt19937_64 rng(5);
  EventQueue q;
  std::vector<std::tuple<Nanos, uint64_t, uint32_t>> reference;
  uint64_t seq = 0;
  uint32_t id = 0;
  for (int round = 0; round < 2000; ++round) {
    // Interleave pushes and pops, with many equal times.
    for (int k = rng() % 5; k > 0; --k) {
      Nanos t = static_cast<Nanos>(rng() % 50);
      q.Push(t, 0, id);
      reference.emplace_back(t, seq++, id++);
    }
    for (int k = rng() % 4; k > 0 && !q.empty(); --k) {
      auto it = std::min_element(reference.begin(), reference.end());
      Event e = q.Pop();
      ASSERT_EQ(e.target, std::get<2>(*it));
      ASSERT_EQ(e.time, std::get<0>(*it));
      reference.erase(it);
    }
  }
  EXPECT_EQ(q.size(), reference.size());
}

TEST(EventQueueTest, TakeSeqOrdersWithPushedEvents) {
  EventQueue q;
  q.Push(10, 0, 1);
  uint64_t outside = q.TakeSeq();  // an event the owner holds aside
  q.Push(10, 0, 2);
  Event first = q.Pop();
  EXPECT_LT(first.seq, outside);
  EXPECT_GT(q.top().seq, outside);
}

}  // namespace
}  // namespace maitre::sim
