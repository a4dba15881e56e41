// The example zoo's fmnist-cnn variants as the server profiled them on a
// cpu-1 worker of the 2-core development host (registry of the
// accuracy-scaling-real experiment, 2026-11-26): p50 and p99 in ms at
// batches 1..64, load time and memory. At a 20 ms objective
// (Profile::SaturationQps(20), the best batch up to 64 whose p50 fits 10 ms)
// one replica sustains
//   opencv      12,485 qps, loads in  1.7 ms  (quickest to start)
//   torch-int8  13,394 qps, loads in  8.3 ms
//   torch       13,668 qps, loads in 16.5 ms
//   torch-opt   38,269 qps, loads in 11.1 ms  (3.07x opencv)
// An earlier measurement ("torch-opt's profile shows 3.6x the capacity")
// came from another profiling of the same variants; the ordering is the same.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "core/profile.h"

namespace maitre::policy::testing {

struct ZooVariant {
  std::string variant;
  double accuracy;
  Profile profile;
};

inline Profile ZooProfile(std::vector<LatencyPoint> points, double load_ms, double memory_mb) {
  return *Profile::Create(std::move(points), load_ms, memory_mb);
}

// fmnist-cnn's four variants, all at accuracy ~0.9066.
inline std::vector<ZooVariant> FmnistCnnVariants() {
  return {
      {"opencv", 0.9066,
       ZooProfile({{1, 0.088871, 0.143892},
                   {2, 0.16554, 0.215789},
                   {4, 0.327302, 0.397612},
                   {8, 0.640747, 0.792979},
                   {16, 1.299042, 1.770976},
                   {32, 2.584899, 3.140595},
                   {64, 5.147805, 5.431057}},
                  1.699355, 4.324)},
      {"torch-int8", 0.9065,
       ZooProfile({{1, 0.214506, 0.269679},
                   {2, 0.282069, 0.351222},
                   {4, 0.44183, 0.599313},
                   {8, 0.776332, 0.877197},
                   {16, 1.362731, 1.475592},
                   {32, 2.541981, 3.442876},
                   {64, 4.778398, 5.011499}},
                  8.298292, 0.4418)},
      {"torch", 0.9066,
       ZooProfile({{1, 0.187371, 0.265828},
                   {2, 0.294588, 0.51261},
                   {4, 0.448912, 0.635193},
                   {8, 0.707775, 0.789317},
                   {16, 1.316381, 1.516692},
                   {32, 2.512055, 2.68966},
                   {64, 4.682579, 5.124074}},
                  16.51691, 0.4683)},
      {"torch-opt", 0.9066,
       ZooProfile({{1, 0.109736, 0.225008},
                   {2, 0.124431, 0.197437},
                   {4, 0.163325, 0.209205},
                   {8, 0.244712, 0.485643},
                   {16, 0.422194, 0.506318},
                   {32, 0.836183, 0.915894},
                   {64, 1.689425, 1.917355}},
                  11.11104, 0.6055)},
  };
}

}  // namespace maitre::policy::testing
