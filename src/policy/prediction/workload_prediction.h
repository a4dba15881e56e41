// Workload prediction for provisioning ahead of demand (MArk, §4.2;
// docs/policies.md, "Workload prediction"). Time is cut into prediction
// units of P_u; within each, the arrival rate is sampled over consecutive
// windows of P_s, and the unit's peak is the largest sample. A predictor
// reads the peaks of the units so far and returns the peak of each of the
// next P_w units. MArk uses [P_u, P_w, P_s] = [1 min, 60, 5 s]: a minute is
// EC2's shortest billing unit, an hour ahead shows the long-run trade-offs,
// and a rate holds steady over a few seconds.
//
// Predictors are pluggable (MArk exposes the same seam): last value, EWMA,
// seasonal Holt-Winters, an oracle for experiments, and an LSTM trained
// with libtorch on the history as it grows (lstm_predictor.h, a library
// of its own so that only its users link torch).
//
// Thread-safety: predictors are not synchronised; one owner each.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/time.h"

namespace maitre::policy {

struct PredictionWindows {
  Nanos unit = 60 * kSecond;   // P_u
  int horizon = 60;            // P_w, units predicted at once
  Nanos sample = 5 * kSecond;  // P_s
};

// InvalidArgument unless sample > 0, unit a whole multiple of sample, and
// horizon ≥ 1.
absl::Status ValidateWindows(const PredictionWindows& windows);

// The peak rate (queries per second) of each whole unit in [0, duration):
// the most arrivals in one sample window, divided by its length. Arrival
// times need not be sorted; those outside [0, duration) are ignored.
std::vector<double> UnitPeakRates(absl::Span<const Nanos> arrivals,
                                  const PredictionWindows& windows, Nanos duration);

class WorkloadPredictor {
 public:
  virtual ~WorkloadPredictor() = default;
  // The peaks of the next `horizon` units, given every unit's peak so far
  // (oldest first; possibly empty, then a predictor says 0). Each call
  // sees the previous call's history with units appended.
  virtual std::vector<double> Predict(absl::Span<const double> history, int horizon) = 0;
};

// The unit just seen, held flat.
class LastValuePredictor final : public WorkloadPredictor {
 public:
  std::vector<double> Predict(absl::Span<const double> history, int horizon) override;
};

// Exponentially weighted mean of the peaks, held flat; `alpha` in (0, 1]
// weighs the newest unit.
class EwmaPredictor final : public WorkloadPredictor {
 public:
  explicit EwmaPredictor(double alpha) : alpha_(alpha) {}
  std::vector<double> Predict(absl::Span<const double> history, int horizon) override;

 private:
  const double alpha_;
};

// Additive Holt-Winters: level, trend and a season of `season_units`
// (a day of one-minute units: 1440). Until two seasons are seen it runs
// without the season (Holt's linear trend). Forecasts are clipped at 0.
class HoltWintersPredictor final : public WorkloadPredictor {
 public:
  struct Options {
    double alpha = 0.3;  // level
    double beta = 0.02;  // trend
    double gamma = 0.3;  // season
    int season_units = 1440;
  };
  explicit HoltWintersPredictor(Options options) : o_(options) {}
  std::vector<double> Predict(absl::Span<const double> history, int horizon) override;

 private:
  const Options o_;
};

// Knows the future: returns the true peaks of the next units (0 past the
// end). For experiments, as the bound on what prediction can give.
class OraclePredictor final : public WorkloadPredictor {
 public:
  explicit OraclePredictor(std::vector<double> all_peaks) : peaks_(std::move(all_peaks)) {}
  std::vector<double> Predict(absl::Span<const double> history, int horizon) override;

 private:
  const std::vector<double> peaks_;
};

// "last", "ewma[:ALPHA]", "holt-winters[:SEASON_UNITS]", or "oracle" (which
// needs `all_peaks`). The LSTM is made by CreateLstmPredictor
// (lstm_predictor.h). InvalidArgument names the known predictors.
absl::StatusOr<std::unique_ptr<WorkloadPredictor>> CreatePredictor(
    absl::string_view name, const std::vector<double>& all_peaks = {});

// How a predictor did on a series, walking forward: at every unit t from
// `warmup` on it is given peaks [0, t) and its forecast for units t, t+1,
// ... (up to the horizon and the series' end) is compared with the truth.
struct ForecastError {
  int64_t points = 0;             // (unit, forecast) pairs compared
  double mape = 0;                // mean |predicted − actual| / actual, over actual > 0
  double under_rate = 0;          // share of pairs predicted below actual
  double mean_under_share = 0;    // mean (actual − predicted) / actual over those below
  double one_step_mape = 0;       // the same MAPE, for the next unit only
};

struct Forecast {
  int issued = 0;  // the unit at whose start it was made
  int target = 0;  // the unit it predicts
  double predicted = 0;
  double actual = 0;
};

// Runs `predictor` over `peaks` as above; fills `forecasts` when non-null.
ForecastError EvaluatePredictor(WorkloadPredictor& predictor, absl::Span<const double> peaks,
                                int horizon, int warmup, std::vector<Forecast>* forecasts);

}  // namespace maitre::policy
