// The seams are real (docs/architecture.md, "One control plane"): a second,
// trivial query router and a second, trivial allocator, both test-only, are
// added by name and then serve, unchanged, in the simulator and in the
// controller.
//  - "fewest-waiting" sends a query to the instance of its app with the
//    fewest queries waiting, whatever its variant;
//  - "one-each" loads one replica of each model's first variant on every
//    worker that has none, and never touches workers.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <mutex>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "control/allocator.h"
#include "control/query_router.h"
#include "controller/models/catalog.h"
#include "controller/dataplane/cluster.h"
#include "controller/dataplane/placer.h"
#include "controller/registry/registry.h"
#include "controller/scaling/scaling_loop.h"
#include "controller/dataplane/selection_catalogue.h"
#include "core/work_queue.h"
#include "sim/experiment.h"
#include "sim/simulator.h"
#include "testing/fake_worker_api.h"
#include "testing/wait.h"

namespace maitre {
namespace {

std::atomic<int64_t> g_routed{0};
std::atomic<int64_t> g_allocator_rounds{0};

class FewestWaitingRouter : public control::QueryRouter {
 public:
  policy::SelectionDecision Route(const policy::SelectionIndex& index,
                                  const policy::LiveState& live,
                                  const policy::SelectionRequest& request) const override {
    ++g_routed;
    policy::SelectionDecision d;
    d.outcome = policy::SelectionOutcome::kUnavailable;
    int32_t fewest = 0;
    for (policy::InstanceId i : live.instances_of_app(request.app)) {
      const policy::LiveInstance& inst = live.instance(i);
      if (inst.state == policy::InstanceState::kInactive) continue;
      if (d.instance != policy::kNoId && inst.waiting >= fewest) continue;
      d.outcome = policy::SelectionOutcome::kUseInstance;
      d.instance = i;
      d.serving = index.FindOption(inst.variant, live.worker(inst.worker).type);
      fewest = inst.waiting;
    }
    return d;
  }
};

class OneEachAllocator : public control::Allocator {
 public:
  absl::Status ModelRound(const control::Observation& o, control::ActionSink& sink) override {
    ++g_allocator_rounds;
    for (const control::ObservedWorker& w : o.workers) {
      if (w.starting) continue;
      for (const control::ModelOption& m : o.models) {
        bool held = false;
        for (const control::ObservedInstance& inst : w.instances) held |= inst.key.model == m.name;
        for (const control::VariantOption& v : m.variants) {
          if (held || v.worker_type != w.type) continue;
          sink.Load(w.id, {m.name, v.variant}, 1, {}, nullptr);
          sink.Record({o.now, "one-each", w.id, m.name + ":" + v.variant, 1, "none held"});
          held = true;
        }
      }
    }
    return absl::OkStatus();
  }
  absl::Status ClusterRound(const control::Observation&, control::ActionSink&) override {
    return absl::OkStatus();
  }
};

void AddTestSeams() {
  static std::once_flag once;
  std::call_once(once, [] {
    ASSERT_TRUE(control::AddQueryRouter("fewest-waiting",
                                        [](const policy::SelectionOptions&)
                                            -> absl::StatusOr<std::unique_ptr<control::QueryRouter>> {
                                          return std::make_unique<FewestWaitingRouter>();
                                        })
                    .ok());
    ASSERT_TRUE(control::AddAllocator("one-each",
                                      [](const control::AllocatorOptions&)
                                          -> absl::StatusOr<std::unique_ptr<control::Allocator>> {
                                        return std::make_unique<OneEachAllocator>();
                                      })
                    .ok());
  });
}

// Two workers and nothing loaded: until the allocator loads, nothing serves
// (selection itself loads nothing).
constexpr char kScenario[] = R"(
name: seams
cluster:
  worker_types:
    - {name: small, cores: 2, memory_mb: 4096, price_per_hour: 3.6}
  workers: {small: 2}
profiles:
  - {model: m, variant: fast, worker_type: small, accuracy: 0.8, load_ms: 500, memory_mb: 100,
     points: [[1, 5, 5.5], [4, 10, 11], [16, 30, 33]]}
apps:
  - {name: a, latency_ms: 100, models: [m]}
trace:
  generator: poisson
  rate_qps: 200
  duration_s: 30
  seed: 1
policies:
  batching: {name: nexus, max_batch: 16}
  routing: selection
  selection: {router: fewest-waiting, loads: false}
  allocator: one-each
)";

TEST(ControlSeamsTest, ATestOnlyRouterAndAllocatorServeInTheSimulator) {
  AddTestSeams();
  g_routed = 0;
  g_allocator_rounds = 0;
  auto experiment = sim::ParseExperiment(kScenario, ".");
  ASSERT_TRUE(experiment.ok()) << experiment.status();
  auto simulator = sim::BuildSimulator(*experiment);
  ASSERT_TRUE(simulator.ok()) << simulator.status();
  ASSERT_TRUE((*simulator)->Run().ok());
  const sim::Counters& c = (*simulator)->metrics().total;
  // Nothing serves for the first second, until the first round's loads end
  // (1.5 s); the rest is served, spread over both workers.
  EXPECT_GT(c.on_time, c.arrived * 9 / 10);
  EXPECT_EQ(g_routed.load(), c.arrived);
  EXPECT_GE(g_allocator_rounds.load(), 29);
  std::set<int32_t> workers;
  for (const auto& inst : (*simulator)->Instances()) {
    if (inst.alive) workers.insert(inst.worker);
  }
  EXPECT_EQ(workers.size(), 2u);
}

// Fake workers that load at once.
class InstantWorker : public testing::FakeWorkerApi {
 public:
  explicit InstantWorker(std::atomic<int>* loads) : loads_(loads) {}
  absl::StatusOr<controller::LoadResult> Load(const VariantSpec&, int,
                                              const std::vector<LatencyPoint>&, int32_t) override {
    ++*loads_;
    return controller::LoadResult{};
  }
  absl::Status Unload(const VariantKey&) override { return absl::OkStatus(); }

 private:
  std::atomic<int>* loads_;
};

TEST(ControlSeamsTest, ATestOnlyRouterAndAllocatorServeInTheController) {
  AddTestSeams();
  g_routed = 0;
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    absl::StrCat("control_seams_test_", ::getpid());
  std::filesystem::remove_all(dir);
  auto registry = registry::Registry::Open({(dir / "registry.db").string()});
  ASSERT_TRUE(registry.ok()) << registry.status();
  ASSERT_TRUE((*registry)->PutApp({"a", {}}).ok());
  registry::ModelRecord model;
  model.app = "a";
  model.name = "m";
  model.spec.inputs = {{"x", DataType::kFp32, {-1, 4}}};
  model.spec.outputs = {{"y", DataType::kFp32, {-1, 2}}};
  model.source_blob = std::string(64, 'a');
  registry::VariantRecord variant;
  variant.key = {"m", "fast"};
  variant.runtime = Runtime::kOpenCv;
  variant.blob = model.source_blob;
  variant.accuracy = 0.8;
  variant.state = registry::VariantState::kReady;
  ASSERT_TRUE((*registry)->RegisterModel(model, {variant}).ok());
  auto profile = Profile::Create({{1, 5, 5.5}, {16, 30, 33}}, 500, 100);
  ASSERT_TRUE(profile.ok());
  ASSERT_TRUE((*registry)->PutProfile({variant.key, "small", 0.8, *profile}).ok());
  controller::Catalog catalog;
  ASSERT_TRUE(catalog.Reload(**registry).ok());

  ManualClock clock(kSecond);
  std::atomic<int> loads{0};
  controller::Cluster::Options cluster_options;
  cluster_options.types = WorkerTypeTable({{"small", 2, 4096, 3.6}});
  cluster_options.clock = &clock;
  cluster_options.connect = [&loads](const std::string&, const std::string&) {
    return std::unique_ptr<controller::WorkerApi>(new InstantWorker(&loads));
  };
  auto router = control::CreateQueryRouter("fewest-waiting", {});
  ASSERT_TRUE(router.ok());
  cluster_options.router = *std::move(router);
  controller::Cluster cluster(cluster_options);
  auto index = controller::BuildSelectionIndex(*catalog.Get(), cluster_options.types, nullptr);
  ASSERT_TRUE(index.ok()) << index.status();
  const policy::AppId app = index->FindApp("a");
  cluster.SetSelectionIndex(std::make_shared<const policy::SelectionIndex>(*std::move(index)),
                            controller::ModelSloMs(*catalog.Get()));
  std::vector<std::string> workers;
  for (int i = 0; i < 2; ++i) {
    auto id = cluster.AddWorker("small", absl::StrCat("fake:", i), 0, "");
    ASSERT_TRUE(id.ok());
    workers.push_back(*id);
  }
  {
    WorkQueue control(1);
    controller::Placer::Options placer_options;
    placer_options.cluster = &cluster;
    placer_options.control = &control;
    placer_options.clock = &clock;
    controller::Placer placer(placer_options);
    controller::ScalingLoop::Options loop_options;
    loop_options.catalog = &catalog;
    loop_options.cluster = &cluster;
    loop_options.placer = &placer;
    loop_options.clock = &clock;
    loop_options.allocator = "one-each";
    auto loop = controller::ScalingLoop::Create(loop_options);
    ASSERT_TRUE(loop.ok()) << loop.status();
    (*loop)->RunModelRound();
    // Both loads finished as the cluster sees them, not only begun on the
    // fake workers: the control queue's last task uses the placer, which
    // goes out of scope below before the queue does.
    ASSERT_TRUE(testing::WaitUntil(
        [&] {
          int ready = 0;
          for (const controller::WorkerView& w : cluster.Snapshot()) {
            for (const controller::InstanceView& i : w.instances) {
              ready += i.phase == controller::InstancePhase::kReady;
            }
          }
          return ready == 2;
        },
        60));
    EXPECT_EQ(loads.load(), 2);
  }

  // Each query goes where the router says: the instance with fewer waiting,
  // so two queries in flight land on the two workers.
  std::set<std::string> used;
  for (int i = 0; i < 2; ++i) {
    policy::SelectionRequest request;
    request.app = app;
    request.now = clock.Now();
    controller::LoadWaiter waiter;
    controller::SelectionResult result = cluster.Select(request, waiter);
    ASSERT_TRUE(result.route.has_value()) << result.explanation;
    used.insert(result.route->worker_id);
  }
  EXPECT_EQ(used, std::set<std::string>(workers.begin(), workers.end()));
  EXPECT_EQ(g_routed.load(), 2);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace maitre
