// Online placement of new instances on existing workers by online bin-packing
// (docs/policies.md, "Placement"). A pure function: the workers' free resources
// come in, a worker index (or none) comes out.
//
// The rule is best fit by the binding resource: among the workers where the
// instance fits in every resource, take the one where it leaves the least of
// its binding resource free (as a fraction of that worker's total), the binding
// resource being the one of which the instance takes the largest fraction of
// what is free there: the one that runs out first. Packing tightly by the
// resource that runs out first keeps large holes open elsewhere for large
// instances, and leaves idle workers idle so the cluster autoscaler can remove
// them. PlaceAll() places several instances, largest first (best-fit
// decreasing).
//
// Thread-safety: pure functions over value types.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/types/span.h"

namespace maitre::policy {

// What one new instance needs.
struct PlacementDemand {
  double cores = 0;
  double memory_mb = 0;
};

// A worker as placement sees it.
struct PlacementWorker {
  std::string id;
  double total_cores = 0;
  double total_memory_mb = 0;  // 0: memory is not limited
  double free_cores = 0;
  double free_memory_mb = 0;
  // False for a worker that must not take new instances (draining, starting,
  // Interfered, or already holding the variant).
  bool accepting = true;
};

enum class PlacementStrategy {
  kBestFit,   // least binding resource left (the default)
  kWorstFit,  // most left: spreads load, for comparison
  kFirstFit,  // first in input order
};

struct PlacementOptions {
  PlacementStrategy strategy = PlacementStrategy::kBestFit;
};

// The index in `workers` of the worker to place `demand` on, or nullopt when
// it fits nowhere. Ties go to the earlier worker.
std::optional<size_t> PlaceInstance(const PlacementDemand& demand,
                                    absl::Span<const PlacementWorker> workers,
                                    const PlacementOptions& options = {});

// Places `demands` one after another on `workers`, largest first (by the
// largest fraction of any resource of the biggest worker), taking each
// placement's resources before the next. Returns one entry per demand, in
// input order: the worker index, or nullopt when it did not fit.
std::vector<std::optional<size_t>> PlaceAll(absl::Span<const PlacementDemand> demands,
                                            std::vector<PlacementWorker> workers,
                                            const PlacementOptions& options = {});

}  // namespace maitre::policy
