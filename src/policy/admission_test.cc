#include "policy/admission.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace maitre::policy {
namespace {

using ::testing::HasSubstr;

// 2 ms at batch 1, 4 ms at batch 4, 10 ms at batch 16 (the largest).
Profile TestProfile() {
  return *Profile::Create({{1, 2, 3}, {4, 4, 6}, {16, 10, 15}}, /*load_ms=*/500,
                          /*memory_mb=*/100);
}

TEST(EstimateFinishTest, IdleInstanceTakesOneBatchOfOne) {
  const Profile profile = TestProfile();
  EXPECT_EQ(EstimateFinish({&profile, 0, 1, 0}), 2 * kMillisecond);
}

TEST(EstimateFinishTest, QueueDrainsInTheBatchesItAllows) {
  const Profile profile = TestProfile();
  // 4 waiting, 1 replica: 4 ahead, drained at batch 4 (1,000 q/s) in 4 ms,
  // then its own batch of 4 takes 4 ms.
  EXPECT_EQ(EstimateFinish({&profile, 4, 1, 0}), 8 * kMillisecond);
  // 64 ahead: batches of 16 (1,600 q/s): 40 ms, plus 10 ms.
  EXPECT_EQ(EstimateFinish({&profile, 64, 1, 0}), 50 * kMillisecond);
}

TEST(EstimateFinishTest, FreeReplicasTakeQueriesAtOnce) {
  const Profile profile = TestProfile();
  // Two replicas, one query in flight: the other replica is free.
  EXPECT_EQ(EstimateFinish({&profile, 1, 2, 0}), 2 * kMillisecond);
  // 65 in flight on two replicas: 64 ahead drain twice as fast.
  EXPECT_EQ(EstimateFinish({&profile, 65, 2, 0}), 30 * kMillisecond);
}

TEST(EstimateFinishTest, LoadingInstanceAddsTheTimeUntilReady) {
  const Profile profile = TestProfile();
  EXPECT_EQ(EstimateFinish({&profile, 0, 1, 300 * kMillisecond}), 302 * kMillisecond);
  // A load that is overdue is counted as ready now.
  EXPECT_EQ(EstimateFinish({&profile, 0, 1, -5 * kMillisecond}), 2 * kMillisecond);
}

TEST(EstimateFinishTest, TheControllersOverheadAddsWhileQueriesAreInFlight) {
  const Profile profile = TestProfile();
  // One ahead (2 ms at batch 1), its own 2 ms, and 30 ms of round trip.
  EXPECT_EQ(EstimateFinish({&profile, 1, 1, 0, 30 * kMillisecond}), 34 * kMillisecond);
  // Idle, the figure is stale: nothing in flight will bring it up to date.
  EXPECT_EQ(EstimateFinish({&profile, 0, 1, 0, 30 * kMillisecond}), 2 * kMillisecond);
}

TEST(EstimateFinishTest, AWorkerSlowerThanItsProfileStretchesTheWorkWhileBusy) {
  const Profile profile = TestProfile();
  // 4 ahead and its own batch (8 ms by the profile) at 2.5× the profile.
  EXPECT_EQ(EstimateFinish({&profile, 4, 1, 0, 0, 2.5}), 20 * kMillisecond);
  // Idle: judged by the profile, so that the next reply measures again.
  EXPECT_EQ(EstimateFinish({&profile, 0, 1, 0, 0, 2.5}), 2 * kMillisecond);
  // Faster than the profile is not trusted: the profile is the floor.
  EXPECT_EQ(EstimateFinish({&profile, 4, 1, 0, 0, 0.5}), 8 * kMillisecond);
}

TEST(EstimateFinishTest, QueriesOfSeveralRowsDrainInRows) {
  const Profile profile = TestProfile();
  // An idle instance and a query of 4 rows: one batch of 4, 4 ms.
  EXPECT_EQ(EstimateFinish({&profile, 0, 1, 0}, 4), 4 * kMillisecond);
  // 16 queries of 4 rows ahead: 64 rows in batches of 16 (1,600 rows/s),
  // 40 ms, then a batch of 16 rows, 10 ms (the same wait as 64 one-row ones).
  EXPECT_EQ(EstimateFinish({&profile, 16, 1, 0}, 4), 50 * kMillisecond);
  EXPECT_FALSE(Admit({{&profile, 16, 1, 0}}, 20 * kMillisecond, 4).admit);
  EXPECT_TRUE(Admit({{&profile, 16, 1, 0}}, 20 * kMillisecond, 1).admit);
}

TEST(EstimateFinishTest, TheInstancesBatchingCapBoundsTheQueuesBatch) {
  const Profile profile = TestProfile();
  // A worker that batches one row at a time: 4 ahead at 2 ms each, then
  // its own, 10 ms (8 ms in batches of 4).
  EXPECT_EQ(EstimateFinish({&profile, 4, 1, 0, 0, 1, /*max_batch=*/1}), 10 * kMillisecond);
  // A cap above the profile's largest batch is the profile's: as uncapped.
  EXPECT_EQ(EstimateFinish({&profile, 64, 1, 0, 0, 1, /*max_batch=*/64}), 50 * kMillisecond);
  // A query wider than the cap runs alone as one batch, and so does each
  // query ahead, taken to be its size: two of 4 rows ahead, 8 ms, then its
  // own 4 ms (not 18 ms in batches of one row).
  EXPECT_EQ(EstimateFinish({&profile, 0, 1, 0, 0, 1, /*max_batch=*/1}, 4), 4 * kMillisecond);
  EXPECT_EQ(EstimateFinish({&profile, 2, 1, 0, 0, 1, /*max_batch=*/1}, 4), 12 * kMillisecond);
}

TEST(EstimateFinishTest, NoProfileCannotBeEstimated) {
  EXPECT_EQ(EstimateFinish({nullptr, 100, 1, 0}), std::nullopt);
  const Profile empty;
  EXPECT_EQ(EstimateFinish({&empty, 100, 1, 0}), std::nullopt);
}

TEST(EstimateFinishTest, ZeroReplicasReportedCountAsOne) {
  const Profile profile = TestProfile();
  EXPECT_EQ(EstimateFinish({&profile, 4, 0, 0}), EstimateFinish({&profile, 4, 1, 0}));
}

TEST(AdmitTest, AdmitsWhenAnyCandidateMakesTheDeadline) {
  const Profile profile = TestProfile();
  AdmissionVerdict v = Admit({{&profile, 64, 1, 0}, {&profile, 0, 1, 0}}, 20 * kMillisecond);
  EXPECT_TRUE(v.admit);
}

TEST(AdmitTest, RefusesWhenNoneMakesTheDeadlineAndReportsTheEarliest) {
  const Profile profile = TestProfile();
  AdmissionVerdict v = Admit({{&profile, 64, 1, 0}, {&profile, 65, 2, 0}}, 20 * kMillisecond);
  EXPECT_FALSE(v.admit);
  EXPECT_EQ(v.best_finish, 30 * kMillisecond);
}

TEST(AdmitTest, AnUnprofiledCandidateAdmits) {
  const Profile profile = TestProfile();
  EXPECT_TRUE(Admit({{&profile, 64, 1, 0}, {nullptr, 1000, 1, 0}}, 20 * kMillisecond).admit);
}

TEST(AdmitTest, NoCandidateAdmits) { EXPECT_TRUE(Admit({}, 0).admit); }

TEST(AdmitTest, ALongDeadlineAdmitsADeepQueue) {
  // A query without an objective has the default timeout (30 s) to wait.
  const Profile profile = TestProfile();
  EXPECT_TRUE(Admit({{&profile, 10000, 1, 0}}, 30 * kSecond).admit);
}

TEST(AdmitTest, APassedDeadlineRefusesEvenAnIdleInstance) {
  const Profile profile = TestProfile();
  EXPECT_FALSE(Admit({{&profile, 0, 1, 0}}, -kMillisecond).admit);
}

TEST(AnswersInTimeTest, JudgesTheInstanceByItsEstimatedFinish) {
  const Profile profile = TestProfile();
  // 4 ahead on one replica: 8 ms (QueueDrainsInTheBatchesItAllows).
  EXPECT_TRUE(AnswersInTime({&profile, 4, 1, 0}, 8 * kMillisecond));
  EXPECT_FALSE(AnswersInTime({&profile, 4, 1, 0}, 8 * kMillisecond - 1));
  // The same queue ahead of a 4-row query: 16 rows ahead, 10 + 10 ms.
  EXPECT_FALSE(AnswersInTime({&profile, 4, 1, 0}, 15 * kMillisecond, 4));
  // A second replica takes the query at once.
  EXPECT_TRUE(AnswersInTime({&profile, 1, 2, 0}, 2 * kMillisecond));
}

TEST(AnswersInTimeTest, AnInstanceWithoutAProfileIsTakenToAnswer) {
  EXPECT_TRUE(AnswersInTime({nullptr, 1000, 1, 0}, kMillisecond));
}

TEST(RefusalMessageTest, NamesTheModelTheWaitAndTheAllowance) {
  const std::string m = RefusalMessage("fmnist-mlp", 48 * kMillisecond, 21 * kMillisecond);
  EXPECT_THAT(m, HasSubstr("'fmnist-mlp'"));
  EXPECT_THAT(m, HasSubstr("48 ms"));
  EXPECT_THAT(m, HasSubstr("21 ms"));
}

TEST(EstimateTallyTest, BucketsTheAnswerOverTheEstimateAndCountsTheLate) {
  EstimateTally tally;
  EXPECT_EQ(tally.Quantile(0.5), 0);
  // Answered in half the estimate (cautious), twice, and in 3x (optimistic,
  // and past the deadline).
  tally.Add(10 * kMillisecond, 5 * kMillisecond, true);
  tally.Add(10 * kMillisecond, 5 * kMillisecond, true);
  tally.Add(10 * kMillisecond, 30 * kMillisecond, false);
  EXPECT_EQ(tally.count(), 3);
  EXPECT_EQ(tally.late(), 1);
  EXPECT_DOUBLE_EQ(tally.sum(), 0.5 + 0.5 + 3);
  EXPECT_EQ(tally.counts()[1], 2);  // (0.25, 0.5]
  EXPECT_EQ(tally.counts()[7], 1);  // (2, 4]
  // The median falls in (0.25, 0.5]: 1.5 of its 2 ranks in.
  EXPECT_DOUBLE_EQ(tally.Quantile(0.5), 0.25 + 0.75 * 0.25);
  EXPECT_DOUBLE_EQ(tally.Quantile(1), 4);
  // Beyond the last bound the open bucket reports its lower bound.
  tally.Add(kMillisecond, 100 * kMillisecond, false);
  EXPECT_EQ(tally.counts()[EstimateTally::kBuckets - 1], 1);
  EXPECT_DOUBLE_EQ(tally.Quantile(1), 4);
}

}  // namespace
}  // namespace maitre::policy
