// Spot capacity in the simulator: a spot type's price follows its trace in
// the cost, an experiment refuses a bad trace or interruption setting
// naming the key, and drawn interruption notices take workers away, which
// the provider replaces and the mark allocator takes as capacity
// (SpotInterruptions in sim/simulator.h).
#include <gtest/gtest.h>

#include <string>

#include "core/file_util.h"
#include "sim/experiment.h"
#include "sim/simulator.h"

namespace maitre::sim {
namespace {

std::string Dir() {
  const std::string dir = ::testing::TempDir() + "/maitre_spot_test";
  EXPECT_TRUE(MakeDirectories(dir).ok());
  return dir;
}

std::string Replace(std::string text, const std::string& key, const std::string& value) {
  text.replace(text.find(key), key.size(), value);
  return text;
}

// One worker of a type priced by `spot.csv` beside the YAML, serving a
// static instance for 20 s.
constexpr char kStatic[] = R"(
cluster:
  worker_types:
    - {name: small, cores: 2, memory_mb: 4096, price_per_hour: 99, market: MARKET,
       price_trace: spot.csv, billing_s: BILLING}
  workers: {small: 1}
profiles:
  - {model: m, variant: v, worker_type: small, accuracy: 0.8, points: [[1, 5, 5.5]]}
apps:
  - {name: a, latency_ms: 100, instances: [{variant: "m:v", worker_type: small}]}
trace: {generator: poisson, rate_qps: 10, duration_s: 20, seed: 1}
)";

absl::StatusOr<Experiment> StaticWith(const std::string& trace, const std::string& market = "spot",
                                      const std::string& billing = "0") {
  const std::string dir = Dir();
  EXPECT_TRUE(WriteFileAtomically(dir + "/spot.csv", trace).ok());
  const std::string yaml =
      Replace(Replace(kStatic, "MARKET", market), "BILLING", billing);
  EXPECT_TRUE(WriteFileAtomically(dir + "/exp.yaml", yaml).ok());
  return LoadExperimentFile(dir + "/exp.yaml");
}

TEST(SpotTest, AWorkersCostFollowsItsTypesPriceTrace) {
  // $3.6/h (a thousandth of a dollar a second) for 10 s, then $7.2/h; the
  // list price ($99/h) is not used.
  auto e = StaticWith("time_s,price_per_hour\n0,3.6\n10,7.2\n20,7.2\n");
  ASSERT_TRUE(e.ok()) << e.status();
  auto sim = BuildSimulator(*e);
  ASSERT_TRUE(sim.ok()) << sim.status();
  ASSERT_TRUE((*sim)->Run().ok());
  EXPECT_NEAR((*sim)->CostBetween(0, 20 * kSecond), 0.01 + 0.02, 1e-9);
  EXPECT_NEAR((*sim)->CostRateAt(5 * kSecond), 0.001, 1e-12);
  EXPECT_NEAR((*sim)->CostRateAt(15 * kSecond), 0.002, 1e-12);

  // Billed in 15 s blocks: the first (0-15 s) at the price it began with,
  // the second (15-30 s) at $7.2/h, of which the run pays 5 s.
  auto blocks = StaticWith("0,3.6\n10,7.2\n20,7.2\n", "spot", "15");
  ASSERT_TRUE(blocks.ok()) << blocks.status();
  auto billed = BuildSimulator(*blocks);
  ASSERT_TRUE(billed.ok());
  ASSERT_TRUE((*billed)->Run().ok());
  EXPECT_NEAR((*billed)->CostBetween(0, 20 * kSecond), 0.015 + 0.01, 1e-9);
}

TEST(SpotTest, ABadTraceIsRefusedNamingTheKeyFileAndLine) {
  struct Case {
    std::string trace, market, says;
  };
  for (const Case& c : std::vector<Case>{
           {"0,3.6\n10,-1\n20,1\n", "spot", "spot.csv, line 2: the price must be finite"},
           {"0,3.6\n10,1\n10,2\n20,1\n", "spot", "spot.csv, line 3: time 10 s is not after"},
           {"5,3.6\n20,1\n", "spot", "spot.csv, line 1: the first row must be at time 0"},
           {"0,3.6\n10,1\n", "spot", "spot.csv, line 2: the trace ends at 10 s, before the run's"},
           {"# nothing\n", "spot", "spot.csv: no rows"},
           {"0,3.6\n20,1\n", "on-demand", "only a spot type's price follows a trace"},
           {"0,3.6\n20,1\n", "reserved", "market: expected on-demand or spot"},
       }) {
    auto e = StaticWith(c.trace, c.market);
    ASSERT_FALSE(e.ok()) << c.trace;
    EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(e.status().message().find("cluster.worker_types[0]."), std::string::npos)
        << e.status().message();
    EXPECT_NE(e.status().message().find(c.says), std::string::npos) << e.status().message();
  }
}

// The mark allocator on spot workers only, under 1,500 queries/s (two
// workers' worth of "fast": 1,066 qps each), with notices drawn every 30 s
// per worker on average, LEAD seconds ahead, for 5 minutes.
constexpr char kMarkSpot[] = R"(
cluster:
  worker_types:
    - {name: spot, cores: 2, memory_mb: 4096, price_per_hour: 3.6, launch_s: 5, billing_s: 0,
       max_workers: 8, market: spot}
  workers: {spot: 1}
profiles:
  - {model: m, variant: fast, worker_type: spot, accuracy: 0.8, load_ms: 500, memory_mb: 100,
     points: [[1, 5, 5.5], [4, 10, 11], [16, 30, 33]]}
apps:
  - {name: a, latency_ms: 100, models: [m], instances: [{variant: "m:fast", worker_type: spot}]}
trace: {generator: poisson, rate_qps: 1500, duration_s: 300, seed: 5}
policies:
  batching: {name: nexus, max_batch: 16}
  routing: selection
  selection: {router: weighted}
  allocator: {name: mark, predictor: last, unit_s: 10, horizon_units: 6, sample_s: 2,
              cool_down_s: 10, release_margin_s: 4}
  model_autoscaler: off
  cluster_autoscaler: on
simulation:
  seed: 9
  interruptions: {mean_between_s: 30, lead_s: LEAD}
)";

std::unique_ptr<Simulator> RunMarkSpot(const std::string& lead_s) {
  auto e = ParseExperiment(Replace(kMarkSpot, "LEAD", lead_s), ".");
  EXPECT_TRUE(e.ok()) << e.status();
  auto sim = BuildSimulator(*e);
  EXPECT_TRUE(sim.ok()) << sim.status();
  EXPECT_TRUE((*sim)->Run().ok());
  return *std::move(sim);
}

int CountLines(const std::vector<std::string>& log, const std::string& part) {
  int n = 0;
  for (const std::string& line : log) n += line.find(part) != std::string::npos;
  return n;
}

TEST(SpotTest, DrawnInterruptionsAreReplacedAndTheAllocatorTakesTheReplacement) {
  std::unique_ptr<Simulator> sim = RunMarkSpot("20");
  const ControlCounters& c = sim->control_counters();
  const std::vector<std::string>& log = sim->control_log();
  // Each worker expects a notice in its first 30 s up: many in 5 minutes.
  EXPECT_GE(c.workers_interrupted, 10);
  EXPECT_EQ(CountLines(log, " interrupted: it stops in 20 s"), c.workers_interrupted);
  // Every notice's worker stopped 20 s later (none after the trace's end
  // is drawn, but a stop may fall after it).
  EXPECT_GE(CountLines(log, " stopped by its interruption"), c.workers_interrupted - 1);
  // Each notice started a replacement that is not the allocator's launch:
  // the workers are the first, the allocator's launches and the
  // replacements.
  const auto workers = sim->Workers();
  EXPECT_EQ(static_cast<int64_t>(workers.size()), 1 + c.workers_added + c.workers_interrupted);
  // The allocator took the replacements (it loaded them) instead of
  // launching a second worker for each: its launches are far fewer than
  // the notices.
  EXPECT_LT(c.workers_added, c.workers_interrupted / 2) << c.workers_added;
  // With 20 s of lead, the worker under notice answered what it held.
  EXPECT_EQ(c.queries_lost_to_interruptions, 0);
  const Counters& total = sim->metrics().total;
  EXPECT_EQ(total.arrived, total.resolved());
  EXPECT_GT(static_cast<double>(total.on_time), 0.9 * static_cast<double>(total.arrived));
  EXPECT_TRUE(sim->CheckLiveState().ok()) << sim->CheckLiveState();

  // The same seed draws the same notices.
  std::unique_ptr<Simulator> again = RunMarkSpot("20");
  EXPECT_EQ(again->control_log(), log);
}

TEST(SpotTest, WithNoLeadWhatTheWorkerHeldIsLostAndCounted) {
  std::unique_ptr<Simulator> sim = RunMarkSpot("0");
  const ControlCounters& c = sim->control_counters();
  EXPECT_GE(c.workers_interrupted, 10);
  EXPECT_GT(c.queries_lost_to_interruptions, 0);
  EXPECT_LE(c.queries_lost_to_interruptions, sim->metrics().total.dropped);
}

TEST(SpotTest, BadInterruptionSettingsAreRefused) {
  for (const auto& [setting, says] : std::vector<std::pair<std::string, std::string>>{
           {"{mean_between_s: 0}", "simulation.interruptions.mean_between_s: must be > 0"},
           {"{mean_between_s: 60, lead_s: -1}", "simulation.interruptions.lead_s: must be >= 0"},
           {"{lead_s: 5}", "simulation.interruptions.mean_between_s"},
           {"{mean_between_s: 60, every: 1}", "simulation.interruptions"},
       }) {
    std::string yaml = kMarkSpot;
    yaml = Replace(yaml, "{mean_between_s: 30, lead_s: LEAD}", setting);
    auto e = ParseExperiment(yaml, ".");
    ASSERT_FALSE(e.ok()) << setting;
    EXPECT_NE(e.status().message().find(says), std::string::npos) << e.status().message();
  }
}

}  // namespace
}  // namespace maitre::sim
