// allocation_bench: how long Proteus's allocation MILP (allocation_milp.h)
// takes with CBC as the cluster grows, as in the paper's Fig. 10: devices,
// variants and query types varied one at a time around 40 × 45 × 9, then
// all three at the paper's largest sizes together.
//
// Each size is solved on `--repeats` random clusters (seeded, so a run is
// reproducible); the table gives the median and the slowest solve, how many
// were proven optimal within the time limit and the largest gap left. Two
// solves per cluster: the first from an empty cluster, and a re-solve after
// every type's demand moved by up to ±20%, from the first plan (what the
// allocator does every 30 s).
//
// The clusters: four device types (one slow and three faster, 1×, 3×, 8×,
// 20×), each query type with an even share of the variants, accuracies
// spread over 0.8–1.0 and peak throughput falling 3× from the least to the
// most accurate, and demand at 1.3× what the cluster carries at full
// accuracy, so every solve must scale accuracy.
//
//   allocation_bench [--repeats N] [--time-limit S] [--gap G] [--quick] [--size DxMxQ]...
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "policy/allocation_milp.h"

namespace maitre::policy {
namespace {

struct Size {
  int devices, variants, query_types;
};

AllocationProblem RandomCluster(const Size& size, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> unit(0, 1);
  AllocationProblem p;
  p.device_types = {"cpu", "gpu-small", "gpu-mid", "gpu-large"};
  const double speed[] = {1, 3, 8, 20};
  for (int d = 0; d < size.devices; ++d) {
    p.devices.push_back({"d" + std::to_string(d), d % 4, -1});
  }
  std::vector<double> base(size.query_types);
  for (int q = 0; q < size.query_types; ++q) {
    p.query_types.push_back({"q" + std::to_string(q), 0});
    base[q] = 20 + 80 * unit(rng);  // qps of the fastest variant on a cpu
  }
  std::vector<int> per_type(size.query_types, 0);
  for (int m = 0; m < size.variants; ++m) ++per_type[m % size.query_types];
  std::vector<int> rank(size.query_types, 0);
  p.peak_qps.assign(4, std::vector<double>(size.variants, 0));
  std::vector<double> full_accuracy_capacity(size.query_types, 0);
  for (int m = 0; m < size.variants; ++m) {
    int q = m % size.query_types;
    int n = per_type[q];
    double position = n > 1 ? static_cast<double>(rank[q]++) / (n - 1) : 1;  // 0 fastest
    p.variants.push_back({"m" + std::to_string(m), q, 0.8 + 0.2 * position});
    for (int t = 0; t < 4; ++t) {
      double jitter = 0.9 + 0.2 * unit(rng);
      p.peak_qps[t][m] = base[q] * speed[t] * jitter / (1 + 2 * position);
    }
  }
  // Full-accuracy capacity if the devices were split evenly among the types.
  for (int m = 0; m < size.variants; ++m) {
    if (p.variants[m].accuracy < 1) continue;
    int q = p.variants[m].query_type;
    for (int d = 0; d < size.devices; ++d) {
      full_accuracy_capacity[q] += p.peak_qps[d % 4][m] / size.query_types;
    }
  }
  for (int q = 0; q < size.query_types; ++q) {
    p.query_types[q].demand_qps = 1.3 * full_accuracy_capacity[q];
  }
  return p;
}

struct Row {
  std::vector<double> seconds;
  int optimal = 0, failed = 0;
  double worst_gap = 0;
  double objective = 0;  // summed, to compare runs with other limits
};

void Record(Row& row, const absl::StatusOr<AllocationPlan>& plan) {
  if (!plan.ok()) {
    ++row.failed;
    return;
  }
  row.seconds.push_back(plan->solve_s);
  row.optimal += plan->optimal;
  row.worst_gap = std::max(row.worst_gap, plan->gap);
  row.objective += plan->objective;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

void Print(const char* label, const Size& s, const Row& row, int repeats) {
  double max = row.seconds.empty() ? 0 : *std::max_element(row.seconds.begin(), row.seconds.end());
  std::printf("| %-9s | %3d × %3d × %2d | %8.3f | %8.3f | %2d/%-2d | %.1e | %d | %.4f |\n", label,
              s.devices, s.variants, s.query_types, Median(row.seconds), max, row.optimal, repeats,
              row.worst_gap, row.failed,
              row.seconds.empty() ? 0 : row.objective / row.seconds.size());
  std::fflush(stdout);
}

int Main(int argc, char** argv) {
  int repeats = 5;
  std::vector<Size> sizes;
  AllocationOptions options;
  options.time_limit_s = 60;
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--repeats") && i + 1 < argc) {
      repeats = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--time-limit") && i + 1 < argc) {
      options.time_limit_s = std::atof(argv[++i]);
    } else if (!std::strcmp(argv[i], "--gap") && i + 1 < argc) {
      options.absolute_gap = std::atof(argv[++i]);
    } else if (!std::strcmp(argv[i], "--quick")) {
      quick = true;
    } else if (!std::strcmp(argv[i], "--size") && i + 1 < argc) {
      Size s{};
      if (std::sscanf(argv[++i], "%dx%dx%d", &s.devices, &s.variants, &s.query_types) != 3 ||
          s.devices <= 0 || s.variants <= 0 || s.query_types <= 0) {
        std::fprintf(stderr, "--size wants DEVICESxVARIANTSxTYPES, e.g. 40x45x9\n");
        return 2;
      }
      sizes.push_back(s);
    } else {
      std::fprintf(stderr,
                   "usage: allocation_bench [--repeats N] [--time-limit S] [--gap G] [--quick] "
                   "[--size DxMxQ]...\n");
      return 2;
    }
  }
  if (!sizes.empty()) {
    // As given.
  } else if (quick) {
    sizes = {{10, 15, 3}, {40, 45, 9}};
  } else {
    for (int d : {10, 20, 40, 80, 160}) sizes.push_back({d, 45, 9});
    for (int m : {90, 180, 450}) sizes.push_back({40, m, 9});
    for (int q : {3, 17}) sizes.push_back({40, 45, q});
    sizes.push_back({160, 450, 17});
  }
  std::printf(
      "| solve     | d × m × q       | median s | max s    | optimal | worst gap | failed | "
      "mean objective |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  for (const Size& size : sizes) {
    std::mt19937_64 rng(1000 * size.devices + 10 * size.variants + size.query_types);
    Row first, again;
    for (int r = 0; r < repeats; ++r) {
      AllocationProblem p = RandomCluster(size, rng);
      auto plan = SolveAllocation(p, options);
      Record(first, plan);
      if (!plan.ok()) continue;
      std::uniform_real_distribution<double> drift(0.8, 1.2);
      for (size_t d = 0; d < p.devices.size(); ++d) p.devices[d].current = plan->device_variant[d];
      for (auto& q : p.query_types) q.demand_qps *= drift(rng);
      Record(again, SolveAllocation(p, options));
    }
    Print("first", size, first, repeats);
    Print("re-solve", size, again, repeats);
  }
  return 0;
}

}  // namespace
}  // namespace maitre::policy

int main(int argc, char** argv) { return maitre::policy::Main(argc, argv); }
