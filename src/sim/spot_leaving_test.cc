// A spot worker under an interruption notice in the simulator behaves as
// the controller's (control/leaving.h; docs/architecture.md, "The
// simulator's spot interruptions"): it takes its share of the queries under
// every router until max(1 s, the query's objective) before it stops, none
// after that, keeps its route weights, and the allocator, which is not shown
// it, sees what it is offered in Observation::leaving_qps.
#include <gtest/gtest.h>

#include <algorithm>
#include <mutex>
#include <string>
#include <vector>

#include "control/allocator.h"
#include "sim/experiment.h"
#include "sim/simulator.h"

namespace maitre::sim {
namespace {

// What a model round was shown.
struct Seen {
  Nanos now = 0;
  std::vector<std::string> workers;
  double leaving_qps = 0;  // app "a"'s
};
std::vector<Seen> g_seen;

// Loads nothing and gives every instance it is shown the same route weight
// (for the weighted router), recording what each model round saw.
class RecordingAllocator : public control::Allocator {
 public:
  absl::Status ModelRound(const control::Observation& o, control::ActionSink& sink) override {
    Seen seen{o.now, {}, 0};
    if (auto it = o.leaving_qps.find("a"); it != o.leaving_qps.end()) seen.leaving_qps = it->second;
    std::vector<control::RouteWeight> weights;
    for (const control::ObservedWorker& w : o.workers) {
      seen.workers.push_back(w.id);
      for (const control::ObservedInstance& inst : w.instances) {
        weights.push_back({w.id, inst.key, 1});
      }
    }
    sink.SetRouteWeights(weights);
    g_seen.push_back(std::move(seen));
    return absl::OkStatus();
  }
  absl::Status ClusterRound(const control::Observation&, control::ActionSink&) override {
    return absl::OkStatus();
  }
};

void AddRecordingAllocator() {
  static std::once_flag once;
  std::call_once(once, [] {
    ASSERT_TRUE(control::AddAllocator("leaving-recorder",
                                      [](const control::AllocatorOptions&)
                                          -> absl::StatusOr<std::unique_ptr<control::Allocator>> {
                                        return std::make_unique<RecordingAllocator>();
                                      })
                    .ok());
  });
}

// Two spot workers, each serving "fast" (1,066 qps at batch 16), under 400
// queries/s with a 2 s objective, so the leaving margin is the objective;
// notices drawn once a minute per worker on average, 10 s ahead (seed 1:
// spot-1's at 7.7 s, and no other before it stops). The replacement comes
// up empty and the allocator loads nothing, so the worker interrupted keeps
// its instance to the end, and the other one carries all after it.
constexpr char kTwoSpot[] = R"(
cluster:
  worker_types:
    - {name: spot, cores: 2, memory_mb: 4096, price_per_hour: 3.6, launch_s: 5, max_workers: 8,
       market: spot}
  workers: {spot: 2}
profiles:
  - {model: m, variant: fast, worker_type: spot, accuracy: 0.8, load_ms: 500, memory_mb: 100,
     points: [[1, 5, 5.5], [4, 10, 11], [16, 30, 33]]}
apps:
  - name: a
    latency_ms: 2000
    models: [m]
    instances: [{variant: "m:fast", worker_type: spot, worker: 0},
                {variant: "m:fast", worker_type: spot, worker: 1}]
trace: {generator: poisson, rate_qps: 400, duration_s: 40, seed: 5}
policies:
  batching: {name: nexus, max_batch: 16}
  routing: selection
  selection: {router: ROUTER, loads: false}
  allocator: leaving-recorder
  model_autoscaler: off
  cluster_autoscaler: off
simulation:
  seed: 1
  interruptions: {mean_between_s: 60, lead_s: 10}
)";

class SpotLeavingTest : public ::testing::TestWithParam<std::string> {};

TEST_P(SpotLeavingTest, ALeavingWorkerTakesItsShareUntilTheMarginAndTheAllocatorSeesIt) {
  AddRecordingAllocator();
  g_seen.clear();
  std::string yaml = kTwoSpot;
  yaml.replace(yaml.find("ROUTER"), 6, GetParam());
  auto e = ParseExperiment(yaml, ".");
  ASSERT_TRUE(e.ok()) << e.status();
  auto built = BuildSimulator(*e);
  ASSERT_TRUE(built.ok()) << built.status();
  Simulator& sim = **built;

  // Stop halfway through the first notice's lead: the leaving worker is in
  // the selection policy's view, not accepting.
  const auto first = [&sim]() -> int {
    const auto workers = sim.Workers();
    for (size_t w = 0; w < 2; ++w) {
      if (workers[w].stops_at.has_value()) return static_cast<int>(w);
    }
    return -1;
  };
  while (first() < 0 && !sim.finished()) {
    ASSERT_TRUE(sim.RunUntil(sim.now() + 100 * kMillisecond).ok());
  }
  const int w = first();
  ASSERT_GE(w, 0) << "no notice drawn";
  const Nanos stops_at = *sim.Workers()[w].stops_at;
  const Nanos notice = stops_at - 10 * kSecond;
  ASSERT_LT(stops_at + 2 * kSecond, 40 * kSecond) << "the notice comes too late to test";
  ASSERT_TRUE(sim.RunUntil(notice + 5 * kSecond).ok());
  EXPECT_TRUE(sim.CheckLiveState().ok()) << sim.CheckLiveState();
  ASSERT_TRUE(sim.Run().ok());
  EXPECT_TRUE(sim.CheckLiveState().ok()) << sim.CheckLiveState();

  const Simulator::WorkerInfo leaving = sim.Workers()[w];
  // Its share of 400 queries/s for the 8 s it serves: far more than a few.
  EXPECT_GT(leaving.queries_under_notice, 400) << GetParam();
  // None in the last 2 s (the objective, above the 1 s floor), and it
  // served until close to that.
  EXPECT_LE(leaving.last_query_under_notice, stops_at - 2 * kSecond);
  EXPECT_GT(leaving.last_query_under_notice, stops_at - 2 * kSecond - 200 * kMillisecond);
  // So what it held was answered before it stopped.
  EXPECT_EQ(sim.control_counters().queries_lost_to_interruptions, 0);

  // The allocator was not shown it after the notice, and saw its demand:
  // its share of 400 queries/s, about half on average (the infaas router
  // sends it all of one second's queries and none of the next, as its
  // reported utilisation flips).
  const std::string id = "spot-" + std::to_string(w);
  int rounds = 0;
  double leaving_qps = 0;
  for (const Seen& s : g_seen) {
    if (s.now <= notice + kSecond || s.now >= stops_at - 2 * kSecond) continue;
    ++rounds;
    leaving_qps += s.leaving_qps;
    EXPECT_EQ(std::count(s.workers.begin(), s.workers.end(), id), 0) << "at " << s.now;
  }
  ASSERT_GE(rounds, 5);
  EXPECT_GT(leaving_qps / rounds, 150);
  EXPECT_LT(leaving_qps / rounds, 250);
  for (const Seen& s : g_seen) {
    if (s.now < notice) EXPECT_EQ(s.leaving_qps, 0) << "at " << ToSeconds(s.now) << " s";
  }
}

INSTANTIATE_TEST_SUITE_P(EveryRouter, SpotLeavingTest,
                         ::testing::Values("infaas", "weighted", "uniform"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace maitre::sim
