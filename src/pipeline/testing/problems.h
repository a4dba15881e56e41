// Planning problems for tests: synthetic profiles and the small pipelines
// the estimator, planner and tuner tests share.
#pragma once

#include <string>
#include <vector>

#include "core/arrivals.h"
#include "core/profile.h"
#include "core/time.h"
#include "pipeline/problem.h"

namespace maitre::pipeline::testing {

// p50 = base + per_row · batch at batches 1, 2, 4, ..., max_batch (p99 the
// same: the estimator runs the p50).
inline Profile LinearProfile(double base_ms, double per_row_ms, int max_batch = 64) {
  std::vector<LatencyPoint> points;
  for (int b = 1; b <= max_batch; b *= 2) {
    const double ms = base_ms + per_row_ms * b;
    points.push_back({b, ms, ms});
  }
  return *Profile::Create(std::move(points), 100, 100);
}

// Two hardware types: a fast, dear accelerator and a slow, cheap CPU.
inline std::vector<Hardware> GpuAndCpu() { return {{"gpu", 0.9}, {"cpu", 0.1}}; }

// fast -> slow with probability `p` (a cascade: the slow model only sees the
// queries the fast one is unsure of); each stage on both hardware types.
inline PlanningProblem Cascade(double p) {
  PlanningProblem problem;
  problem.hardware = GpuAndCpu();
  problem.stages.push_back({"fast", {}, {{0, LinearProfile(2, 0.1)}, {1, LinearProfile(4, 1)}}});
  problem.stages.push_back({"slow", {{0, p}}, {{0, LinearProfile(10, 0.5)},
                                                {1, LinearProfile(30, 8)}}});
  return problem;
}

// Arrival times of a gamma process (CV 1 is Poisson), as the paper's
// synthetic workloads (§6).
inline std::vector<Nanos> GammaArrivals(double rate_qps, double cv, Nanos duration,
                                        uint64_t seed = 7) {
  GeneratorSpec spec;
  spec.kind = GeneratorKind::kGamma;
  spec.rate_qps = rate_qps;
  spec.cv = cv;
  spec.duration = duration;
  spec.seed = seed;
  std::vector<Nanos> out;
  auto source = CreateGenerator(spec);
  Arrival a;
  while ((*source)->Next(&a)) out.push_back(a.time);
  return out;
}

}  // namespace maitre::pipeline::testing
