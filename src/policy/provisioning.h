// Cheapest provisioning for a load under a latency objective (INFaaS Table 3;
// experiment `infaas-table3`): given variants with a latency, a per-instance
// throughput and a cost rate, how many instances of each serve `load_qps`
// within `slo_ms` at the least cost?
//
// The problem is a small integer program, solved exactly:
//   minimise   Σ_v cost_v · n_v
//   subject to Σ_v throughput_v · n_v >= load,  n_v ∈ ℕ,
//              n_v = 0 for every v with latency_v > slo.
// (an unbounded covering knapsack). The solver is a depth-first branch and
// bound whose bound is the LP relaxation (the remaining load at the best cost
// per qps among the variants not yet fixed), so its answer is the optimum,
// not a heuristic. Among equally cheap configurations it returns one with the
// fewest instances.
//
// Thread-safety: pure functions over value types.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace maitre::policy {

struct ProvisioningVariant {
  std::string name;
  std::string hardware;  // for display
  double latency_ms = 0;
  double throughput_qps = 0;  // one instance's
  double cost_per_s = 0;      // one instance's
};

struct ProvisioningConfiguration {
  std::vector<int> counts;  // instances per variant, in input order
  double cost_per_s = 0;
  double throughput_qps = 0;
};

struct ProvisioningOptions {
  // The search gives up (ResourceExhausted) after this many nodes; small
  // catalogues need a few thousand.
  int64_t max_nodes = 50'000'000;
};

// InvalidArgument for negative figures or a non-positive SLO; NotFound when
// load_qps > 0 and no variant meets the SLO; ResourceExhausted when the
// search exceeds max_nodes.
absl::StatusOr<ProvisioningConfiguration> CheapestConfiguration(
    absl::Span<const ProvisioningVariant> variants, double load_qps, double slo_ms,
    const ProvisioningOptions& options = {});

// "2×B + 1×C" (variants with no instances left out; "none" when empty).
std::string FormatConfiguration(absl::Span<const ProvisioningVariant> variants,
                                const ProvisioningConfiguration& configuration);

}  // namespace maitre::policy
