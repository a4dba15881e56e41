// Traffic envelopes (network calculus, after InferLine §5; docs/pipelines.md,
// "The tuner"): for each window width ΔT, the most queries that arrived in
// any window of that width, as a rate q/ΔT. Comparing a live trace's
// envelope with the planning trace's tells a burstier workload (a short
// window's rate rose) from a faster one (a long window's rate rose).
//
// Thread-safety: pure functions.
#pragma once

#include <vector>

#include "absl/types/span.h"
#include "core/time.h"

namespace maitre::pipeline {

// The longest window §5 samples.
inline constexpr Nanos kLongestWindow = 60 * kSecond;

// The widths §5 samples: the service time, doubling while below `longest`,
// then `longest` itself. A service time below 1 ms is taken as 1 ms, so
// the list stays short.
std::vector<Nanos> EnvelopeWindows(Nanos service_time, Nanos longest = kLongestWindow);

// Per width, the highest rate (queries per second) over any window
// [t, t + width) of `arrivals` (non-decreasing times).
std::vector<double> TrafficEnvelope(absl::Span<const Nanos> arrivals,
                                    absl::Span<const Nanos> windows);

}  // namespace maitre::pipeline
