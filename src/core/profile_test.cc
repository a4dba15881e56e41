#include "core/profile.h"

#include <gtest/gtest.h>

namespace maitre {
namespace {

Profile Make() {
  // 2 ms at batch 1, 3 ms at 2, 5 ms at 4, 9 ms at 8.
  return *Profile::Create({{4, 5, 6}, {1, 2, 2.5}, {2, 3, 4}, {8, 9, 11}}, 40, 120);
}

TEST(ProfileTest, CreateValidates) {
  EXPECT_FALSE(Profile::Create({}, 0, 0).ok());
  EXPECT_FALSE(Profile::Create({{0, 1, 1}}, 0, 0).ok());
  EXPECT_FALSE(Profile::Create({{1, 2, 1}}, 0, 0).ok());
  EXPECT_FALSE(Profile::Create({{1, 1, 1}, {1, 2, 2}}, 0, 0).ok());
  EXPECT_FALSE(Profile::Create({{1, 1, 1}}, -1, 0).ok());
}

TEST(ProfileTest, FastestOfKeepsTheLowerP50AtEachBatchAndEveryBatchEitherReached) {
  // A slow measurement that stopped at batch 4, and a faster one, except at
  // batch 2, that went on to 8.
  Profile slow = *Profile::Create({{1, 3, 9}, {2, 3.5, 4}, {4, 7, 8}}, 30, 100);
  Profile fast = *Profile::Create({{1, 2, 2.5}, {2, 4, 5}, {4, 5, 6}, {8, 9, 11}}, 40, 120);
  for (const Profile& merged : {Profile::FastestOf(slow, fast), Profile::FastestOf(fast, slow)}) {
    ASSERT_EQ(merged.points().size(), 4u);
    EXPECT_DOUBLE_EQ(merged.LatencyAt(1), 2);
    EXPECT_DOUBLE_EQ(merged.P99At(1), 2.5);  // the p99 comes with its p50
    EXPECT_DOUBLE_EQ(merged.LatencyAt(2), 3.5);
    EXPECT_DOUBLE_EQ(merged.P99At(2), 4);
    EXPECT_DOUBLE_EQ(merged.LatencyAt(4), 5);
    EXPECT_EQ(merged.max_batch(), 8);
    EXPECT_DOUBLE_EQ(merged.load_ms(), 30);
    EXPECT_DOUBLE_EQ(merged.memory_mb(), 120);
  }
  EXPECT_DOUBLE_EQ(Profile::FastestOf(Profile(), fast).LatencyAt(8), 9);
  EXPECT_DOUBLE_EQ(Profile::FastestOf(slow, Profile()).LatencyAt(4), 7);
}

TEST(ProfileTest, LatencyInterpolatesAndExtrapolates) {
  Profile p = Make();
  EXPECT_DOUBLE_EQ(p.LatencyAt(1), 2);
  EXPECT_DOUBLE_EQ(p.LatencyAt(3), 4);    // halfway between 3 and 5
  EXPECT_DOUBLE_EQ(p.LatencyAt(6), 7);    // halfway between 5 and 9
  EXPECT_DOUBLE_EQ(p.LatencyAt(10), 11);  // slope 1 ms per query past 8
  EXPECT_DOUBLE_EQ(p.P99At(8), 11);
  EXPECT_EQ(p.max_batch(), 8);
}

TEST(ProfileTest, MaxBatchWithin) {
  Profile p = Make();
  EXPECT_EQ(p.MaxBatchWithin(1.9), 0);
  EXPECT_EQ(p.MaxBatchWithin(2), 1);
  EXPECT_EQ(p.MaxBatchWithin(6), 5);
  EXPECT_EQ(p.MaxBatchWithin(1000), 8);  // never beyond what was measured
}

TEST(ProfileTest, ThroughputAndSaturation) {
  Profile p = Make();
  EXPECT_DOUBLE_EQ(p.ThroughputAt(1), 500);
  EXPECT_DOUBLE_EQ(p.ThroughputAt(8), 8000.0 / 9);
  // SLO 10 ms: batches with 2·latency <= 10 are 1..4; best is 4/5 ms = 800/s.
  EXPECT_DOUBLE_EQ(p.SaturationQps(10), 800);
  // SLO 3 ms: no batch passes the 2x rule, batch 1 alone fits.
  EXPECT_DOUBLE_EQ(p.SaturationQps(3), 500);
  EXPECT_DOUBLE_EQ(p.SaturationQps(1), 0);
  EXPECT_DOUBLE_EQ(Profile().SaturationQps(100), 0);
}

TEST(ProfileTest, AnswerBehindAQueue) {
  Profile p = Make();
  // Nothing ahead: the query's own batch.
  EXPECT_DOUBLE_EQ(p.AnswerBehindMs(0, 1, 1), 2);
  EXPECT_DOUBLE_EQ(p.AnswerBehindMs(0, 4, 1), 5);
  // Four rows ahead in one batch of 4 (5 ms), then the query's: 5 + 5;
  // in batches of 1: 4·2 + 2.
  EXPECT_DOUBLE_EQ(p.AnswerBehindMs(4, 4, 1), 10);
  EXPECT_DOUBLE_EQ(p.AnswerBehindMs(4, 1, 1), 10);
  // In batches of 2 (3 ms): 6 + 3. Two replicas drain twice as fast.
  EXPECT_DOUBLE_EQ(p.AnswerBehindMs(4, 2, 1), 9);
  EXPECT_DOUBLE_EQ(p.AnswerBehindMs(4, 4, 2), 2.5 + 5);
  // 16 rows in batches of 8 (9 ms).
  EXPECT_DOUBLE_EQ(p.AnswerBehindMs(16, 8, 1), 18 + 9);
}

TEST(ProfileTest, BatchCapIsTheReportedCapUpToTheLargestBatch) {
  Profile p = Make();
  EXPECT_EQ(p.BatchCap(0), 8);  // none reported
  EXPECT_EQ(p.BatchCap(-3), 8);
  EXPECT_EQ(p.BatchCap(2), 2);
  EXPECT_EQ(p.BatchCap(64), 8);
}

}  // namespace
}  // namespace maitre
