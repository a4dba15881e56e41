#include "policy/prediction/workload_prediction.h"

#include <cmath>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace maitre::policy {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(UnitPeakRatesTest, EachUnitsBusiestSampleWindow) {
  PredictionWindows w{10 * kSecond, 5, 5 * kSecond};
  // Unit 0: 3 arrivals in [0, 5 s), 1 in [5, 10 s). Unit 1: 4 in [15, 20 s).
  // Unit 2 is cut off by the duration and not reported.
  std::vector<Nanos> arrivals = {1 * kSecond, 2 * kSecond, 4 * kSecond, 6 * kSecond,
                                 16 * kSecond, 17 * kSecond, 18 * kSecond, 19 * kSecond,
                                 21 * kSecond, -1, 99 * kSecond};
  EXPECT_THAT(UnitPeakRates(arrivals, w, 25 * kSecond), ElementsAre(0.6, 0.8));
}

TEST(ValidateWindowsTest, UnitsAreWholeSamples) {
  EXPECT_TRUE(ValidateWindows({60 * kSecond, 60, 5 * kSecond}).ok());
  EXPECT_FALSE(ValidateWindows({60 * kSecond, 60, 7 * kSecond}).ok());
  EXPECT_FALSE(ValidateWindows({60 * kSecond, 0, 5 * kSecond}).ok());
  EXPECT_FALSE(ValidateWindows({60 * kSecond, 60, 0}).ok());
}

TEST(PredictorsTest, LastValueAndEwmaHoldFlat) {
  std::vector<double> history = {10, 20, 40};
  EXPECT_THAT(LastValuePredictor().Predict(history, 3), ElementsAre(40, 40, 40));
  EXPECT_THAT(LastValuePredictor().Predict({}, 2), ElementsAre(0, 0));
  // 10, then 0.5·20 + 0.5·10 = 15, then 0.5·40 + 0.5·15 = 27.5.
  EXPECT_THAT(EwmaPredictor(0.5).Predict(history, 2), ElementsAre(27.5, 27.5));
}

TEST(PredictorsTest, HoltWintersFollowsATrendAndASeason) {
  std::vector<double> ramp;
  for (int t = 0; t < 100; ++t) ramp.push_back(10 + 2 * t);
  HoltWintersPredictor trend_only({0.5, 0.3, 0.3, 1000});
  std::vector<double> next = trend_only.Predict(ramp, 5);
  for (int h = 0; h < 5; ++h) EXPECT_NEAR(next[h], 10 + 2 * (100 + h), 2.0) << h;

  const int season = 24;
  auto daily = [&](int t) { return 100 + 50 * std::sin(2 * M_PI * t / season); };
  std::vector<double> days;
  for (int t = 0; t < 5 * season; ++t) days.push_back(daily(t));
  std::vector<double> tomorrow = HoltWintersPredictor({0.3, 0.02, 0.3, season}).Predict(days, 24);
  for (int h = 0; h < season; ++h) {
    EXPECT_NEAR(tomorrow[h], daily(5 * season + h), 5.0) << h;
  }
}

TEST(PredictorsTest, TheOracleKnowsAndIsScoredPerfect) {
  std::vector<double> peaks = {1, 2, 3, 4, 5};
  auto oracle = CreatePredictor("oracle", peaks);
  ASSERT_TRUE(oracle.ok());
  EXPECT_THAT((*oracle)->Predict(std::vector<double>{1, 2}, 4), ElementsAre(3, 4, 5, 0));
  ForecastError error = EvaluatePredictor(**oracle, peaks, 3, 1, nullptr);
  EXPECT_EQ(error.points, 3 + 3 + 2 + 1);
  EXPECT_EQ(error.mape, 0);
  EXPECT_EQ(error.under_rate, 0);
}

TEST(EvaluatePredictorTest, LastValueUnderPredictsARisingSeries) {
  std::vector<double> rising = {10, 20, 30, 40};
  LastValuePredictor last;
  std::vector<Forecast> forecasts;
  ForecastError error = EvaluatePredictor(last, rising, 2, 1, &forecasts);
  // From t=1: predicts 10 for units 1, 2; from 2: 20 for 2, 3; from 3: 30 for 3.
  ASSERT_EQ(forecasts.size(), 5u);
  EXPECT_EQ(forecasts[0].issued, 1);
  EXPECT_EQ(forecasts[1].target, 2);
  EXPECT_EQ(forecasts[1].predicted, 10);
  EXPECT_EQ(forecasts[1].actual, 30);
  EXPECT_EQ(error.under_rate, 1.0);
  // |10-20|/20, |10-30|/30, |20-30|/30, |20-40|/40, |30-40|/40.
  EXPECT_NEAR(error.mape, (0.5 + 2.0 / 3 + 1.0 / 3 + 0.5 + 0.25) / 5, 1e-12);
  EXPECT_NEAR(error.one_step_mape, (0.5 + 1.0 / 3 + 0.25) / 3, 1e-12);
}

TEST(CreatePredictorTest, NamesAndArgumentsAreChecked) {
  EXPECT_TRUE(CreatePredictor("last").ok());
  EXPECT_TRUE(CreatePredictor("ewma:0.2").ok());
  EXPECT_TRUE(CreatePredictor("holt-winters:1440").ok());
  for (const char* bad : {"ewma:0", "ewma:1.5", "ewma:x", "holt-winters:0", "holt-winters:2.5",
                          "oracle", "last:3"}) {
    EXPECT_TRUE(absl::IsInvalidArgument(CreatePredictor(bad).status())) << bad;
  }
  auto unknown = CreatePredictor("arima");
  EXPECT_THAT(unknown.status().message(), HasSubstr("unknown predictor 'arima'"));
  EXPECT_THAT(unknown.status().message(), HasSubstr("holt-winters"));
}

}  // namespace
}  // namespace maitre::policy
