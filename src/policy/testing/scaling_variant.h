// A ScalingVariant for the autoscaling tests: one core, 100 MB.
//
// Thread-safety: a pure function.
#pragma once

#include <string>
#include <utility>

#include "policy/autoscaling_model.h"

namespace maitre::policy::testing {

inline ScalingVariant MakeVariant(std::string name, double qps, double cost, double load_s,
                                  int replicas = 0, double accuracy = 0.9) {
  ScalingVariant v;
  v.variant = std::move(name);
  v.saturation_qps = qps;
  v.cost_per_s = cost;
  v.load_s = load_s;
  v.replicas = replicas;
  v.accuracy = accuracy;
  v.cores = 1;
  v.memory_mb = 100;
  return v;
}

}  // namespace maitre::policy::testing
