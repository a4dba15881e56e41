#include "pipeline/envelope.h"

#include <algorithm>

namespace maitre::pipeline {

std::vector<Nanos> EnvelopeWindows(Nanos service_time, Nanos longest) {
  std::vector<Nanos> windows;
  for (Nanos w = std::max(service_time, kShortestWindow); w < longest; w *= 2) windows.push_back(w);
  windows.push_back(longest);
  return windows;
}

std::vector<double> TrafficEnvelope(absl::Span<const Nanos> arrivals,
                                    absl::Span<const Nanos> windows) {
  std::vector<double> rates;
  rates.reserve(windows.size());
  for (Nanos width : windows) {
    // The busiest window starts at an arrival: slide its start over them
    // and count what falls before start + width.
    size_t most = 0;
    size_t end = 0;
    for (size_t start = 0; start < arrivals.size(); ++start) {
      end = std::max(end, start);
      while (end < arrivals.size() && arrivals[end] < arrivals[start] + width) ++end;
      most = std::max(most, end - start);
    }
    rates.push_back(static_cast<double>(most) / (static_cast<double>(width) / kSecond));
  }
  return rates;
}

}  // namespace maitre::pipeline
