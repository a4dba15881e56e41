// The profiler's measurement core: latency percentiles of one executor at
// growing batch sizes, on this process's threads. The caller owns the context
// (worker type, pinning, thread count) and turns the points into a Profile
// together with load time and memory.
//
// Thread-safety: uses the executor exclusively while it runs.
#pragma once

#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "core/clock.h"
#include "core/profile.h"
#include "core/tensor.h"
#include "core/time.h"
#include "runtime/executor.h"

namespace maitre::runtime {

struct MeasureOptions {
  // Measured in this order; must be positive and strictly increasing.
  std::vector<int> batch_sizes = {1, 2, 4, 8, 16, 32, 64};
  // Stop after the first batch size whose p50 exceeds this (that point is
  // still returned, so a profile knows where the ceiling was crossed).
  double latency_ceiling_ms = 250;
  int warmup = 3;           // untimed runs per batch size and round
  int min_repetitions = 10;  // timed runs per batch size and round, at least
  // ... and keep repeating until this much time has been spent timing,
  // up to max_repetitions (both per batch size and round).
  Nanos min_time_per_batch = 200 * kMillisecond;
  int max_repetitions = 500;
  // The sweep over batch sizes runs this many times, one after the other,
  // so that each batch size is timed at `rounds` moments apart. Each point
  // keeps the round with the lowest p50 (and that round's p99): whatever
  // else runs on the host only ever adds time, so the least disturbed round
  // is the best estimate of what the variant costs on this hardware. A host
  // that stays busy is the instance state machine's business (Interfered),
  // not the profile's. Later rounds time the batch sizes the first reached.
  int rounds = 1;
  // A pause before each round after the first, so that the rounds sample
  // moments further apart than one slow stretch of the host.
  Nanos round_pause = 0;
  // Rounds follow each other within a second or two, so they cannot see
  // through a host that runs slow for longer. When `host_slowdown` is set
  // (how much slower than usual the host runs now; 1 = usual; see
  // host_speed.h), it is asked before and after the rounds, and while it
  // exceeded `disturbed_slowdown`, the rounds run again after
  // `disturbed_pause`, up to `attempts` times in all; every point still
  // keeps its fastest round.
  std::function<double()> host_slowdown;
  int attempts = 1;
  double disturbed_slowdown = 1.15;
  Nanos disturbed_pause = 2 * kSecond;
  const Clock* clock = nullptr;  // required
};

// `row` is one example input set with leading batch 1, in spec order; it is
// tiled to each batch size. Returns one point per batch size measured, with
// p50 and p99 (linear interpolation between order statistics) in ms.
absl::StatusOr<std::vector<LatencyPoint>> MeasureLatencies(Executor& executor,
                                                           const std::vector<Tensor>& row,
                                                           const MeasureOptions& options);

// The q-quantile (0..1) of `samples` by linear interpolation between order
// statistics, as numpy's default; 0 for an empty vector. Sorts a copy.
double Quantile(std::vector<double> samples, double q);

}  // namespace maitre::runtime
