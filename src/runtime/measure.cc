#include "runtime/measure.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "core/batch.h"

namespace maitre::runtime {
namespace {

absl::Status CheckOptions(const MeasureOptions& o) {
  if (o.clock == nullptr) return absl::InvalidArgumentError("MeasureOptions.clock is required");
  if (o.batch_sizes.empty()) return absl::InvalidArgumentError("no batch sizes to measure");
  for (size_t i = 0; i < o.batch_sizes.size(); ++i) {
    if (o.batch_sizes[i] < 1 || (i > 0 && o.batch_sizes[i] <= o.batch_sizes[i - 1])) {
      return absl::InvalidArgumentError(
          "batch sizes must be positive and strictly increasing");
    }
  }
  if (o.warmup < 0 || o.min_repetitions < 1 || o.max_repetitions < o.min_repetitions) {
    return absl::InvalidArgumentError(
        "need warmup >= 0 and 1 <= min_repetitions <= max_repetitions");
  }
  if (o.rounds < 1) return absl::InvalidArgumentError("need at least one round");
  if (o.round_pause < 0) return absl::InvalidArgumentError("round_pause must not be negative");
  if (o.attempts < 1) return absl::InvalidArgumentError("need at least one attempt");
  return absl::OkStatus();
}

absl::Status RunOnce(Executor& executor, const std::vector<Tensor>& inputs, int batch) {
  absl::StatusOr<std::vector<Tensor>> out = executor.Run(inputs);
  if (!out.ok()) {
    return absl::Status(out.status().code(),
                        absl::StrCat("at batch ", batch, ": ", out.status().message()));
  }
  return absl::OkStatus();
}

}  // namespace

double Quantile(std::vector<double> samples, double q) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  double pos = std::clamp(q, 0.0, 1.0) * static_cast<double>(samples.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(pos));
  size_t hi = std::min(lo + 1, samples.size() - 1);
  double frac = pos - static_cast<double>(lo);
  return samples[lo] + (samples[hi] - samples[lo]) * frac;
}

absl::StatusOr<std::vector<LatencyPoint>> MeasureLatencies(Executor& executor,
                                                           const std::vector<Tensor>& row,
                                                           const MeasureOptions& options) {
  MAITRE_RETURN_IF_ERROR(CheckOptions(options));
  if (row.empty()) return absl::InvalidArgumentError("the example row has no tensors");
  for (const Tensor& t : row) {
    if (t.shape.empty() || t.shape[0] != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the example row must have batch 1; tensor '", t.name, "' has shape ",
          ShapeToString(t.shape)));
    }
  }
  const Clock& clock = *options.clock;
  // One round: each of `sizes` (or, in the first round, of the options'
  // batch sizes until one crosses the ceiling) timed once.
  auto sweep = [&](const std::vector<int>& sizes,
                   bool stop_at_ceiling) -> absl::StatusOr<std::vector<LatencyPoint>> {
    std::vector<LatencyPoint> points;
    std::vector<double> samples_ms;
    for (int batch : sizes) {
      MAITRE_ASSIGN_OR_RETURN(std::vector<Tensor> inputs, TileRows(row, batch));
      for (int i = 0; i < options.warmup; ++i) {
        MAITRE_RETURN_IF_ERROR(RunOnce(executor, inputs, batch));
      }
      samples_ms.clear();
      Nanos spent = 0;
      while (static_cast<int>(samples_ms.size()) < options.min_repetitions ||
             (spent < options.min_time_per_batch &&
              static_cast<int>(samples_ms.size()) < options.max_repetitions)) {
        Nanos start = clock.Now();
        MAITRE_RETURN_IF_ERROR(RunOnce(executor, inputs, batch));
        Nanos elapsed = clock.Now() - start;
        spent += elapsed;
        samples_ms.push_back(ToMillis(elapsed));
      }
      LatencyPoint point;
      point.batch = batch;
      point.p50_ms = Quantile(samples_ms, 0.50);
      point.p99_ms = Quantile(samples_ms, 0.99);
      points.push_back(point);
      if (stop_at_ceiling && point.p50_ms > options.latency_ceiling_ms) break;
    }
    return points;
  };
  auto host_slowdown = [&] { return options.host_slowdown ? options.host_slowdown() : 1.0; };
  double slowdown = host_slowdown();
  MAITRE_ASSIGN_OR_RETURN(std::vector<LatencyPoint> best, sweep(options.batch_sizes, true));
  std::vector<int> reached;
  for (const LatencyPoint& p : best) reached.push_back(p.batch);
  for (int attempt = 1;; ++attempt) {
    for (int round = attempt == 1 ? 1 : 0; round < options.rounds; ++round) {
      if (options.round_pause > 0) clock.SleepUntil(clock.Now() + options.round_pause);
      MAITRE_ASSIGN_OR_RETURN(std::vector<LatencyPoint> again, sweep(reached, false));
      for (size_t i = 0; i < best.size(); ++i) {
        if (again[i].p50_ms < best[i].p50_ms) best[i] = again[i];
      }
    }
    slowdown = std::max(slowdown, host_slowdown());
    if (slowdown <= options.disturbed_slowdown || attempt >= options.attempts) break;
    clock.SleepUntil(clock.Now() + options.disturbed_pause);
    slowdown = host_slowdown();
  }
  return best;
}

}  // namespace maitre::runtime
