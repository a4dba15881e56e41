#include "policy/prediction/workload_prediction.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace maitre::policy {

absl::Status ValidateWindows(const PredictionWindows& w) {
  if (w.sample <= 0 || w.unit < w.sample || w.unit % w.sample != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the prediction unit (", ToSeconds(w.unit), " s) must be a whole, positive multiple of "
        "the sample window (", ToSeconds(w.sample), " s)"));
  }
  if (w.horizon < 1) {
    return absl::InvalidArgumentError("the prediction window must be at least one unit");
  }
  return absl::OkStatus();
}

std::vector<double> UnitPeakRates(absl::Span<const Nanos> arrivals,
                                  const PredictionWindows& windows, Nanos duration) {
  const int64_t units = std::max<int64_t>(0, duration / windows.unit);
  const int64_t samples_per_unit = windows.unit / windows.sample;
  std::vector<int64_t> counts(static_cast<size_t>(units * samples_per_unit), 0);
  for (Nanos t : arrivals) {
    if (t < 0) continue;
    const int64_t sample = t / windows.sample;
    if (sample < static_cast<int64_t>(counts.size())) ++counts[static_cast<size_t>(sample)];
  }
  std::vector<double> peaks(static_cast<size_t>(units), 0.0);
  for (int64_t u = 0; u < units; ++u) {
    auto first = counts.begin() + u * samples_per_unit;
    peaks[static_cast<size_t>(u)] =
        static_cast<double>(*std::max_element(first, first + samples_per_unit)) /
        ToSeconds(windows.sample);
  }
  return peaks;
}

std::vector<double> LastValuePredictor::Predict(absl::Span<const double> history, int horizon) {
  return std::vector<double>(static_cast<size_t>(horizon), history.empty() ? 0 : history.back());
}

std::vector<double> EwmaPredictor::Predict(absl::Span<const double> history, int horizon) {
  double mean = history.empty() ? 0 : history.front();
  for (double peak : history) mean = alpha_ * peak + (1 - alpha_) * mean;
  return std::vector<double>(static_cast<size_t>(horizon), mean);
}

std::vector<double> HoltWintersPredictor::Predict(absl::Span<const double> history,
                                                  int horizon) {
  std::vector<double> forecast(static_cast<size_t>(horizon), 0.0);
  const size_t n = history.size();
  if (n == 0) return forecast;
  const size_t m = static_cast<size_t>(std::max(1, o_.season_units));
  const bool seasonal = n >= 2 * m;
  double level = history[0], trend = 0;
  std::vector<double> season(seasonal ? m : 0, 0.0);
  size_t start = 1;
  if (seasonal) {
    // The first season sets the level and the shape; the second, the trend.
    double first = 0, second = 0;
    for (size_t i = 0; i < m; ++i) {
      first += history[i];
      second += history[m + i];
    }
    level = first / m;
    trend = (second - first) / (static_cast<double>(m) * m);
    for (size_t i = 0; i < m; ++i) season[i] = history[i] - level;
    start = m;
  }
  for (size_t t = start; t < n; ++t) {
    const double seasonal_part = seasonal ? season[t % m] : 0;
    const double previous = level;
    level = o_.alpha * (history[t] - seasonal_part) + (1 - o_.alpha) * (level + trend);
    trend = o_.beta * (level - previous) + (1 - o_.beta) * trend;
    if (seasonal) {
      season[t % m] = o_.gamma * (history[t] - level) + (1 - o_.gamma) * seasonal_part;
    }
  }
  for (int h = 1; h <= horizon; ++h) {
    const double seasonal_part = seasonal ? season[(n + static_cast<size_t>(h) - 1) % m] : 0;
    forecast[static_cast<size_t>(h - 1)] = std::max(0.0, level + h * trend + seasonal_part);
  }
  return forecast;
}

std::vector<double> OraclePredictor::Predict(absl::Span<const double> history, int horizon) {
  std::vector<double> forecast(static_cast<size_t>(horizon), 0.0);
  for (int h = 0; h < horizon; ++h) {
    const size_t unit = history.size() + static_cast<size_t>(h);
    if (unit < peaks_.size()) forecast[static_cast<size_t>(h)] = peaks_[unit];
  }
  return forecast;
}

absl::StatusOr<std::unique_ptr<WorkloadPredictor>> CreatePredictor(
    absl::string_view name, const std::vector<double>& all_peaks) {
  absl::string_view kind = name.substr(0, name.find(':'));
  absl::string_view argument =
      name.find(':') == absl::string_view::npos ? "" : name.substr(name.find(':') + 1);
  double number = 0;
  const bool has_number = !argument.empty() && absl::SimpleAtod(argument, &number);
  if (!argument.empty() && !has_number) {
    return absl::InvalidArgumentError(
        absl::StrCat("predictor '", name, "': the part after ':' must be a number"));
  }
  if (kind == "last" && argument.empty()) return std::make_unique<LastValuePredictor>();
  if (kind == "ewma") {
    const double alpha = has_number ? number : 0.5;
    if (!(alpha > 0 && alpha <= 1)) {
      return absl::InvalidArgumentError("ewma's alpha must be in (0, 1]");
    }
    return std::make_unique<EwmaPredictor>(alpha);
  }
  if (kind == "holt-winters") {
    HoltWintersPredictor::Options options;
    if (has_number) {
      if (!(number >= 1 && number <= 1e6) || number != std::floor(number)) {
        return absl::InvalidArgumentError(
            "holt-winters' season must be a whole number of units, at least 1");
      }
      options.season_units = static_cast<int>(number);
    }
    return std::make_unique<HoltWintersPredictor>(options);
  }
  if (kind == "oracle" && argument.empty()) {
    if (all_peaks.empty()) {
      return absl::InvalidArgumentError("the oracle predictor needs the whole series");
    }
    return std::make_unique<OraclePredictor>(all_peaks);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown predictor '", name,
      "'; use last, ewma[:ALPHA], holt-winters[:SEASON_UNITS], lstm or oracle"));
}

ForecastError EvaluatePredictor(WorkloadPredictor& predictor, absl::Span<const double> peaks,
                                int horizon, int warmup, std::vector<Forecast>* forecasts) {
  ForecastError error;
  double ape_sum = 0, one_step_ape_sum = 0, under_share_sum = 0;
  int64_t ape_points = 0, one_step_points = 0, under = 0;
  const int n = static_cast<int>(peaks.size());
  for (int t = std::max(0, warmup); t < n; ++t) {
    std::vector<double> forecast = predictor.Predict(peaks.subspan(0, t), horizon);
    for (int h = 0; h < horizon && t + h < n; ++h) {
      const double predicted = forecast[static_cast<size_t>(h)];
      const double actual = peaks[static_cast<size_t>(t + h)];
      if (forecasts != nullptr) forecasts->push_back({t, t + h, predicted, actual});
      ++error.points;
      if (predicted < actual) {
        ++under;
        under_share_sum += (actual - predicted) / actual;
      }
      if (actual > 0) {
        const double ape = std::abs(predicted - actual) / actual;
        ape_sum += ape;
        ++ape_points;
        if (h == 0) {
          one_step_ape_sum += ape;
          ++one_step_points;
        }
      }
    }
  }
  if (ape_points > 0) error.mape = ape_sum / ape_points;
  if (one_step_points > 0) error.one_step_mape = one_step_ape_sum / one_step_points;
  if (error.points > 0) error.under_rate = static_cast<double>(under) / error.points;
  if (under > 0) error.mean_under_share = under_share_sum / under;
  return error;
}

}  // namespace maitre::policy
