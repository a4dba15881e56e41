// How much a planning trace's traffic envelope owes to chance
// (docs/pipelines.md, "The tuner"): per window, the standard deviation of
// the busiest window's count between traces drawn from the process the
// planning trace came from, estimated by drawing such traces from the
// planning trace itself. The tuner compares a live envelope with the
// planned one and must not read this spread as a change of the workload.
//
// A busiest-window count is the maximum of many overlapping counts, and
// spreads far less than a single window's count: in a minute of Poisson
// arrivals at 150 qps, the busiest 39 ms window holds 17.5 queries on
// average with a deviation of 1.2, where a Poisson count of 17.5 deviates
// by 4.2 (docs/experiments.md, "inferline-pipelines").
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/time.h"

namespace maitre::pipeline {

struct EnvelopeNoiseOptions {
  // Traces drawn. The deviation of a deviation estimated from n draws is
  // about 1/sqrt(2n) of it: 5% at 200.
  int32_t draws = 200;
  uint64_t seed = 1;
};

// Per width in `windows`, the standard deviation, over `options.draws`
// drawn traces, of the most queries in any window of that width. Each drawn
// trace starts at the first of `arrivals` and lays inter-arrival gaps drawn
// with replacement from those of `arrivals` end to end until it covers as
// long a span as `arrivals` does: a draw of the same renewal process
// (exact for the gamma processes of the paper's synthetic workloads, §6;
// a trace whose gaps depend on one another, as in a diurnal rise, spreads
// more than this says). InvalidArgument for fewer than two arrivals, an
// arrival earlier than the one before it, no windows, a window not
// positive, or draws below two.
absl::StatusOr<std::vector<double>> EnvelopeCountDeviations(
    absl::Span<const Nanos> arrivals, absl::Span<const Nanos> windows,
    const EnvelopeNoiseOptions& options = {});

}  // namespace maitre::pipeline
