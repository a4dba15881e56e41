#include "policy/placement.h"

#include <random>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace maitre::policy {
namespace {

PlacementWorker W(std::string id, double cores, double memory, double free_cores,
                  double free_memory) {
  return {std::move(id), cores, memory, free_cores, free_memory, true};
}

struct PlaceCase {
  std::string name;
  PlacementDemand demand;
  std::vector<PlacementWorker> workers;
  PlacementStrategy strategy = PlacementStrategy::kBestFit;
  std::optional<size_t> expected;
};

TEST(PlacementTest, Table) {
  const std::vector<PlaceCase> cases = {
      {"the tightest fit by cores",
       {1, 100},
       {W("a", 4, 4096, 3, 4000), W("b", 4, 4096, 1, 4000), W("c", 4, 4096, 2, 4000)},
       PlacementStrategy::kBestFit,
       1},
      {"memory binds: tightest by memory",
       {1, 1000},
       {W("a", 8, 4096, 4, 1500), W("b", 8, 4096, 7, 1100), W("c", 8, 4096, 2, 3000)},
       PlacementStrategy::kBestFit,
       1},
      {"none fits", {2, 100}, {W("a", 4, 4096, 1, 4000), W("b", 2, 4096, 1.5, 4000)},
       PlacementStrategy::kBestFit, std::nullopt},
      {"memory limit honoured", {1, 500}, {W("a", 4, 1024, 3, 400), W("b", 4, 1024, 1, 600)},
       PlacementStrategy::kBestFit, 1},
      {"unlimited memory", {1, 5000}, {W("a", 4, 0, 1, 0)}, PlacementStrategy::kBestFit, 0},
      {"worst fit spreads", {1, 100},
       {W("a", 4, 4096, 3, 4000), W("b", 4, 4096, 1, 4000), W("c", 4, 4096, 2, 4000)},
       PlacementStrategy::kWorstFit, 0},
      {"first fit", {1, 100},
       {W("a", 4, 4096, 0.5, 4000), W("b", 4, 4096, 3, 4000), W("c", 4, 4096, 1, 4000)},
       PlacementStrategy::kFirstFit, 1},
      {"ties go to the earlier worker", {1, 100},
       {W("a", 4, 4096, 2, 4000), W("b", 4, 4096, 2, 4000)}, PlacementStrategy::kBestFit, 0},
  };
  for (const PlaceCase& c : cases) {
    SCOPED_TRACE(c.name);
    PlacementOptions o;
    o.strategy = c.strategy;
    EXPECT_EQ(PlaceInstance(c.demand, c.workers, o), c.expected);
  }
}

TEST(PlacementTest, SkipsWorkersNotAccepting) {
  std::vector<PlacementWorker> workers = {W("a", 4, 4096, 1, 4000), W("b", 4, 4096, 3, 4000)};
  workers[0].accepting = false;
  EXPECT_EQ(PlaceInstance({1, 100}, workers), 1u);
}

TEST(PlacementTest, PlaceAllGoesLargestFirst) {
  // Online in input order the small one would take the 2-core hole and the
  // large one would not fit; largest first places both.
  std::vector<PlacementWorker> workers = {W("a", 4, 4096, 2, 4000), W("b", 4, 4096, 1, 4000)};
  std::vector<PlacementDemand> demands = {{1, 100}, {2, 100}};
  EXPECT_THAT(PlaceAll(demands, workers),
              ::testing::ElementsAre(std::optional<size_t>(1), std::optional<size_t>(0)));
}

TEST(PlacementTest, NeverOverfillsRandomWorkers) {
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(0, 1);
  for (int trial = 0; trial < 500; ++trial) {
    std::vector<PlacementWorker> workers;
    int n = 1 + static_cast<int>(u(rng) * 6);
    for (int i = 0; i < n; ++i) {
      double cores = 1 + std::floor(u(rng) * 8), memory = 1024 * (1 + std::floor(u(rng) * 8));
      workers.push_back(W("w" + std::to_string(i), cores, memory, cores * u(rng), memory * u(rng)));
    }
    std::vector<PlacementDemand> demands;
    int k = 1 + static_cast<int>(u(rng) * 10);
    for (int i = 0; i < k; ++i) demands.push_back({0.5 + std::floor(u(rng) * 3), 100 + 900 * u(rng)});
    for (PlacementStrategy strategy :
         {PlacementStrategy::kBestFit, PlacementStrategy::kWorstFit, PlacementStrategy::kFirstFit}) {
      PlacementOptions o;
      o.strategy = strategy;
      std::vector<std::optional<size_t>> placed = PlaceAll(demands, workers, o);
      std::vector<double> cores(workers.size(), 0), memory(workers.size(), 0);
      for (size_t i = 0; i < demands.size(); ++i) {
        if (!placed[i].has_value()) continue;
        cores[*placed[i]] += demands[i].cores;
        memory[*placed[i]] += demands[i].memory_mb;
      }
      for (size_t w = 0; w < workers.size(); ++w) {
        EXPECT_LE(cores[w], workers[w].free_cores + 1e-9);
        EXPECT_LE(memory[w], workers[w].free_memory_mb + 1e-9);
      }
      // An unplaced demand fits on no worker's remaining space.
      for (size_t i = 0; i < demands.size(); ++i) {
        if (placed[i].has_value()) continue;
        for (size_t w = 0; w < workers.size(); ++w) {
          bool fits = demands[i].cores <= workers[w].free_cores - cores[w] + 1e-9 &&
                      demands[i].memory_mb <= workers[w].free_memory_mb - memory[w] + 1e-9;
          EXPECT_FALSE(fits);
        }
      }
    }
  }
}

}  // namespace
}  // namespace maitre::policy
