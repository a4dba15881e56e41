// Small simulation setups for the simulator's tests and benchmark.
//
// Thread-safety: pure functions.
#pragma once

#include <string>

#include "policy/testing/test_profiles.h"
#include "sim/simulator.h"

namespace maitre::sim::testing {

// One app ("app", `slo`) served by `instances` instances of m:v on cpu-1,
// whose profile is p50 = 4 + 2·batch ms, p99 = 1.1·p50.
inline SimulationSetup LinearSetup(const std::string& batching, int instances = 1,
                                   Nanos slo = 40 * kMillisecond) {
  SimulationSetup s;
  WorkerType cpu{"cpu-1", 1, 4096, 0.036};
  s.worker_types.push_back({cpu, instances});
  s.variants.push_back({{"m", "v"}, 0, 0.75, policy::testing::LinearProfile(4, 2)});
  s.apps.push_back({"app", slo, 0});
  for (int i = 0; i < instances; ++i) s.instances.push_back({0, 0});
  s.batching.policy = batching;
  s.batching.max_batch = 32;
  s.horizon = kSecond;
  return s;
}

}  // namespace maitre::sim::testing
