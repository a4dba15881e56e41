#include "policy/prediction/lstm_predictor.h"

#include <cmath>

#include "gtest/gtest.h"

namespace maitre::policy {
namespace {

// A periodic load a flat predictor cannot follow: the LSTM, trained on its
// history as it grows, must predict it better than the last value does.
TEST(LstmPredictorTest, LearnsAPeriodicLoadBetterThanTheLastValue) {
  std::vector<double> peaks;
  for (int t = 0; t < 160; ++t) peaks.push_back(200 + 150 * std::sin(2 * M_PI * t / 16));
  LstmPredictorOptions options;
  options.lookback = 16;
  options.hidden = 16;
  options.retrain_every = 40;
  options.epochs = 150;
  auto lstm = CreateLstmPredictor(options);
  ASSERT_TRUE(lstm.ok()) << lstm.status();
  LastValuePredictor last;
  ForecastError learned = EvaluatePredictor(**lstm, peaks, 4, 80, nullptr);
  ForecastError flat = EvaluatePredictor(last, peaks, 4, 80, nullptr);
  EXPECT_LT(learned.mape, 0.5 * flat.mape) << learned.mape << " vs " << flat.mape;
}

TEST(LstmPredictorTest, HoldsTheLastValueUntilItHasHistory) {
  auto lstm = CreateLstmPredictor({});
  ASSERT_TRUE(lstm.ok());
  std::vector<double> short_history = {5, 7};
  std::vector<double> forecast = (*lstm)->Predict(short_history, 3);
  EXPECT_EQ(forecast, std::vector<double>({7, 7, 7}));
}

TEST(LstmPredictorTest, BadOptionsAreRefused) {
  LstmPredictorOptions bad;
  bad.lookback = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(CreateLstmPredictor(bad).status()));
}

}  // namespace
}  // namespace maitre::policy
