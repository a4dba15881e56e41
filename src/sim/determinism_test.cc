// The same experiment and seed give byte-identical outputs: run twice in one
// process, and with two simulators interleaved step by step; for static
// clusters and for managed ones (selection, both autoscalers, loads, worker
// launches and removals).
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

// Two worker types, three variants of one model with load times, and bursts
// that make both autoscalers act.
constexpr char kManaged[] = R"(
name: determinism-managed
cluster:
  worker_types:
    - {name: cpu, cores: 4, memory_mb: 8192, price_per_hour: 0.2, launch_s: 7}
    - {name: gpu, cores: 8, memory_mb: 16384, price_per_hour: 3, launch_s: 11}
  workers: {cpu: 1}
profiles:
  - {model: cnn, variant: cpu, worker_type: cpu, accuracy: 0.76, load_ms: 800, memory_mb: 300,
     points: [[1, 30, 33], [4, 100, 110]]}
  - {model: cnn, variant: cpu-opt, worker_type: cpu, accuracy: 0.76, load_ms: 2500,
     memory_mb: 300, points: [[1, 12, 14], [4, 30, 34], [8, 55, 60]]}
  - {model: cnn, variant: cpu, worker_type: gpu, accuracy: 0.76, load_ms: 800,
     points: [[1, 30, 33], [4, 100, 110]]}
  - {model: cnn, variant: trt, worker_type: gpu, accuracy: 0.76, load_ms: 4000, memory_mb: 12000,
     points: [[1, 3, 3.3], [8, 10, 11], [32, 40, 44]]}
apps:
  - name: a
    latency_ms: 150
    models: [cnn]
trace:
  generator: mmpp
  rates_qps: [30, 900]
  mean_dwell_s: [20, 15]
  duration_s: 150
  seed: SEED
policies:
  batching: {name: POLICY, max_batch: 32}
  routing: selection
  model_autoscaler: infaas
  cluster_autoscaler: {name: on, idle_cooldown_s: 20}
simulation:
  service_noise: lognormal
)";

struct Outputs {
  std::string csv, json, svg, log;
  bool operator==(const Outputs& o) const {
    return csv == o.csv && json == o.json && svg == o.svg && log == o.log;
  }
};

Outputs Report(const Simulator& sim) {
  std::string log;
  for (const std::string& line : sim.control_log()) log += line + "\n";
  return {TimeseriesCsv(sim), SummaryJson(sim, "determinism"), PlotSvg(sim, "determinism"), log};
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

Experiment LoadManaged(const std::string& policy, int seed) {
  std::string text = kManaged;
  text.replace(text.find("POLICY"), 6, policy);
  text.replace(text.find("SEED"), 4, std::to_string(seed));
  auto e = ParseExperiment(text, ".");
  EXPECT_TRUE(e.ok()) << e.status();
  return *std::move(e);
}

TEST(DeterminismTest, ManagedClusterSameSeedSameBytes) {
  for (const char* policy : {"nexus", "proteus"}) {
    Experiment e = LoadManaged(policy, 9);
    Outputs first = RunOnce(e);
    Outputs second = RunOnce(e);
    EXPECT_TRUE(first == second) << policy;
    // The run exercised the control plane: scaling and a worker added.
    EXPECT_TRUE(first.log.find("replicate") != std::string::npos ||
                first.log.find("upgrade") != std::string::npos ||
                first.log.find("place") != std::string::npos)
        << policy;
    EXPECT_NE(first.log.find("add-worker"), std::string::npos) << policy;
    EXPECT_NE(first.log.find(" is up"), std::string::npos) << policy;
  }
}

TEST(DeterminismTest, InterleavedManagedSimulatorsDoNotDisturbEachOther) {
  Experiment e = LoadManaged("nexus", 9);
  Experiment other = LoadManaged("proteus", 10);
  Outputs alone = RunOnce(e);
  Outputs other_alone = RunOnce(other);
  auto a = BuildSimulator(e);
  auto b = BuildSimulator(other);
  ASSERT_TRUE(a.ok() && b.ok());
  Nanos ta = 0, tb = 0;
  while (!(*a)->finished() || !(*b)->finished()) {
    ASSERT_TRUE((*a)->RunUntil(ta += 7 * kMillisecond).ok());
    ASSERT_TRUE((*b)->RunUntil(tb += 313 * kMillisecond).ok());
  }
  EXPECT_TRUE(Report(**a) == alone);
  EXPECT_TRUE(Report(**b) == other_alone);
  EXPECT_FALSE(alone == other_alone);
}

}  // namespace
}  // namespace maitre::sim
