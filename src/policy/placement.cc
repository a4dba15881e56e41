#include "policy/placement.h"

#include <algorithm>
#include <numeric>

namespace maitre::policy {
namespace {

constexpr double kEps = 1e-9;

bool Fits(const PlacementDemand& d, const PlacementWorker& w) {
  if (!w.accepting) return false;
  if (d.cores > w.free_cores + kEps) return false;
  if (w.total_memory_mb > 0 && d.memory_mb > w.free_memory_mb + kEps) return false;
  return true;
}

// What is left of the binding resource after placing, as a fraction of the
// worker's total. The binding resource is the one the demand takes the
// largest share of what is free.
double BindingLeftover(const PlacementDemand& d, const PlacementWorker& w) {
  double best_share = -1, leftover = 0;
  auto consider = [&](double need, double free, double total) {
    if (total <= 0) return;
    double share = free > 0 ? need / free : (need > 0 ? 1e300 : 0);
    if (share > best_share) {
      best_share = share;
      leftover = (free - need) / total;
    }
  };
  consider(d.cores, w.free_cores, w.total_cores);
  consider(d.memory_mb, w.free_memory_mb, w.total_memory_mb);
  return leftover;
}

}  // namespace

std::optional<size_t> PlaceInstance(const PlacementDemand& demand,
                                    absl::Span<const PlacementWorker> workers,
                                    const PlacementOptions& options) {
  std::optional<size_t> chosen;
  double chosen_score = 0;
  for (size_t i = 0; i < workers.size(); ++i) {
    if (!Fits(demand, workers[i])) continue;
    if (options.strategy == PlacementStrategy::kFirstFit) return i;
    double left = BindingLeftover(demand, workers[i]);
    double score = options.strategy == PlacementStrategy::kBestFit ? left : -left;
    if (!chosen.has_value() || score < chosen_score - kEps) {
      chosen = i;
      chosen_score = score;
    }
  }
  return chosen;
}

std::vector<std::optional<size_t>> PlaceAll(absl::Span<const PlacementDemand> demands,
                                            std::vector<PlacementWorker> workers,
                                            const PlacementOptions& options) {
  double max_cores = 0, max_memory = 0;
  for (const PlacementWorker& w : workers) {
    max_cores = std::max(max_cores, w.total_cores);
    max_memory = std::max(max_memory, w.total_memory_mb);
  }
  auto size = [&](const PlacementDemand& d) {
    double s = 0;
    if (max_cores > 0) s = std::max(s, d.cores / max_cores);
    if (max_memory > 0) s = std::max(s, d.memory_mb / max_memory);
    return s;
  };
  std::vector<size_t> order(demands.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return size(demands[a]) > size(demands[b]); });
  std::vector<std::optional<size_t>> placed(demands.size());
  for (size_t i : order) {
    placed[i] = PlaceInstance(demands[i], workers, options);
    if (placed[i].has_value()) {
      PlacementWorker& w = workers[*placed[i]];
      w.free_cores -= demands[i].cores;
      w.free_memory_mb -= demands[i].memory_mb;
    }
  }
  return placed;
}

}  // namespace maitre::policy
