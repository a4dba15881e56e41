// The right variant under load (docs/policies.md, "Variant
// selection" step 4 and "Model autoscaler", "Capacity under load"), in the
// managed simulator with the example zoo's fmnist-cnn profiles
// (policy/testing/zoo_profiles.h) on the default cluster, one cpu-1 and one
// cpu-2 worker, at a 20 ms objective and nothing loaded at the start.
// Capacity is the three cores on torch-opt: 3 x 38,269 = 114,807 qps.
//
// Before these rules a step from 10% to 90% of that capacity ended on
// opencv, opencv and torch-int8 (38,400 qps) with 57% of the queries
// violating the objective: selection loaded the quickest variants to start
// as the first ones saturated, and the autoscaler could switch none of
// them (a switch had to fit twice its cores during the load).
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "sim/experiment.h"
#include "sim/simulator.h"

namespace maitre::sim {
namespace {

// Point lists of policy/testing/zoo_profiles.h, as experiment YAML.
constexpr char kZoo[] = R"(
name: variant-capacity
cluster:
  workers: WORKERS
profiles:
  - {model: fmnist-cnn, variant: opencv, worker_type: TYPE, accuracy: 0.9066, load_ms: 1.699355,
     memory_mb: 4.324, points: [[1, 0.088871, 0.143892], [2, 0.16554, 0.215789],
     [4, 0.327302, 0.397612], [8, 0.640747, 0.792979], [16, 1.299042, 1.770976],
     [32, 2.584899, 3.140595], [64, 5.147805, 5.431057]]}
  - {model: fmnist-cnn, variant: torch-int8, worker_type: TYPE, accuracy: 0.9065,
     load_ms: 8.298292, memory_mb: 0.4418, points: [[1, 0.214506, 0.269679],
     [2, 0.282069, 0.351222], [4, 0.44183, 0.599313], [8, 0.776332, 0.877197],
     [16, 1.362731, 1.475592], [32, 2.541981, 3.442876], [64, 4.778398, 5.011499]]}
  - {model: fmnist-cnn, variant: torch, worker_type: TYPE, accuracy: 0.9066, load_ms: 16.51691,
     memory_mb: 0.4683, points: [[1, 0.187371, 0.265828], [2, 0.294588, 0.51261],
     [4, 0.448912, 0.635193], [8, 0.707775, 0.789317], [16, 1.316381, 1.516692],
     [32, 2.512055, 2.68966], [64, 4.682579, 5.124074]]}
  - {model: fmnist-cnn, variant: torch-opt, worker_type: TYPE, accuracy: 0.9066,
     load_ms: 11.11104, memory_mb: 0.6055, points: [[1, 0.109736, 0.225008],
     [2, 0.124431, 0.197437], [4, 0.163325, 0.209205], [8, 0.244712, 0.485643],
     [16, 0.422194, 0.506318], [32, 0.836183, 0.915894], [64, 1.689425, 1.917355]]}
apps:
  - {name: fashion, latency_ms: 20, models: [fmnist-cnn]}
trace:
  generator: piecewise
  schedule: SCHEDULE
  duration_s: DURATION
  seed: 1
policies:
  batching: {name: nexus, max_batch: 64}
  routing: selection
  model_autoscaler: MODEL
  cluster_autoscaler: off
)";

constexpr double kCapacityQps = 3 * 38269;

std::string Replace(std::string text, const std::string& key, const std::string& value) {
  for (size_t at = text.find(key); at != std::string::npos; at = text.find(key, at)) {
    text.replace(at, key.size(), value);
    at += value.size();
  }
  return text;
}

// The zoo's profiles on both types (cpu-1 and cpu-2 agree at small batches:
// docs/architecture.md, "Small batches on one thread").
std::string Text(const std::string& schedule, int duration_s, const std::string& model,
                 const std::string& workers) {
  std::string text = kZoo;
  const size_t begin = text.find("  - {model");
  const size_t end = text.find("apps:");
  const std::string one = text.substr(begin, end - begin);
  text.replace(begin, end - begin, Replace(one, "TYPE", "cpu-1") + Replace(one, "TYPE", "cpu-2"));
  text = Replace(text, "SCHEDULE", schedule);
  text = Replace(text, "DURATION", std::to_string(duration_s));
  text = Replace(text, "WORKERS", workers);
  return Replace(text, "MODEL", model);
}

std::unique_ptr<Simulator> Simulate(const std::string& schedule, int duration_s,
                                    const std::string& model = "infaas",
                                    const std::string& workers = "{cpu-1: 1, cpu-2: 1}") {
  auto e = ParseExperiment(Text(schedule, duration_s, model, workers), ".");
  EXPECT_TRUE(e.ok()) << e.status();
  if (!e.ok()) return nullptr;
  auto sim = BuildSimulator(*e);
  EXPECT_TRUE(sim.ok()) << sim.status();
  if (!sim.ok()) return nullptr;
  EXPECT_TRUE((*sim)->Run().ok());
  return *std::move(sim);
}

// Ready replicas by variant name, over the cluster.
std::map<std::string, int> ReadyByVariant(const Simulator& sim) {
  std::map<std::string, int> ready;
  for (const auto& i : sim.Instances()) {
    if (i.alive && i.ready > 0) ready[sim.setup().variants[i.variant].key.variant] += i.ready;
  }
  return ready;
}

std::string Log(const Simulator& sim) { return absl::StrJoin(sim.control_log(), "\n"); }

TEST(VariantCapacityTest, ALoadStepFrom10To90PercentEndsOnTheHighCapacityVariant) {
  const double low = 0.1 * kCapacityQps, high = 0.9 * kCapacityQps;
  auto sim = Simulate(
      absl::StrCat("[{at_s: 0, rate_qps: ", low, "}, {at_s: 30, rate_qps: ", high, "}]"), 60);
  ASSERT_NE(sim, nullptr);
  // Every replica serving at the end is torch-opt, one per core.
  EXPECT_EQ(ReadyByVariant(*sim), (std::map<std::string, int>{{"torch-opt", 3}})) << Log(*sim);
  // The first query loaded the quickest to start; what came after was chosen
  // for capacity by selection, and logged so. The autoscaler switched the
  // first worker to torch-opt 3 s in: 10% of the cluster's capacity is 92%
  // of opencv's, its worker's CPU showed it at its limit, and what it served
  // became its capacity (docs/policies.md, observed capacity at the CPU
  // limit), so the switch is for headroom; before that rule it came from
  // the capacity switch ("capacity under load").
  const ControlCounters& c = sim->control_counters();
  EXPECT_GE(c.loads_by_selection_for_capacity, 1) << Log(*sim);
  EXPECT_NE(Log(*sim).find("selection (load-and-serve): load fmnist-cnn:opencv"),
            std::string::npos);
  EXPECT_NE(Log(*sim).find("upgrade cpu-1-0 fmnist-cnn:torch-opt x1"), std::string::npos)
      << Log(*sim);
  // Once settled (from 5 s after the step), the load is served within the
  // objective: 90% of the capacity fits in it.
  const SimMetrics& m = sim->metrics();
  int64_t arrived = 0, violated = 0;
  for (size_t second = 35; second < m.per_second.size(); ++second) {
    arrived += m.per_second[second].arrived;
    violated += m.per_second[second].violations();
  }
  ASSERT_GT(arrived, 0);
  EXPECT_LT(static_cast<double>(violated) / arrived, 0.01);
}

TEST(VariantCapacityTest, OnTwoOneCoreWorkersTheStepEndsOnTorchOptToo) {
  // The local provider's layout on a 2-core host (one cpu-1 worker per
  // core): every switch is on a full one-core worker.
  const double capacity = 2 * 38269;
  auto sim = Simulate(absl::StrCat("[{at_s: 0, rate_qps: ", 0.1 * capacity,
                                   "}, {at_s: 30, rate_qps: ", 0.9 * capacity, "}]"),
                      60, "infaas", "{cpu-1: 2}");
  ASSERT_NE(sim, nullptr);
  EXPECT_EQ(ReadyByVariant(*sim), (std::map<std::string, int>{{"torch-opt", 2}})) << Log(*sim);
  EXPECT_LT(sim->metrics().total.violations(), sim->metrics().total.arrived / 100);
}

TEST(VariantCapacityTest, ALightLoadStaysOnTheQuickestVariant) {
  // 1% of the capacity keeps opencv's one replica 9% busy: below the
  // capacity switch's 25%, so nothing changes what light load gets today.
  auto sim = Simulate(absl::StrCat("[{at_s: 0, rate_qps: ", 0.01 * kCapacityQps, "}]"), 30);
  ASSERT_NE(sim, nullptr);
  EXPECT_EQ(ReadyByVariant(*sim), (std::map<std::string, int>{{"opencv", 1}})) << Log(*sim);
  EXPECT_EQ(sim->control_counters().capacity_moves, 0);
  EXPECT_EQ(sim->control_counters().loads_by_selection_for_capacity, 0);
}

TEST(VariantCapacityTest, HorizontalScalingAloneStaysOnTheQuickestVariant) {
  // The baseline that only replicates (no vertical move) never leaves opencv:
  // what the capacity rules are measured against.
  const double high = 0.9 * kCapacityQps;
  auto sim = Simulate(absl::StrCat("[{at_s: 0, rate_qps: ", 0.1 * kCapacityQps,
                                   "}, {at_s: 30, "
                                   "rate_qps: ",
                                   high, "}]"),
                      60, "horizontal");
  ASSERT_NE(sim, nullptr);
  EXPECT_EQ(ReadyByVariant(*sim).count("torch-opt"), 1u) << Log(*sim);  // selection's, under load
  EXPECT_GE(ReadyByVariant(*sim)["opencv"], 1) << Log(*sim);
}

}  // namespace
}  // namespace maitre::sim
