#include "pipeline/envelope.h"

#include <gtest/gtest.h>

#include "pipeline/testing/problems.h"

namespace maitre::pipeline {
namespace {

TEST(EnvelopeTest, WindowsDoubleFromTheServiceTimeToAMinute) {
  const std::vector<Nanos> w = EnvelopeWindows(10 * kSecond);
  EXPECT_EQ(w, (std::vector<Nanos>{10 * kSecond, 20 * kSecond, 40 * kSecond, 60 * kSecond}));
  EXPECT_EQ(EnvelopeWindows(0).front(), kShortestWindow);
  EXPECT_EQ(EnvelopeWindows(kMillisecond).front(), 10 * kMillisecond);
  EXPECT_EQ(EnvelopeWindows(50 * kMillisecond).size(), 12u);  // 50 ms .. 51.2 s, then 60 s
}

TEST(EnvelopeTest, ShortWindowsSeeTheBurstAndLongOnesTheMean) {
  // Ten queries in the first 100 ms, then one a second for a minute.
  std::vector<Nanos> arrivals;
  for (int i = 0; i < 10; ++i) arrivals.push_back(i * 10 * kMillisecond);
  for (int i = 1; i <= 60; ++i) arrivals.push_back(i * kSecond);
  const std::vector<double> r =
      TrafficEnvelope(arrivals, std::vector<Nanos>{100 * kMillisecond, kSecond, 60 * kSecond});
  EXPECT_DOUBLE_EQ(r[0], 100);  // 10 in 100 ms
  EXPECT_DOUBLE_EQ(r[1], 10);   // the same 10 in a second ([0, 1 s) leaves the one at 1 s out)
  EXPECT_DOUBLE_EQ(r[2], 69.0 / 60);
}

TEST(EnvelopeTest, ABurstierTraceOfTheSameRateRisesOnlyInShortWindows) {
  const std::vector<Nanos> windows = EnvelopeWindows(20 * kMillisecond);
  const std::vector<double> smooth =
      TrafficEnvelope(testing::GammaArrivals(100, 0.1, 120 * kSecond), windows);
  const std::vector<double> bursty =
      TrafficEnvelope(testing::GammaArrivals(100, 4, 120 * kSecond), windows);
  EXPECT_GT(bursty.front(), 3 * smooth.front());
  EXPECT_NEAR(bursty.back(), smooth.back(), 0.35 * smooth.back());
}

TEST(EnvelopeTest, AnEmptyTraceHasRateZero) {
  EXPECT_EQ(TrafficEnvelope({}, std::vector<Nanos>{kSecond}), (std::vector<double>{0}));
}

}  // namespace
}  // namespace maitre::pipeline
