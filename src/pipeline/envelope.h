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

// The shortest window sampled, whatever the service time (ours, not §5's):
// arrival times on a real server are stamped when a front-end thread reads
// the queries, and a loaded host runs that thread late and stamps several
// together. At 1 ms the real cascade's tuner read "13 queries in 0.001 s
// against the plan's 3" at 250 qps, which a Poisson process does in about
// one 20 s run of 700 (docs/pipelines.md, "The tuner").
inline constexpr Nanos kShortestWindow = 10 * kMillisecond;

// The widths §5 samples: the service time (at least kShortestWindow),
// doubling while below `longest`, then `longest` itself.
std::vector<Nanos> EnvelopeWindows(Nanos service_time, Nanos longest = kLongestWindow);

// Per width, the highest rate (queries per second) over any window
// [t, t + width) of `arrivals` (non-decreasing times).
std::vector<double> TrafficEnvelope(absl::Span<const Nanos> arrivals,
                                    absl::Span<const Nanos> windows);

}  // namespace maitre::pipeline
