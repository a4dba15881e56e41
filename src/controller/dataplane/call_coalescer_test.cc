#include "controller/dataplane/call_coalescer.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace maitre::controller {
namespace {

const VariantKey kKey{"m", "v"};
const VariantKey kOther{"m", "w"};

// A query that records its answer's status code in `answers` (by its tag).
OutgoingQuery Query(std::vector<std::string>* answers, std::string tag, Nanos deadline) {
  OutgoingQuery q;
  q.deadline = deadline;
  q.done = [answers, tag](absl::StatusOr<WorkerReply> reply) {
    answers->push_back(tag + ":" + absl::StatusCodeToString(reply.status().code()));
  };
  return q;
}

std::vector<Nanos> Deadlines(const std::vector<OutgoingQuery>& queries) {
  std::vector<Nanos> out;
  for (const OutgoingQuery& q : queries) out.push_back(q.deadline);
  return out;
}

TEST(CallCoalescerTest, ALoneQueryLeavesAtOnce) {
  CallCoalescer coalescer({.calls_per_instance = 2, .max_queries_per_call = 16});
  std::vector<std::string> answers;
  EXPECT_EQ(coalescer.Offer(kKey, Query(&answers, "a", 100)).size(), 1u);
  // The slot is back once its call returns with nothing waiting.
  CallCoalescer::Next next = coalescer.CallReturned(kKey, 0);
  EXPECT_TRUE(next.send.empty());
  EXPECT_EQ(coalescer.Offer(kKey, Query(&answers, "b", 100)).size(), 1u);
}

TEST(CallCoalescerTest, QueriesThatWaitLeaveTogetherInTheReturningCallsSlot) {
  CallCoalescer coalescer({.calls_per_instance = 2, .max_queries_per_call = 16});
  std::vector<std::string> answers;
  EXPECT_EQ(coalescer.Offer(kKey, Query(&answers, "a", 101)).size(), 1u);
  EXPECT_EQ(coalescer.Offer(kKey, Query(&answers, "b", 102)).size(), 1u);
  for (Nanos d : {103, 104, 105}) {
    EXPECT_TRUE(coalescer.Offer(kKey, Query(&answers, "w", d)).empty());
  }
  // Another instance has slots of its own.
  EXPECT_EQ(coalescer.Offer(kOther, Query(&answers, "o", 100)).size(), 1u);
  EXPECT_EQ(coalescer.Waiting(), 3);

  CallCoalescer::Next next = coalescer.CallReturned(kKey, 0);
  EXPECT_EQ(Deadlines(next.send), (std::vector<Nanos>{103, 104, 105}));  // oldest first
  EXPECT_TRUE(next.expired.empty());
  EXPECT_EQ(coalescer.Waiting(), 0);
  // Both slots are still taken (the group took the returning call's).
  EXPECT_TRUE(coalescer.Offer(kKey, Query(&answers, "x", 106)).empty());
  EXPECT_EQ(Deadlines(coalescer.CallReturned(kKey, 0).send), (std::vector<Nanos>{106}));
  EXPECT_TRUE(coalescer.CallReturned(kKey, 0).send.empty());
  EXPECT_TRUE(coalescer.CallReturned(kKey, 0).send.empty());
  // All calls have returned: two slots are free again.
  EXPECT_EQ(coalescer.Offer(kKey, Query(&answers, "y", 107)).size(), 1u);
  EXPECT_EQ(coalescer.Offer(kKey, Query(&answers, "z", 108)).size(), 1u);
  EXPECT_TRUE(answers.empty());  // the coalescer never answers anything itself
}

TEST(CallCoalescerTest, ACallCarriesAtMostItsLimitAndTheRestTakeTheNextSlot) {
  CallCoalescer coalescer({.calls_per_instance = 1, .max_queries_per_call = 2});
  std::vector<std::string> answers;
  ASSERT_EQ(coalescer.Offer(kKey, Query(&answers, "a", 100)).size(), 1u);
  for (Nanos d : {1, 2, 3, 4, 5}) coalescer.Offer(kKey, Query(&answers, "w", 100 + d));
  EXPECT_EQ(Deadlines(coalescer.CallReturned(kKey, 0).send), (std::vector<Nanos>{101, 102}));
  EXPECT_EQ(Deadlines(coalescer.CallReturned(kKey, 0).send), (std::vector<Nanos>{103, 104}));
  EXPECT_EQ(Deadlines(coalescer.CallReturned(kKey, 0).send), (std::vector<Nanos>{105}));
  EXPECT_TRUE(coalescer.CallReturned(kKey, 0).send.empty());
}

TEST(CallCoalescerTest, QueriesPastTheirDeadlineAreHandedBackNotSent) {
  CallCoalescer coalescer({.calls_per_instance = 1, .max_queries_per_call = 16});
  std::vector<std::string> answers;
  ASSERT_EQ(coalescer.Offer(kKey, Query(&answers, "a", 100)).size(), 1u);
  coalescer.Offer(kKey, Query(&answers, "late", 50));
  coalescer.Offer(kKey, Query(&answers, "on-time", 80));
  CallCoalescer::Next next = coalescer.CallReturned(kKey, 60);
  EXPECT_EQ(Deadlines(next.send), (std::vector<Nanos>{80}));
  EXPECT_EQ(Deadlines(next.expired), (std::vector<Nanos>{50}));

  // When every waiting query expired, the slot is freed.
  coalescer.Offer(kKey, Query(&answers, "late-too", 70));
  next = coalescer.CallReturned(kKey, 90);
  EXPECT_TRUE(next.send.empty());
  EXPECT_EQ(next.expired.size(), 1u);
  EXPECT_EQ(coalescer.Offer(kKey, Query(&answers, "b", 200)).size(), 1u);
}

}  // namespace
}  // namespace maitre::controller
