// What a replica of a variant actually delivers on a worker, as monitoring
// shows it (docs/policies.md, "How the control plane drives them", observed
// capacity): profiles are measured alone, and on a busy host, behind a data
// path that costs CPU per query, an instance sustains less. The INFaaS
// allocator's model autoscaler, consolidation and interference migration
// ask this book instead of the profiles, so that a worker seen at its limit
// is not planned for more than it served.
//
// Figures come from
//  - an Overloaded instance: what it served, unless the report shows a
//    backlog drained rather than a limit (offered less than it served, its
//    replicas computing less than half of the time);
//  - an Interfered one: its profiled capacity slowed by the ratio of its
//    observed batch time to its profiled one;
//  - the instance carrying most of the queries of a worker at its CPU limit:
//    what it served, remembered for the worker and for its type (the data
//    path's cost per query is the type's, not one worker's).
// Each figure per replica, held for `held_for`. What a question reads of
// the hold depends on its direction (Reading, below).
//
// Not thread-safe: one allocator's rounds own it.
#pragma once

#include <deque>
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

  // Which figure of the hold a question reads.
  //  - kToKeep, for "is what is there enough, or must more come?": the
  //    latest figure for `latest_for`, then the most of the hold. Relief is
  //    not evidence of more capacity (a replica added for an overload is
  //    not given up because the overload ended), and one low report is not
  //    the worker's measure.
  //  - kToGiveUp, for "can what stays carry what goes?": the least figure
  //    of the hold, the latest included. Giving capacity up on the most a
  //    worker ever delivered bets on the host's best moment; on the 2-core
  //    host consolidation gave a worker up on a figure 16% above the peak,
  //    held from earlier, and the worker left alone turned Interfered 45 s
  //    later (docs/experiments.md, steady-load).
  enum class Reading { kToKeep, kToGiveUp };

  // Takes this round's figures and drops those of workers gone.
  void Remember(const Observation& observation);

  // What one replica of `variant` delivers on `worker` at the model's
  // objective: its profile, times the least share of their profiles the
  // variants observed there delivered, and at most its own figure.
  double PerReplica(const ObservedWorker& worker, const ModelOption& model,
                    const VariantOption& variant, Nanos now, Reading reading) const;
  // The same for a worker of `type` not yet known (one to launch, or any of
  // the type): only the type's figures count.
  double PerReplicaOnType(const std::string& type, const ModelOption& model,
                          const VariantOption& variant, Nanos now, Reading reading) const;

 private:
  // Every figure taken within `held_for`, oldest first.
  using Figure = std::deque<std::pair<Nanos, double>>;
  // (worker id or type, variant key)
  using Where = std::pair<std::string, std::string>;

  std::optional<double> Read(const Figure& figure, Nanos now, Reading reading) const;
  std::optional<double> AtCpuLimit(const Observation& observation, const ObservedWorker& worker,
                                   const ObservedInstance& inst) const;
  // The least figure for the key on the worker (when given) or its type.
  std::optional<double> Least(const std::string* worker, const std::string& type,
                              const VariantKey& key, Nanos now, Reading reading) const;
  double Delivered(const std::string* worker, const std::string& type, const ModelOption& model,
                   const VariantOption& variant, Nanos now, Reading reading) const;

  const Options options_;
  std::map<Where, Figure> by_worker_;
  std::map<Where, Figure> by_type_;  // workers at their CPU limit only
};

// The book's options from an allocator's: the latest figure believed for
// `observed_capacity_memory`, held as long as consolidation remembers a
// spread.
DeliveredCapacity::Options DeliveredCapacityOptions(const AllocatorOptions& options);

}  // namespace maitre::control
