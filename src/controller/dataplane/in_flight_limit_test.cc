#include "controller/dataplane/in_flight_limit.h"

#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace maitre::controller {
namespace {

TEST(InFlightLimitTest, RefusesBeyondTheLimitUntilAPermitIsReleased) {
  InFlightLimit limit(2);
  InFlightLimit::Permit a = limit.TryAcquire();
  InFlightLimit::Permit b = limit.TryAcquire();
  EXPECT_TRUE(a.held());
  EXPECT_TRUE(b.held());
  EXPECT_FALSE(limit.TryAcquire().held());
  EXPECT_EQ(limit.in_flight(), 2);
  a.Release();
  EXPECT_EQ(limit.in_flight(), 1);
  EXPECT_TRUE(limit.TryAcquire().held());  // released again at once (a temporary)
  EXPECT_EQ(limit.in_flight(), 1);
}

TEST(InFlightLimitTest, APermitReleasesOnceWhenMovedAndDestroyed) {
  InFlightLimit limit(1);
  {
    InFlightLimit::Permit a = limit.TryAcquire();
    InFlightLimit::Permit b = std::move(a);
    EXPECT_FALSE(a.held());
    EXPECT_TRUE(b.held());
    b.Release();
    b.Release();
    EXPECT_EQ(limit.in_flight(), 0);
    InFlightLimit::Permit c = limit.TryAcquire();
    InFlightLimit::Permit d;
    d = std::move(c);
    EXPECT_EQ(limit.in_flight(), 1);
  }
  EXPECT_EQ(limit.in_flight(), 0);
}

TEST(InFlightLimitTest, ZeroMeansNoBound) {
  InFlightLimit limit(0);
  std::vector<InFlightLimit::Permit> permits;
  for (int i = 0; i < 1000; ++i) permits.push_back(limit.TryAcquire());
  EXPECT_TRUE(permits.back().held());
  EXPECT_EQ(limit.in_flight(), 1000);
}

TEST(InFlightLimitTest, NeverExceedsTheLimitUnderContention) {
  InFlightLimit limit(3);
  std::atomic<int> held{0};
  std::atomic<int> most{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) {
        InFlightLimit::Permit p = limit.TryAcquire();
        if (!p.held()) continue;
        const int now = held.fetch_add(1) + 1;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        held.fetch_sub(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_LE(most.load(), 3);
  EXPECT_EQ(limit.in_flight(), 0);
}

TEST(InFlightLimitTest, DefaultComesFromMemoryWithinItsBounds) {
  const int64_t limit = InFlightLimit::DefaultLimit();
  EXPECT_GE(limit, 256);
  EXPECT_LE(limit, 65536);
}

TEST(InFlightLimitTest, RefusalNamesTheLimitAndTheFlag) {
  EXPECT_THAT(InFlightLimit(7).RefusalMessage(), ::testing::HasSubstr("7 queries"));
  EXPECT_THAT(InFlightLimit(7).RefusalMessage(), ::testing::HasSubstr("--max-in-flight"));
}

}  // namespace
}  // namespace maitre::controller
