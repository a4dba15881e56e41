// The same experiment and seed give byte-identical outputs: run twice in one
// process, and with two simulators interleaved step by step.
#include <gtest/gtest.h>

#include "sim/experiment.h"
#include "sim/report.h"

namespace maitre::sim {
namespace {

constexpr char kExperiment[] = R"(
name: determinism
profiles:
  - {model: cnn, variant: torch, worker_type: cpu-1, accuracy: 0.76,
     points: [[1, 6, 6.6], [8, 20, 22], [32, 68, 74.8]]}
  - {model: cnn, variant: int8, worker_type: cpu-1, accuracy: 0.74,
     points: [[1, 4, 5], [8, 12, 15], [32, 40, 50]]}
apps:
  - name: a
    latency_ms: 40
    share: 2
    instances: [{variant: "cnn:torch", count: 2}]
  - name: b
    latency_ms: 60
    instances: [{variant: "cnn:int8"}]
trace:
  generator: gamma
  rate_qps: 500
  cv: 3
  duration_s: 20
  seed: 5
policies:
  batching: {name: POLICY, max_batch: 32}
simulation:
  service_noise: lognormal
)";

struct Outputs {
  std::string csv, json, svg;
  bool operator==(const Outputs& o) const { return csv == o.csv && json == o.json && svg == o.svg; }
};

Outputs Report(const Simulator& sim) {
  return {TimeseriesCsv(sim), SummaryJson(sim, "determinism"), PlotSvg(sim, "determinism")};
}

Experiment Load(const std::string& policy, int seed = 5) {
  std::string text = kExperiment;
  text.replace(text.find("POLICY"), 6, policy);
  text.replace(text.find("seed: 5"), 7, "seed: " + std::to_string(seed));
  auto e = ParseExperiment(text, ".");
  EXPECT_TRUE(e.ok()) << e.status();
  return *std::move(e);
}

Outputs RunOnce(const Experiment& e) {
  auto sim = BuildSimulator(e);
  EXPECT_TRUE(sim.ok()) << sim.status();
  EXPECT_TRUE((*sim)->Run().ok());
  return Report(**sim);
}

TEST(DeterminismTest, SameSeedSameBytes) {
  for (const char* policy : {"proteus", "clipper-aimd", "nexus", "timeout", "mark"}) {
    Experiment e = Load(policy);
    Outputs first = RunOnce(e);
    Outputs second = RunOnce(e);
    EXPECT_TRUE(first == second) << policy;
    EXPECT_GT(first.csv.size(), 100u);
  }
}

TEST(DeterminismTest, InterleavedSimulatorsDoNotDisturbEachOther) {
  Experiment e = Load("proteus");
  Experiment other = Load("clipper-aimd", 6);
  Outputs alone = RunOnce(e);
  Outputs other_alone = RunOnce(other);
  auto a = BuildSimulator(e);
  auto b = BuildSimulator(other);
  auto c = BuildSimulator(e);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  // Step all three in small, uneven slices of simulated time.
  Nanos ta = 0, tb = 0, tc = 0;
  while (!(*a)->finished() || !(*b)->finished() || !(*c)->finished()) {
    ASSERT_TRUE((*a)->RunUntil(ta += 7 * kMillisecond).ok());
    ASSERT_TRUE((*b)->RunUntil(tb += 13 * kMillisecond).ok());
    ASSERT_TRUE((*c)->RunUntil(tc += 101 * kMillisecond).ok());
  }
  EXPECT_TRUE(Report(**a) == alone);
  EXPECT_TRUE(Report(**c) == alone);
  EXPECT_TRUE(Report(**b) == other_alone);
}

TEST(DeterminismTest, AnotherSeedGivesAnotherRun) {
  EXPECT_FALSE(RunOnce(Load("proteus", 5)) == RunOnce(Load("proteus", 6)));
}

}  // namespace
}  // namespace maitre::sim
