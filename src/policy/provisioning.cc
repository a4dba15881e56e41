#include "policy/provisioning.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace maitre::policy {
namespace {

// Relative tolerance: 10 qps over 5 qps instances is exactly 2 instances.
constexpr double kTol = 1e-9;

struct Search {
  // The eligible variants, best cost per qps first.
  std::vector<const ProvisioningVariant*> variants;
  std::vector<size_t> index;       // position of each in the caller's span
  std::vector<double> best_ratio;  // best cost per qps among variants[i..]
  std::vector<int> counts;
  std::vector<int> best_counts;
  double best_cost = std::numeric_limits<double>::infinity();
  int best_instances = std::numeric_limits<int>::max();
  int64_t nodes = 0;
  int64_t max_nodes = 0;
  double load = 0;

  bool Covered(double remaining) const { return remaining <= kTol * std::max(1.0, load); }

  void Record(double cost) {
    int instances = std::accumulate(counts.begin(), counts.end(), 0);
    double slack = kTol * std::max(1e-12, std::abs(best_cost));
    if (cost < best_cost - slack ||
        (cost <= best_cost + slack && instances < best_instances)) {
      best_cost = cost;
      best_instances = instances;
      best_counts = counts;
    }
  }

  // Chooses counts for variants[i..] to cover `remaining` qps.
  bool Explore(size_t i, double remaining, double cost) {
    if (++nodes > max_nodes) return false;
    if (Covered(remaining)) {
      Record(cost);
      return true;
    }
    if (i == variants.size()) return true;
    // The LP bound: no integer completion is cheaper than buying the
    // remaining load at the best rate still available. Equal-cost
    // completions are still explored when they could use fewer instances.
    double bound = cost + remaining * best_ratio[i];
    if (bound > best_cost + kTol * std::max(1e-12, std::abs(best_cost))) return true;
    const ProvisioningVariant& v = *variants[i];
    int most = static_cast<int>(std::ceil(remaining / v.throughput_qps - kTol));
    for (int n = most; n >= 0; --n) {
      counts[i] = n;
      if (!Explore(i + 1, remaining - n * v.throughput_qps, cost + n * v.cost_per_s)) return false;
    }
    counts[i] = 0;
    return true;
  }
};

}  // namespace

absl::StatusOr<ProvisioningConfiguration> CheapestConfiguration(
    absl::Span<const ProvisioningVariant> variants, double load_qps, double slo_ms,
    const ProvisioningOptions& options) {
  if (!(load_qps >= 0)) return absl::InvalidArgumentError("load must be non-negative");
  if (!(slo_ms > 0)) return absl::InvalidArgumentError("the SLO must be positive");
  Search search;
  search.load = load_qps;
  search.max_nodes = options.max_nodes;
  for (size_t i = 0; i < variants.size(); ++i) {
    const ProvisioningVariant& v = variants[i];
    if (!(v.latency_ms >= 0) || !(v.throughput_qps >= 0) || !(v.cost_per_s >= 0)) {
      return absl::InvalidArgumentError(absl::StrCat("variant ", v.name, " has a negative figure"));
    }
    if (v.latency_ms <= slo_ms && v.throughput_qps > 0) {
      search.variants.push_back(&v);
      search.index.push_back(i);
    }
  }
  ProvisioningConfiguration result;
  result.counts.assign(variants.size(), 0);
  if (search.Covered(load_qps)) return result;
  if (search.variants.empty()) {
    return absl::NotFoundError(absl::StrCat("no variant serves within ", slo_ms, " ms"));
  }
  // Best rate first, so the first complete configurations found are good
  // ones and the bound prunes early.
  std::vector<size_t> order(search.variants.size());
  std::iota(order.begin(), order.end(), 0);
  auto ratio = [](const ProvisioningVariant* v) { return v->cost_per_s / v->throughput_qps; };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return ratio(search.variants[a]) < ratio(search.variants[b]);
  });
  std::vector<const ProvisioningVariant*> sorted;
  std::vector<size_t> sorted_index;
  for (size_t k : order) {
    sorted.push_back(search.variants[k]);
    sorted_index.push_back(search.index[k]);
  }
  search.variants = std::move(sorted);
  search.index = std::move(sorted_index);
  size_t n = search.variants.size();
  search.best_ratio.assign(n, std::numeric_limits<double>::infinity());
  for (size_t i = n; i-- > 0;) {
    double r = ratio(search.variants[i]);
    search.best_ratio[i] = i + 1 < n ? std::min(r, search.best_ratio[i + 1]) : r;
  }
  search.counts.assign(n, 0);
  if (!search.Explore(0, load_qps, 0)) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the search for ", load_qps, " qps exceeded ", options.max_nodes, " nodes"));
  }
  for (size_t i = 0; i < n; ++i) {
    int count = search.best_counts[i];
    result.counts[search.index[i]] = count;
    result.cost_per_s += count * search.variants[i]->cost_per_s;
    result.throughput_qps += count * search.variants[i]->throughput_qps;
  }
  return result;
}

std::string FormatConfiguration(absl::Span<const ProvisioningVariant> variants,
                                const ProvisioningConfiguration& configuration) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < variants.size() && i < configuration.counts.size(); ++i) {
    if (configuration.counts[i] > 0) {
      parts.push_back(absl::StrCat(configuration.counts[i], "×", variants[i].name));
    }
  }
  return parts.empty() ? "none" : absl::StrJoin(parts, " + ");
}

}  // namespace maitre::policy
