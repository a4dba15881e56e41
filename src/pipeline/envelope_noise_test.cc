#include "pipeline/envelope_noise.h"

#include <cmath>

#include <gtest/gtest.h>

#include "pipeline/envelope.h"
#include "pipeline/testing/problems.h"

namespace maitre::pipeline {
namespace {

using testing::GammaArrivals;

// The spread the draws report is the spread of fresh traces of the process:
// the busiest count of 100 fresh minutes deviates as much as the draws say,
// within the estimates' own error.
TEST(EnvelopeNoiseTest, MatchesTheSpreadOfFreshTraces) {
  const std::vector<Nanos> windows = {40 * kMillisecond, kSecond, 50 * kSecond};
  const std::vector<Nanos> sample = GammaArrivals(150, 1, 60 * kSecond, 3);
  const std::vector<double> drawn = *EnvelopeCountDeviations(sample, windows);
  std::vector<double> sum(windows.size(), 0), squares(windows.size(), 0);
  const int fresh = 100;
  for (int i = 0; i < fresh; ++i) {
    const std::vector<double> rates =
        TrafficEnvelope(GammaArrivals(150, 1, 60 * kSecond, 1000 + i), windows);
    for (size_t w = 0; w < windows.size(); ++w) {
      const double count = rates[w] * ToSeconds(windows[w]);
      sum[w] += count;
      squares[w] += count * count;
    }
  }
  for (size_t w = 0; w < windows.size(); ++w) {
    const double mean = sum[w] / fresh;
    const double deviation = std::sqrt((squares[w] - fresh * mean * mean) / (fresh - 1));
    EXPECT_NEAR(drawn[w], deviation, 0.3 * deviation) << "window " << ToSeconds(windows[w]);
  }
}

// The point of it: the busiest short window spreads far less than a Poisson
// count of its size, and a long window, nearly one count, about as much.
TEST(EnvelopeNoiseTest, TheBusiestShortWindowSpreadsLessThanAPoissonCount) {
  const std::vector<Nanos> windows = {40 * kMillisecond, 50 * kSecond};
  const std::vector<Nanos> sample = GammaArrivals(150, 1, 60 * kSecond, 4);
  const std::vector<double> rates = TrafficEnvelope(sample, windows);
  const std::vector<double> drawn = *EnvelopeCountDeviations(sample, windows);
  const double short_count = rates[0] * 0.04;
  const double long_count = rates[1] * 50;
  EXPECT_LT(drawn[0], 0.5 * std::sqrt(short_count));
  EXPECT_GT(drawn[1], 0.5 * std::sqrt(long_count));
}

// A burstier process spreads more in every window: the draws keep the
// trace's own gaps.
TEST(EnvelopeNoiseTest, ABurstierTraceSpreadsMore) {
  const std::vector<Nanos> windows = {40 * kMillisecond, kSecond, 20 * kSecond};
  const std::vector<double> poisson =
      *EnvelopeCountDeviations(GammaArrivals(150, 1, 60 * kSecond, 5), windows);
  const std::vector<double> bursty =
      *EnvelopeCountDeviations(GammaArrivals(150, 4, 60 * kSecond, 5), windows);
  for (size_t w = 0; w < windows.size(); ++w) EXPECT_GT(bursty[w], 1.3 * poisson[w]) << w;
}

TEST(EnvelopeNoiseTest, TheSameSeedGivesTheSameAnswer) {
  const std::vector<Nanos> windows = {40 * kMillisecond, kSecond};
  const std::vector<Nanos> sample = GammaArrivals(100, 1, 30 * kSecond, 6);
  EnvelopeNoiseOptions other;
  other.seed = 2;
  EXPECT_EQ(*EnvelopeCountDeviations(sample, windows), *EnvelopeCountDeviations(sample, windows));
  EXPECT_NE(*EnvelopeCountDeviations(sample, windows),
            *EnvelopeCountDeviations(sample, windows, other));
}

TEST(EnvelopeNoiseTest, RefusesWhatItCannotDraw) {
  const std::vector<Nanos> windows = {kSecond};
  EXPECT_FALSE(EnvelopeCountDeviations(std::vector<Nanos>{0}, windows).ok());
  EXPECT_FALSE(EnvelopeCountDeviations(std::vector<Nanos>{kSecond, 0}, windows).ok());
  EXPECT_FALSE(EnvelopeCountDeviations(std::vector<Nanos>{0, kSecond}, {}).ok());
  EXPECT_FALSE(
      EnvelopeCountDeviations(std::vector<Nanos>{0, kSecond}, std::vector<Nanos>{0}).ok());
  EnvelopeNoiseOptions one;
  one.draws = 1;
  EXPECT_FALSE(EnvelopeCountDeviations(std::vector<Nanos>{0, kSecond}, windows, one).ok());
}

}  // namespace
}  // namespace maitre::pipeline
