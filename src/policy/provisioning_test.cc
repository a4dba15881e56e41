#include "policy/provisioning.h"

#include <cmath>
#include <functional>
#include <random>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace maitre::policy {
namespace {

// INFaaS Table 3 (experiment infaas-table3).
std::vector<ProvisioningVariant> Table3Variants() {
  return {{"A", "4 CPUs", 200, 5, 1},
          {"B", "Inferentia", 20, 100, 3},
          {"C", "V100", 15, 800, 16}};
}

struct Table3Row {
  double load_qps;
  double slo_ms;
  std::vector<int> counts;
  std::string text;
  double cost;
};

TEST(ProvisioningTest, InfaasTable3) {
  const std::vector<ProvisioningVariant> variants = Table3Variants();
  const std::vector<Table3Row> rows = {
      {10, 300, {2, 0, 0}, "2×A", 2},
      {10, 50, {0, 1, 0}, "1×B", 3},
      {1000, 300, {0, 2, 1}, "2×B + 1×C", 22},
  };
  for (const Table3Row& row : rows) {
    SCOPED_TRACE(row.text);
    auto config = CheapestConfiguration(variants, row.load_qps, row.slo_ms);
    ASSERT_TRUE(config.ok()) << config.status();
    EXPECT_EQ(config->counts, row.counts);
    EXPECT_DOUBLE_EQ(config->cost_per_s, row.cost);
    EXPECT_EQ(FormatConfiguration(variants, *config), row.text);
    EXPECT_GE(config->throughput_qps, row.load_qps);
  }
}

TEST(ProvisioningTest, EdgeCases) {
  const std::vector<ProvisioningVariant> variants = Table3Variants();
  auto none = CheapestConfiguration(variants, 0, 300);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->counts, (std::vector<int>{0, 0, 0}));
  EXPECT_EQ(FormatConfiguration(variants, *none), "none");
  EXPECT_EQ(CheapestConfiguration(variants, 10, 10).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(CheapestConfiguration(variants, -1, 10).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheapestConfiguration(variants, 1, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  // The SLO is inclusive: 200 ms meets a 200 ms objective.
  auto exact = CheapestConfiguration(variants, 5, 200);
  ASSERT_TRUE(exact.ok());
  EXPECT_EQ(exact->counts, (std::vector<int>{1, 0, 0}));
  ProvisioningOptions tiny;
  tiny.max_nodes = 3;
  EXPECT_EQ(CheapestConfiguration(variants, 100000, 300, tiny).status().code(),
            absl::StatusCode::kResourceExhausted);
}

TEST(ProvisioningTest, TiesPreferFewerInstances) {
  // Two A-like instances cost what one D does.
  std::vector<ProvisioningVariant> variants = {{"A", "cpu", 10, 5, 1}, {"D", "gpu", 10, 10, 2}};
  auto config = CheapestConfiguration(variants, 10, 100);
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->counts, (std::vector<int>{0, 1}));
}

// Exhaustive search over every count up to what covers the load alone.
double BruteForce(const std::vector<ProvisioningVariant>& variants, double load, double slo) {
  double best = INFINITY;
  std::vector<int> counts(variants.size(), 0);
  std::function<void(size_t)> walk = [&](size_t i) {
    if (i == variants.size()) {
      double qps = 0, cost = 0;
      for (size_t k = 0; k < variants.size(); ++k) {
        qps += counts[k] * variants[k].throughput_qps;
        cost += counts[k] * variants[k].cost_per_s;
      }
      if (qps >= load * (1 - 1e-9)) best = std::min(best, cost);
      return;
    }
    const ProvisioningVariant& v = variants[i];
    int most = v.latency_ms <= slo ? static_cast<int>(std::ceil(load / v.throughput_qps)) : 0;
    for (int n = 0; n <= most; ++n) {
      counts[i] = n;
      walk(i + 1);
    }
    counts[i] = 0;
  };
  walk(0);
  return best;
}

TEST(ProvisioningTest, MatchesBruteForceOnRandomCatalogues) {
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> u(0, 1);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<ProvisioningVariant> variants;
    int n = 2 + static_cast<int>(u(rng) * 3);
    for (int i = 0; i < n; ++i) {
      double qps = 5 + std::floor(u(rng) * 60);
      variants.push_back({"v" + std::to_string(i), "hw", 10 + std::floor(u(rng) * 200), qps,
                          std::round(qps * (0.2 + u(rng)) * 10) / 10});
    }
    double load = 1 + std::floor(u(rng) * 150);
    double slo = 50 + std::floor(u(rng) * 200);
    double expected = BruteForce(variants, load, slo);
    auto config = CheapestConfiguration(variants, load, slo);
    if (std::isinf(expected)) {
      EXPECT_FALSE(config.ok());
      continue;
    }
    ASSERT_TRUE(config.ok()) << config.status();
    EXPECT_NEAR(config->cost_per_s, expected, 1e-9 * expected) << "trial " << trial;
    EXPECT_GE(config->throughput_qps, load * (1 - 1e-9));
    for (size_t i = 0; i < variants.size(); ++i) {
      if (variants[i].latency_ms > slo) EXPECT_EQ(config->counts[i], 0);
    }
  }
}

}  // namespace
}  // namespace maitre::policy
