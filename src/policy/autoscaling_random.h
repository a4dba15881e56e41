// Random small model-autoscaling instances, shared by the property tests and
// autoscaling_bench. Shaped after INFaaS's variants: per model a few variants
// whose replicas differ by ~16x in throughput, where the faster ones cost
// more per replica but less per query (CPU vs accelerator), with load times
// from tens of milliseconds to seconds.
//
// Thread-safety: pure functions of the generator passed in.
#pragma once

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

#include "policy/autoscaling_model.h"

namespace maitre::policy::testing {

struct RandomScalingOptions {
  int max_models = 3;
  int max_variants = 4;
  // The offered load is the current capacity divided by a headroom drawn from
  // [min_headroom, max_headroom]; below the slack (1.05) a model needs
  // scaling up.
  double min_headroom = 0.4;
  double max_headroom = 1.1;
  // Spare cores the worker has beyond what its replicas use now, at most.
  int max_spare_cores = 8;
};

inline ModelScalingSnapshot RandomScalingSnapshot(std::mt19937_64& rng,
                                                  const RandomScalingOptions& o = {}) {
  auto uniform = [&rng](double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(rng);
  };
  auto integer = [&rng](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };

  ModelScalingSnapshot s;
  int models = integer(1, o.max_models);
  for (int mi = 0; mi < models; ++mi) {
    ScalingModel m;
    m.model = "m" + std::to_string(mi);
    int variants = integer(2, std::max(2, o.max_variants));
    for (int vi = 0; vi < variants; ++vi) {
      ScalingVariant v;
      v.variant = "v" + std::to_string(vi);
      double speed = std::pow(2.0, integer(0, 4)) * uniform(0.8, 1.25);  // 1x .. 20x
      v.saturation_qps = 10 * speed;
      // Per replica the price grows slower than the speed: 1x costs 1, 16x ~5.
      v.cost_per_s = 1e-5 * std::pow(speed, uniform(0.4, 0.8)) * uniform(0.7, 1.4);
      v.cores = integer(0, 4) == 0 ? 2 : 1;
      v.memory_mb = uniform(100, 1200);
      v.load_s = uniform(0.05, 12);
      v.accuracy = uniform(0.70, 0.80);
      m.variants.push_back(v);
    }
    // One or two running variants with 1..3 replicas; sometimes one loading.
    int running = integer(1, std::min(2, variants));
    std::vector<int> order(variants);
    for (int i = 0; i < variants; ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    for (int r = 0; r < running; ++r) {
      ScalingVariant& v = m.variants[order[r]];
      v.replicas = integer(1, 3);
      if (integer(0, 9) == 0) v.loading = 1;
    }
    m.load_qps = ModelCapacityQps(m) / uniform(o.min_headroom, o.max_headroom);
    s.models.push_back(m);
  }
  s.cores = std::ceil(UsedCores(s)) + integer(0, o.max_spare_cores);
  s.memory_mb = std::ceil(UsedMemoryMb(s)) + uniform(0, 1200.0 * o.max_spare_cores);
  return s;
}

}  // namespace maitre::policy::testing
