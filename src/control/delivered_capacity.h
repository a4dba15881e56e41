// What a replica of a variant actually delivers on a worker, as monitoring
// shows it (docs/policies.md, "How the control plane drives them", observed
// capacity): profiles are measured alone, and on a busy host, behind a data
// path that costs CPU per query, an instance sustains less. The INFaaS allocator's model autoscaler,
// consolidation and interference migration ask this book instead of the
// profiles, so that a worker seen at its limit is not planned for more than
// it served.
//
// Figures come from
//  - an Overloaded instance: what it served;
//  - an Interfered one: its profiled capacity slowed by the ratio of its
//    observed batch time to its profiled one;
//  - the instance carrying most of the queries of a worker at its CPU limit:
//    what it served, remembered for the worker and for its type (the data
//    path's cost per query is the type's, not one worker's).
// Each figure per replica; the latest believed for `latest_for`, then, until
// `held_for`, the most any figure of the hold said.
//
// Not thread-safe: one allocator's rounds own it.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>

#include "control/allocator.h"
#include "control/observation.h"

namespace maitre::control {

class DeliveredCapacity {
 public:
  struct Options {
    Nanos latest_for = 30 * kSecond;
    Nanos held_for = 30 * 60 * kSecond;
    double saturated_cpu_utilisation = 0.85;
    // A load's CPU reads as the queries' within two of these of its end.
    Nanos model_period = 10 * kSecond;
  };
  explicit DeliveredCapacity(const Options& options) : options_(options) {}

  // Takes this round's figures and drops those of workers gone.
  void Remember(const Observation& observation);

  // What one replica of `variant` delivers on `worker` at the model's
  // objective: its profile, times the least share of their profiles the
  // variants observed there delivered, and at most its own figure.
  double PerReplica(const ObservedWorker& worker, const ModelOption& model,
                    const VariantOption& variant, Nanos now) const;
  // The same for a worker of `type` not yet known (one to launch, or any of
  // the type): only the type's figures count.
  double PerReplicaOnType(const std::string& type, const ModelOption& model,
                          const VariantOption& variant, Nanos now) const;

 private:
  struct Figure {
    double latest = 0;
    Nanos latest_until = 0;
    double held = 0;
    Nanos held_until = 0;
    std::optional<double> At(Nanos now) const;
  };
  // (worker id or type, variant key)
  using Where = std::pair<std::string, std::string>;

  void Take(Figure& figure, double capacity, Nanos now) const;
  std::optional<double> AtCpuLimit(const Observation& observation, const ObservedWorker& worker,
                                   const ObservedInstance& inst) const;
  // The least figure for the key on the worker (when given) or its type.
  std::optional<double> Least(const std::string* worker, const std::string& type,
                              const VariantKey& key, Nanos now) const;
  double Delivered(const std::string* worker, const std::string& type, const ModelOption& model,
                   const VariantOption& variant, Nanos now) const;

  const Options options_;
  std::map<Where, Figure> by_worker_;
  std::map<Where, Figure> by_type_;  // workers at their CPU limit only
};

// The book's options from an allocator's: the latest figure believed for
// `observed_capacity_memory`, held as long as consolidation remembers a
// spread.
DeliveredCapacity::Options DeliveredCapacityOptions(const AllocatorOptions& options);

}  // namespace maitre::control
