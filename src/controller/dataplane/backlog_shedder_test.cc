#include "controller/dataplane/backlog_shedder.h"

#include <gtest/gtest.h>

namespace maitre::controller {
namespace {

constexpr Nanos kMs = 1'000'000;

BacklogShedder::Options Defaults() { return {.target = 5 * kMs, .interval = 100 * kMs}; }

// Queries that waited 30 ms, every 10 ms up to `until`: a standing queue
// from the first interval's end (100 ms) on.
void WaitLong(BacklogShedder& shedder, Nanos until) {
  for (Nanos now = 0; now <= until; now += 10 * kMs) shedder.ShouldShed(30 * kMs, now);
}

TEST(BacklogShedderTest, ABurstThatDrainsWithinAnIntervalShedsNothing) {
  BacklogShedder shedder(Defaults());
  // Waits of up to 40 ms, but each interval also holds a query that waited
  // 1 ms: the backlog emptied, so no queue stood.
  for (Nanos now = 0; now < 1000 * kMs; now += 10 * kMs) {
    const Nanos waited = (now / (10 * kMs)) % 10 == 0 ? 1 * kMs : 40 * kMs;
    EXPECT_FALSE(shedder.ShouldShed(waited, now)) << "at " << now / kMs << " ms";
  }
  EXPECT_FALSE(shedder.standing(990 * kMs));
}

TEST(BacklogShedderTest, AStandingQueueShedsTheQueriesThatWaitedPastTheTarget) {
  BacklogShedder shedder(Defaults());
  // The first interval: every query waited 30 ms. It is judged only once it
  // ends, so nothing is shed during it.
  for (Nanos now = 0; now < 100 * kMs; now += 10 * kMs) {
    EXPECT_FALSE(shedder.ShouldShed(30 * kMs, now));
  }
  // From the next interval on, a query over the target is refused and one
  // within it is not.
  EXPECT_TRUE(shedder.ShouldShed(30 * kMs, 100 * kMs));
  EXPECT_TRUE(shedder.standing(100 * kMs));
  EXPECT_FALSE(shedder.ShouldShed(4 * kMs, 110 * kMs));
  EXPECT_FALSE(shedder.ShouldShed(5 * kMs, 120 * kMs));  // at the target: kept
  EXPECT_TRUE(shedder.ShouldShed(6 * kMs, 130 * kMs));
}

TEST(BacklogShedderTest, SheddingGoesOnWhileQueriesStillArrivePastTheTarget) {
  BacklogShedder shedder(Defaults());
  WaitLong(shedder, 200 * kMs);
  ASSERT_TRUE(shedder.standing(200 * kMs));
  // Within the interval that began at 200 ms, shedding kept some waits
  // short, but others still came past the target: the overload goes on.
  EXPECT_TRUE(shedder.ShouldShed(30 * kMs, 250 * kMs));
  EXPECT_FALSE(shedder.ShouldShed(2 * kMs, 260 * kMs));
  EXPECT_TRUE(shedder.ShouldShed(30 * kMs, 290 * kMs));
  // So the next interval sheds too.
  EXPECT_TRUE(shedder.ShouldShed(30 * kMs, 300 * kMs));
  EXPECT_TRUE(shedder.standing(300 * kMs));
}

TEST(BacklogShedderTest, SheddingStopsAfterAnIntervalWithNoQueryPastTheTarget) {
  BacklogShedder shedder(Defaults());
  WaitLong(shedder, 200 * kMs);
  ASSERT_TRUE(shedder.standing(200 * kMs));
  // The interval that began at 200 ms ends at 300; the one from 300 ms
  // has every query within the target (at it counts as within).
  for (Nanos now = 300 * kMs; now < 400 * kMs; now += 10 * kMs) {
    EXPECT_FALSE(shedder.ShouldShed(now == 350 * kMs ? 5 * kMs : 1 * kMs, now));
  }
  // The next is judged on it: a late query is kept, and a whole interval
  // past the target is needed to shed again.
  EXPECT_FALSE(shedder.ShouldShed(30 * kMs, 400 * kMs));
  EXPECT_FALSE(shedder.standing(400 * kMs));
}

TEST(BacklogShedderTest, AnIdleIntervalIsNoStandingQueue) {
  BacklogShedder shedder(Defaults());
  WaitLong(shedder, 100 * kMs);
  ASSERT_TRUE(shedder.standing(100 * kMs));
  // Asked without queries (a metrics scrape): the interval from 100 ms is
  // still open until 200 ms, and after a whole one more with no query,
  // nothing stands.
  EXPECT_TRUE(shedder.standing(250 * kMs));
  EXPECT_FALSE(shedder.standing(300 * kMs));
  // No query for longer than an interval: whatever stood has drained.
  EXPECT_FALSE(shedder.ShouldShed(30 * kMs, 5000 * kMs));
  EXPECT_FALSE(shedder.standing(5000 * kMs));
}

TEST(BacklogShedderTest, ATargetOfZeroNeverSheds) {
  BacklogShedder shedder({.target = 0, .interval = 100 * kMs});
  for (Nanos now = 0; now < 1000 * kMs; now += 10 * kMs) {
    EXPECT_FALSE(shedder.ShouldShed(500 * kMs, now));
  }
}

}  // namespace
}  // namespace maitre::controller
