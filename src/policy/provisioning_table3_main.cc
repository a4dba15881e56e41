// infaas_table3: INFaaS Table 3 computed by CheapestConfiguration (experiment
// `infaas-table3`, docs/experiments.md). Prints the variants and, for each
// (load, SLO) row, the cheapest configuration next to the paper's; with --out
// FILE also writes them as JSON. Exits 1 if a row differs from the paper.
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "policy/provisioning.h"

namespace {

struct Row {
  double load_qps;
  double slo_ms;
  std::string paper_configuration;
  double paper_cost_per_s;
};

}  // namespace

int main(int argc, char** argv) {
  std::string out;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--out") == 0 && i + 1 < argc) {
      out = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--out summary.json]\n", argv[0]);
      return 2;
    }
  }
  using maitre::policy::ProvisioningVariant;
  const std::vector<ProvisioningVariant> variants = {{"A", "4 CPUs", 200, 5, 1},
                                                     {"B", "Inferentia", 20, 100, 3},
                                                     {"C", "V100", 15, 800, 16}};
  const std::vector<Row> rows = {
      {10, 300, "2×A", 2}, {10, 50, "1×B", 3}, {1000, 300, "2×B + 1×C", 22}};

  nlohmann::json summary;
  summary["experiment"] = "infaas-table3";
  for (const ProvisioningVariant& v : variants) {
    summary["variants"].push_back({{"name", v.name},
                                   {"hardware", v.hardware},
                                   {"latency_ms", v.latency_ms},
                                   {"throughput_qps", v.throughput_qps},
                                   {"cost_per_s", v.cost_per_s}});
  }
  std::printf("%-8s %-11s %8s %11s  %s\n", "variant", "hardware", "latency", "throughput",
              "cost");
  for (const ProvisioningVariant& v : variants) {
    std::printf("%-8s %-11s %5.0f ms %7.0f qps  $%g/s\n", v.name.c_str(), v.hardware.c_str(),
                v.latency_ms, v.throughput_qps, v.cost_per_s);
  }
  std::printf("\n%-9s %-7s %-13s %-8s %-13s %-8s %s\n", "load", "SLO", "cheapest", "cost",
              "paper", "cost", "match");
  bool all_match = true;
  for (const Row& row : rows) {
    auto config = maitre::policy::CheapestConfiguration(variants, row.load_qps, row.slo_ms);
    if (!config.ok()) {
      std::fprintf(stderr, "%g qps / %g ms: %s\n", row.load_qps, row.slo_ms,
                   std::string(config.status().message()).c_str());
      return 1;
    }
    std::string text = maitre::policy::FormatConfiguration(variants, *config);
    bool match = text == row.paper_configuration && config->cost_per_s == row.paper_cost_per_s;
    all_match &= match;
    nlohmann::json counts;
    for (size_t i = 0; i < variants.size(); ++i) counts[variants[i].name] = config->counts[i];
    summary["rows"].push_back({{"load_qps", row.load_qps},
                               {"slo_ms", row.slo_ms},
                               {"configuration", text},
                               {"counts", counts},
                               {"cost_per_s", config->cost_per_s},
                               {"throughput_qps", config->throughput_qps},
                               {"paper_configuration", row.paper_configuration},
                               {"paper_cost_per_s", row.paper_cost_per_s},
                               {"matches_paper", match}});
    // "×" is two bytes in UTF-8; pad by display width.
    auto pad = [](const std::string& s, size_t width) {
      size_t shown = 0;
      for (unsigned char c : s) shown += (c & 0xC0) != 0x80;
      return s + std::string(width > shown ? width - shown : 0, ' ');
    };
    auto dollars = [](double x) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "$%g", x);
      return std::string(buf);
    };
    std::printf("%-9s %-7s %s %-8s %s %-8s %s\n",
                (std::to_string(static_cast<int>(row.load_qps)) + " qps").c_str(),
                (std::to_string(static_cast<int>(row.slo_ms)) + " ms").c_str(),
                pad(text, 13).c_str(), dollars(config->cost_per_s).c_str(),
                pad(row.paper_configuration, 13).c_str(), dollars(row.paper_cost_per_s).c_str(),
                match ? "yes" : "NO");
  }
  summary["all_match_paper"] = all_match;
  if (!out.empty()) {
    std::ofstream file(out);
    file << summary.dump(2) << "\n";
    if (!file) {
      std::fprintf(stderr, "cannot write %s\n", out.c_str());
      return 1;
    }
  }
  return all_match ? 0 : 1;
}
