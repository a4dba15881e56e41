// Observed capacity (docs/policies.md, "How the control plane drives them"):
// what instances were seen to sustain on their workers, remembered for a
// while, per (worker, variant) and, for a worker at its CPU limit, per
// (worker type, variant). Profiles are measured on an idle worker; on a
// busy host an instance sustains less, and allocators that plan with these
// figures (the infaas and mark allocators) cap the profile by them.
//
// Pure: the clock is the observation's `now`. Not thread-safe.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>

#include "control/allocator.h"
#include "control/observation.h"

namespace maitre::control {

struct ObservedCapacityOptions {
  // How long the latest figure is believed (AllocatorOptions'
  // observed_capacity_memory).
  Nanos latest_memory = 30 * kSecond;
  // After that, until this much time since the last figure, the most any
  // figure of the hold said. At least `latest_memory`.
  Nanos hold = 30 * 60 * kSecond;
  // A worker whose report says its process kept at least this share of its
  // cores busy is at its limit (AllocatorOptions' saturated_cpu_utilisation).
  double saturated_cpu_utilisation = 0.85;
  // The model round's period: no CPU limit is read within two rounds of a
  // load's end.
  Nanos model_period = 2 * kSecond;
};

// The allocator's own settings: the latest figure believed for
// observed_capacity_memory, the most held for consolidation's spread_memory.
ObservedCapacityOptions ObservedCapacityOptionsFor(const AllocatorOptions& options);

class ObservedCapacity {
 public:
  explicit ObservedCapacity(ObservedCapacityOptions options) : options_(options) {}

  // Takes this round's figures: an Overloaded instance's served rate, an
  // Interfered one's profile slowed by its observed batch time, and what
  // the instance carrying a worker at its CPU limit served.
  void Remember(const Observation& observation);
  // Drops the per-worker figures of workers the observation no longer has
  // (a type's figures stay: they are the type's).
  void ForgetGoneWorkers(const Observation& observation);

  // The least capacity per replica remembered for the variant on the
  // worker: its own figure or its type's.
  std::optional<double> OnWorker(const ObservedWorker& worker, const VariantKey& key,
                                 Nanos now) const;
  // What workers of the type at their CPU limit served per replica of the
  // variant.
  std::optional<double> AtTypeLimit(const std::string& type, const VariantKey& key,
                                    Nanos now) const;

 private:
  // (worker id or type, variant key).
  using Where = std::pair<std::string, std::string>;
  // Per replica: the latest figure, believed for `latest_memory`; after it,
  // the most any figure of the hold said (Remember).
  struct Figure {
    double latest = 0;
    Nanos latest_until = 0;
    double held = 0;
    Nanos held_until = 0;
    std::optional<double> At(Nanos now) const;
  };

  // The capacity per replica of the instance carrying most of the queries
  // of a worker at its CPU limit: what it served.
  std::optional<double> AtCpuLimit(const Observation& observation, const ObservedWorker& worker,
                                   const ObservedInstance& inst) const;
  void Take(Figure& seen, double capacity, Nanos now) const;
  static std::optional<double> Find(const std::map<Where, Figure>& seen, const Where& where,
                                    Nanos now);

  const ObservedCapacityOptions options_;
  std::map<Where, Figure> by_worker_;
  // What workers at their CPU limit served, by (worker type, variant key):
  // the data path's cost per query is the type's, not one worker's.
  std::map<Where, Figure> by_type_;
};

}  // namespace maitre::control
