#include "pipeline/envelope_noise.h"

#include <algorithm>
#include <cmath>

#include "core/rng.h"
#include "pipeline/envelope.h"

namespace maitre::pipeline {

absl::StatusOr<std::vector<double>> EnvelopeCountDeviations(
    absl::Span<const Nanos> arrivals, absl::Span<const Nanos> windows,
    const EnvelopeNoiseOptions& options) {
  if (arrivals.size() < 2 || !std::is_sorted(arrivals.begin(), arrivals.end())) {
    return absl::InvalidArgumentError(
        "the envelope's noise needs two or more arrivals in time order");
  }
  if (windows.empty() || *std::min_element(windows.begin(), windows.end()) <= 0) {
    return absl::InvalidArgumentError("the envelope's noise needs positive windows");
  }
  if (options.draws < 2) {
    return absl::InvalidArgumentError("the envelope's noise needs two or more draws");
  }
  std::vector<Nanos> gaps;
  gaps.reserve(arrivals.size() - 1);
  for (size_t i = 1; i < arrivals.size(); ++i) gaps.push_back(arrivals[i] - arrivals[i - 1]);
  const Nanos start = arrivals.front();
  const Nanos end = arrivals.back();
  // Per window, the running sum and sum of squares of the busiest count.
  std::vector<double> sum(windows.size(), 0), squares(windows.size(), 0);
  Rng rng(options.seed);
  std::vector<Nanos> drawn;
  for (int32_t d = 0; d < options.draws; ++d) {
    drawn.assign(1, start);
    while (true) {
      const size_t pick = std::min<size_t>(gaps.size() - 1, rng.Uniform() * gaps.size());
      const Nanos next = drawn.back() + gaps[pick];
      if (next > end) break;
      drawn.push_back(next);
    }
    const std::vector<double> rates = TrafficEnvelope(drawn, windows);
    for (size_t w = 0; w < windows.size(); ++w) {
      const double count = std::round(rates[w] * ToSeconds(windows[w]));
      sum[w] += count;
      squares[w] += count * count;
    }
  }
  std::vector<double> deviations(windows.size());
  const double n = options.draws;
  for (size_t w = 0; w < windows.size(); ++w) {
    const double mean = sum[w] / n;
    deviations[w] = std::sqrt(std::max(0.0, (squares[w] - n * mean * mean) / (n - 1)));
  }
  return deviations;
}

}  // namespace maitre::pipeline
