// Same decisions in both worlds (docs/architecture.md, "One control plane").
// A simulated cluster runs a bursty scenario (loads, upgrades, refusals,
// workers added and retired); every round, the observation the simulator
// built and the decisions the allocator made are recorded. The same rounds
// are then replayed to the controller's ScalingLoop: fake workers behind
// WorkerApi report exactly what the simulated ones reported, the refused
// rows go through RefusedDemand, retired workers are lost from the Cluster,
// and the controller's own loads and unloads change its cluster as they
// would a real one. The decisions the controller makes must be the
// simulator's, round by round; a controller configured differently on
// purpose must not match. The same holds for the Proteus allocator on a
// fixed cluster, with the weighted router in both worlds, and for the MArk
// allocator provisioning workers.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/strings/str_replace.h"
#include "control/allocator.h"
#include "control/query_router.h"
#include "controller/models/catalog.h"
#include "controller/dataplane/cluster.h"
#include "controller/dataplane/placer.h"
#include "controller/dataplane/refused_demand.h"
#include "controller/registry/registry.h"
#include "controller/scaling/scaling_loop.h"
#include "controller/dataplane/selection_catalogue.h"
#include "core/work_queue.h"
#include "sim/experiment.h"
#include "sim/simulator.h"
#include "testing/fake_worker_api.h"

namespace maitre {
namespace {

// ---- recording what an allocator sees and decides ----

struct Round {
  bool model = true;  // a model round, else a cluster round
  control::Observation observation;
  std::vector<control::Decision> decisions;
};

class RecordingSink : public control::ActionSink {
 public:
  explicit RecordingSink(control::ActionSink& inner) : inner_(inner) {}
  void Load(const std::string& worker, const VariantKey& key, int add,
            std::vector<std::pair<VariantKey, int>> then_remove,
            std::function<void()> done) override {
    inner_.Load(worker, key, add, std::move(then_remove), std::move(done));
  }
  void Remove(const std::string& worker, const VariantKey& key, int replicas) override {
    inner_.Remove(worker, key, replicas);
  }
  void AddWorker(const std::string& type) override { inner_.AddWorker(type); }
  bool RetireWorker(const std::string& worker) override { return inner_.RetireWorker(worker); }
  void SetRouteWeights(std::vector<control::RouteWeight> weights) override {
    inner_.SetRouteWeights(std::move(weights));
  }
  void Record(const control::Decision& decision) override {
    decisions.push_back(decision);
    inner_.Record(decision);
  }
  std::vector<control::Decision> decisions;

 private:
  control::ActionSink& inner_;
};

// An allocator, recording each round into `log`.
class RecordingAllocator : public control::Allocator {
 public:
  RecordingAllocator(std::unique_ptr<control::Allocator> inner, std::vector<Round>* log)
      : inner_(std::move(inner)), log_(log) {}
  absl::Status ModelRound(const control::Observation& o, control::ActionSink& sink) override {
    return Run(true, o, sink);
  }
  absl::Status ClusterRound(const control::Observation& o, control::ActionSink& sink) override {
    return Run(false, o, sink);
  }

 private:
  absl::Status Run(bool model, const control::Observation& o, control::ActionSink& sink) {
    RecordingSink recording(sink);
    absl::Status status = model ? inner_->ModelRound(o, recording) : inner_->ClusterRound(o, recording);
    log_->push_back({model, o, recording.decisions});
    return status;
  }
  std::unique_ptr<control::Allocator> inner_;
  std::vector<Round>* log_;
};

std::vector<Round> g_sim_rounds;
std::vector<Round> g_controller_rounds;

// "recorded-sim-NAME" and "recorded-controller-NAME" wrap the built-in
// allocator NAME (infaas, proteus, mark).
void AddRecordingAllocators() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (const char* inner_name : {"infaas", "proteus", "mark"}) {
      for (auto [world, log] : {std::pair{"sim", &g_sim_rounds},
                                std::pair{"controller", &g_controller_rounds}}) {
        absl::Status added = control::AddAllocator(
            absl::StrCat("recorded-", world, "-", inner_name),
            [log = log, inner_name = std::string(inner_name)](
                const control::AllocatorOptions& options)
                -> absl::StatusOr<std::unique_ptr<control::Allocator>> {
              auto inner = control::CreateAllocator(inner_name, options);
              if (!inner.ok()) return inner.status();
              return std::unique_ptr<control::Allocator>(
                  new RecordingAllocator(*std::move(inner), log));
            });
        ASSERT_TRUE(added.ok()) << added;
      }
    }
  });
}

// ---- the simulated world ----

// Two variants of one model on one worker type: "slow" (64 qps per replica
// at the 100 ms objective) and "fast" (533 qps); loads and launches take no
// time, so that every move has ended by the next round in both worlds. The
// second worker (added at 28 s) dies at 31.5 s with what it holds.
constexpr char kScenario[] = R"(
name: worlds
cluster:
  worker_types:
    - {name: small, cores: 2, memory_mb: 4096, price_per_hour: 3.6, launch_s: 0, max_workers: 3}
  workers: {small: 1}
profiles:
  - {model: m, variant: slow, worker_type: small, accuracy: 0.8, load_ms: 0, memory_mb: 100,
     points: [[1, 20, 22], [4, 60, 66]]}
  - {model: m, variant: fast, worker_type: small, accuracy: 0.8, load_ms: 0, memory_mb: 100,
     points: [[1, 5, 5.5], [4, 10, 11], [16, 30, 33]]}
apps:
  - name: a
    latency_ms: 100
    models: [m]
    instances: [{variant: "m:slow", worker_type: small}]
trace:
  generator: mmpp
  rates_qps: [30, 2400]
  mean_dwell_s: [25, 6]
  duration_s: 150
  seed: 5
policies:
  batching: {name: nexus, max_batch: 16}
  routing: selection
  allocator: recorded-sim-infaas
  model_autoscaler: infaas
  cluster_autoscaler: {name: on, idle_cooldown_s: 6, add_cooldown_s: 4}
  selection: {loads: false}
simulation:
  worker_losses: [{worker: small-1, at_s: 31.5}]
)";

// Proteus on a fixed cluster of three workers: the same two variants, a
// demand that rises past what "slow" carries on every worker and falls back,
// so the plan lowers accuracy and raises it again ("fast" is made the less
// accurate here).
constexpr char kProteusScenario[] = R"(
name: worlds-proteus
cluster:
  worker_types:
    - {name: small, cores: 2, memory_mb: 4096, price_per_hour: 3.6, launch_s: 0, max_workers: 3}
  workers: {small: 3}
profiles:
  - {model: m, variant: slow, worker_type: small, accuracy: 0.9, load_ms: 0, memory_mb: 100,
     points: [[1, 20, 22], [4, 60, 66]]}
  - {model: m, variant: fast, worker_type: small, accuracy: 0.8, load_ms: 0, memory_mb: 100,
     points: [[1, 5, 5.5], [4, 10, 11], [16, 30, 33]]}
apps:
  - name: a
    latency_ms: 100
    models: [m]
trace:
  generator: piecewise
  schedule: [{at_s: 0, rate_qps: 40}, {at_s: 20, rate_qps: 900}, {at_s: 50, rate_qps: 60}]
  duration_s: 80
  seed: 3
policies:
  batching: {name: proteus, max_batch: 16}
  routing: selection
  selection: {router: weighted}
  allocator: {name: recorded-sim-proteus, period_s: 30}
  model_autoscaler: off
  cluster_autoscaler: off
)";

// MArk provisioning a cluster that starts with one worker holding the slow
// variant: the demand steps up past one worker and back down, in units of
// 10 s, with 20 s billing blocks, so that within two minutes it launches,
// loads "fast" everywhere, drains and retires.
constexpr char kMarkScenario[] = R"(
name: worlds-mark
cluster:
  worker_types:
    - {name: small, cores: 2, memory_mb: 4096, price_per_hour: 3.6, launch_s: 0, billing_s: 20,
       max_workers: 4}
  workers: {small: 1}
profiles:
  - {model: m, variant: slow, worker_type: small, accuracy: 0.8, load_ms: 0, memory_mb: 100,
     points: [[1, 20, 22], [4, 60, 66]]}
  - {model: m, variant: fast, worker_type: small, accuracy: 0.8, load_ms: 0, memory_mb: 100,
     points: [[1, 5, 5.5], [4, 10, 11], [16, 30, 33]]}
apps:
  - name: a
    latency_ms: 100
    models: [m]
    instances: [{variant: "m:slow", worker_type: small}]
trace:
  generator: piecewise
  schedule: [{at_s: 0, rate_qps: 300}, {at_s: 20, rate_qps: 2500}, {at_s: 60, rate_qps: 200}]
  duration_s: 120
  seed: 4
policies:
  batching: {name: nexus, max_batch: 16}
  routing: selection
  selection: {router: weighted}
  allocator: {name: recorded-sim-mark, predictor: last, unit_s: 10, horizon_units: 6,
              sample_s: 2, cool_down_s: 10, release_margin_s: 4}
  model_autoscaler: off
  cluster_autoscaler: on
)";

// ---- the controller's world ----

// A worker that does what it is asked at once, once the test lets it: a
// load the model round starts must still be under way when the cluster round
// of the same instant looks, as in the simulator.
struct Gate {
  absl::Mutex mu;
  bool open = false;
  int loads = 0;
  int unloads = 0;
};

class FakeWorker : public testing::FakeWorkerApi {
 public:
  explicit FakeWorker(Gate* gate) : gate_(gate) {}
  absl::StatusOr<controller::LoadResult> Load(const VariantSpec&, int,
                                              const std::vector<LatencyPoint>&, int32_t) override {
    absl::MutexLock lock(&gate_->mu);
    gate_->mu.Await(absl::Condition(&gate_->open));
    ++gate_->loads;
    return controller::LoadResult{};
  }
  absl::Status Unload(const VariantKey&) override {
    absl::MutexLock lock(&gate_->mu);
    ++gate_->unloads;
    return absl::OkStatus();
  }

 private:
  Gate* gate_;
};

// Workers asked for join at once; retired ones are lost from the cluster.
class FakeProvider : public controller::WorkerProvider {
 public:
  void SetDesired(const WorkerType& type, int count) override {
    while (desired_[type.name] < count) {
      ++desired_[type.name];
      joining.push_back(type.name);
    }
  }
  int Desired(const std::string& type) const override {
    auto it = desired_.find(type);
    return it != desired_.end() ? it->second : 0;
  }
  bool Retire(const std::string& worker_id) override {
    retired.push_back(worker_id);
    return true;
  }
  std::map<std::string, int> Starting() const override { return {}; }
  absl::Status Interrupt(const std::string&, Nanos) override {
    return absl::FailedPreconditionError("these tests interrupt no worker");
  }
  void OnEvent(std::function<void(const controller::WorkerEvent&)>) override {}  // none here

  std::vector<std::string> joining;  // types asked for since the test last looked
  std::vector<std::string> retired;  // worker ids

 private:
  std::map<std::string, int> desired_;
};

class ControllerWorld {
 public:
  ControllerWorld(const sim::SimulationSetup& setup, const std::string& allocator,
                  const std::string& model_autoscaler)
      : dir_(std::filesystem::temp_directory_path() /
             absl::StrCat("control_worlds_test_", ::getpid())) {
    std::filesystem::remove_all(dir_);
    auto registry = registry::Registry::Open({(dir_ / "registry.db").string()});
    EXPECT_TRUE(registry.ok()) << registry.status();
    registry_ = *std::move(registry);
    const sim::SimApp& app = setup.apps[0];
    registry::AppRecord app_record{app.name, {}};
    app_record.defaults.latency_ms = ToMillis(app.latency);
    app_record.max_accuracy_drop = app.max_accuracy_drop;
    EXPECT_TRUE(registry_->PutApp(app_record).ok());
    registry::ModelRecord model;
    model.app = app.name;
    model.name = "m";
    model.spec.inputs = {{"x", DataType::kFp32, {-1, 4}}};
    model.spec.outputs = {{"y", DataType::kFp32, {-1, 2}}};
    model.source_blob = std::string(64, 'a');
    std::vector<registry::VariantRecord> variants;
    for (const sim::SimVariant& v : setup.variants) {
      registry::VariantRecord r;
      r.key = v.key;
      r.runtime = Runtime::kOpenCv;
      r.blob = model.source_blob;
      r.accuracy = v.accuracy;
      r.state = registry::VariantState::kReady;
      variants.push_back(r);
    }
    EXPECT_TRUE(registry_->RegisterModel(model, variants).ok());
    for (const sim::SimVariant& v : setup.variants) {
      EXPECT_TRUE(registry_
                      ->PutProfile({v.key, setup.worker_types[v.worker_type].type.name,
                                    v.accuracy, v.profile})
                      .ok());
    }
    EXPECT_TRUE(catalog_.Reload(*registry_).ok());

    std::vector<WorkerType> types;
    for (const sim::SimWorkerType& t : setup.worker_types) types.push_back(t.type);
    controller::Cluster::Options cluster;
    cluster.types = WorkerTypeTable(types);
    cluster.clock = &clock_;
    cluster.connect = [this](const std::string&, const std::string&) {
      return std::unique_ptr<controller::WorkerApi>(new FakeWorker(&gate_));
    };
    auto router = control::CreateQueryRouter(setup.control.router, {});
    EXPECT_TRUE(router.ok()) << router.status();
    cluster.router = *std::move(router);
    cluster_ = std::make_unique<controller::Cluster>(cluster);
    auto index = controller::BuildSelectionIndex(*catalog_.Get(), cluster.types, nullptr);
    EXPECT_TRUE(index.ok()) << index.status();
    cluster_->SetSelectionIndex(std::make_shared<const policy::SelectionIndex>(*std::move(index)),
                                controller::ModelSloMs(*catalog_.Get()));
    controller::Placer::Options placer;
    placer.cluster = cluster_.get();
    placer.control = &control_;
    placer.clock = &clock_;
    placer_ = std::make_unique<controller::Placer>(placer);

    controller::ScalingLoop::Options loop;
    loop.catalog = &catalog_;
    loop.cluster = cluster_.get();
    loop.placer = placer_.get();
    loop.provider = &provider_;
    loop.refused = &refused_;
    loop.service_level = &service_level_;
    loop.clock = &clock_;
    loop.allocator = allocator;
    control::AllocatorOptions& a = loop.allocator_options;
    a.proteus = setup.control.proteus;
    a.mark = setup.control.mark;
    for (const sim::SimWorkerType& t : setup.worker_types) {
      a.mark.launch_time.emplace(t.type.name, t.launch_delay);
    }
    auto scaling = control::ParseModelScaling(model_autoscaler);
    EXPECT_TRUE(scaling.ok());
    a.model_scaling = *scaling;
    a.model = setup.control.model_autoscaler;
    a.cluster = setup.control.cluster_autoscaler;
    for (const sim::SimWorkerType& t : setup.worker_types) a.max_workers[t.type.name] = t.max_workers;
    auto created = controller::ScalingLoop::Create(loop);
    EXPECT_TRUE(created.ok()) << created.status();
    loop_ = *std::move(created);
  }

  ~ControllerWorld() {
    loop_.reset();
    {
      absl::MutexLock lock(&gate_.mu);
      gate_.open = true;
    }
    std::filesystem::remove_all(dir_);
  }

  // Replays one recorded round: the world is brought to what the simulator
  // reported (a model round's reports come first at each instant), then the
  // same round runs here.
  void Replay(const Round& round, bool first_at_this_instant) {
    const control::Observation& o = round.observation;
    if (first_at_this_instant) {
      clock_.Set(o.now);
      SyncWorkers(o);
      Report(o);
    }
    if (round.model) {
      for (const auto& [app, rows] : o.refused_rows) refused_.Add(app, rows);
      for (const auto& [app, count] : o.service) {
        for (int64_t q = 0; q < count.answered; ++q) service_level_.Add(app, q < count.within);
      }
      loop_->RunModelRound();
    } else {
      loop_->RunClusterRound();
    }
  }

  // After the rounds of one instant: the moves they started end, and the
  // workers asked for join.
  void Settle() {
    {
      absl::MutexLock lock(&gate_.mu);
      gate_.open = true;
    }
    // The control queue runs one task at a time, in order: once a task
    // posted now has run, every load before it has ended and told its
    // waiters; the loads' make-before-break removals may have posted more.
    do {
      absl::Notification ran;
      control_.Post([&ran] { ran.Notify(); });
      ran.WaitForNotification();
    } while (control_.pending() > 0);
    {
      absl::MutexLock lock(&gate_.mu);
      gate_.open = false;
    }
    for (const std::string& type : provider_.joining) {
      auto id = cluster_->AddWorker(type, absl::StrCat("fake:", next_address_++), 0, "");
      ASSERT_TRUE(id.ok()) << id.status();
      unmapped_.push_back(*id);
    }
    provider_.joining.clear();
    for (const std::string& id : provider_.retired) {
      cluster_->RemoveWorker(id, "retired");
      sim_id_.erase(id);
    }
    provider_.retired.clear();
  }

  // The simulator's name for a controller worker, and a text with the
  // controller's names in it (a reason) in the simulator's.
  std::string SimName(const std::string& id) const {
    auto it = ever_.find(id);
    return it != ever_.end() ? it->second : id;
  }
  std::string SimNames(std::string text) const {
    // Longest ids first, so that "w1" does not match inside "w12".
    for (auto it = ever_.rbegin(); it != ever_.rend(); ++it) {
      text = absl::StrReplaceAll(text, {{it->first, it->second}});
    }
    return text;
  }

 private:
  // Workers the simulator has and the controller lacks join (the first
  // ones, and any whose join the test missed); workers it no longer has are
  // lost.
  void SyncWorkers(const control::Observation& o) {
    std::set<std::string> present;
    for (const control::ObservedWorker& w : o.workers) {
      if (w.starting) continue;
      present.insert(w.id);
      if (ControllerId(w.id).empty()) {
        std::string id;
        if (!unmapped_.empty()) {
          id = unmapped_.front();
          unmapped_.erase(unmapped_.begin());
        } else {
          auto added = cluster_->AddWorker(w.type, absl::StrCat("fake:", next_address_++), 0, "");
          ASSERT_TRUE(added.ok());
          id = *added;
        }
        sim_id_[id] = w.id;
        ever_[id] = w.id;
        // Its instances at the start were loaded before anything ran.
        for (const control::ObservedInstance& inst : w.instances) {
          ASSERT_TRUE(cluster_->BeginLoad(id, inst.key, nullptr, inst.ready).ok());
          cluster_->FinishLoad(id, inst.key, absl::OkStatus());
        }
      }
    }
    for (auto it = sim_id_.begin(); it != sim_id_.end();) {
      if (present.count(it->second) == 0) {
        cluster_->RemoveWorker(it->first, "lost");
        it = sim_id_.erase(it);
      } else {
        ++it;
      }
    }
  }

  std::string ControllerId(const std::string& sim_name) const {
    for (const auto& [id, name] : sim_id_) {
      if (name == sim_name) return id;
    }
    return "";
  }

  void Report(const control::Observation& o) {
    for (const control::ObservedWorker& w : o.workers) {
      const std::string id = ControllerId(w.id);
      if (w.starting || id.empty()) continue;
      controller::WorkerReport report;
      report.worker_id = id;
      report.cpu_utilisation = w.cpu_utilisation;
      report.memory_mb = w.memory_used_mb;
      for (const control::ObservedInstance& inst : w.instances) {
        if (!inst.takes_queries || inst.ready == 0) continue;
        controller::InstanceStats stats;
        stats.replicas = inst.ready;
        stats.queue_length = inst.queue_length;
        stats.arrival_qps = inst.arrival_qps;
        stats.served_qps = inst.served_qps;
        stats.mean_batch = inst.mean_batch;
        stats.compute_p50_ms = inst.compute_p50_ms;
        report.instances.push_back({inst.key, stats});
      }
      cluster_->ApplyReport(report);
    }
  }

  std::filesystem::path dir_;
  ManualClock clock_{0};
  Gate gate_;
  std::unique_ptr<registry::Registry> registry_;
  controller::Catalog catalog_;
  std::unique_ptr<controller::Cluster> cluster_;
  WorkQueue control_{1};
  std::unique_ptr<controller::Placer> placer_;
  FakeProvider provider_;
  controller::RefusedDemand refused_;
  controller::ServiceLevel service_level_;
  std::unique_ptr<controller::ScalingLoop> loop_;
  std::map<std::string, std::string> sim_id_;  // controller id -> simulator name
  std::map<std::string, std::string, std::greater<>> ever_;  // the same, gone ones too
  std::vector<std::string> unmapped_;          // joined, not yet seen by the simulator
  int next_address_ = 1;
};

// ---- comparing ----

// One round's decisions, in the simulator's worker names, as sorted lines
// (the order within a round follows the worker order, which the two worlds
// name differently).
std::vector<std::string> Lines(const Round& round, const ControllerWorld* world = nullptr) {
  std::vector<std::string> lines;
  for (control::Decision d : round.decisions) {
    if (world != nullptr) {
      if (d.kind != "add-worker") d.worker = world->SimName(d.worker);
      if (!d.for_worker.empty()) d.for_worker = world->SimName(d.for_worker);
      d.reason = world->SimNames(d.reason);
    }
    // A plan's solve time is the one thing that differs between runs.
    if (size_t solved = d.reason.find(", solved in "); solved != std::string::npos) {
      d.reason.resize(solved);
    }
    lines.push_back(absl::StrCat(ToSeconds(d.at), "s ", control::DecisionLine(d)));
  }
  std::sort(lines.begin(), lines.end());
  return lines;
}

struct Replayed {
  std::vector<Round> sim;
  std::vector<Round> controller;
  std::vector<std::string> sim_names;  // per controller round, resolved at the time
  std::vector<std::vector<std::string>> controller_lines;
  int64_t workers_lost = 0;  // in the simulator
};

Replayed RunBoth(const char* scenario, const std::string& controller_allocator,
                 const std::string& controller_model_autoscaler) {
  AddRecordingAllocators();
  g_sim_rounds.clear();
  g_controller_rounds.clear();
  auto experiment = sim::ParseExperiment(scenario, ".");
  EXPECT_TRUE(experiment.ok()) << experiment.status();
  auto simulator = sim::BuildSimulator(*experiment);
  EXPECT_TRUE(simulator.ok()) << simulator.status();
  EXPECT_TRUE((*simulator)->Run().ok());
  Replayed r;
  r.sim = g_sim_rounds;
  r.workers_lost = (*simulator)->control_counters().workers_lost;

  ControllerWorld world(experiment->setup, controller_allocator, controller_model_autoscaler);
  for (size_t i = 0; i < r.sim.size(); ++i) {
    const bool first = i == 0 || r.sim[i - 1].observation.now != r.sim[i].observation.now;
    world.Replay(r.sim[i], first);
    const Round& done = g_controller_rounds.back();
    r.controller_lines.push_back(Lines(done, &world));
    const bool last = i + 1 == r.sim.size() || r.sim[i + 1].observation.now != done.observation.now;
    if (last) world.Settle();
  }
  r.controller = g_controller_rounds;
  return r;
}

TEST(ControlWorldsTest, TheControllerDecidesWhatTheSimulatorDecided) {
  Replayed r = RunBoth(kScenario, "recorded-controller-infaas", "infaas");
  ASSERT_EQ(r.controller.size(), r.sim.size());
  // The scenario exercises every part of the driver.
  std::set<std::string> kinds;
  bool refused = false;
  for (const Round& round : r.sim) {
    refused |= !round.observation.refused_rows.empty();
    for (const control::Decision& d : round.decisions) kinds.insert(d.kind);
  }
  EXPECT_TRUE(refused);
  EXPECT_EQ(r.workers_lost, 1);
  for (const char* kind : {"upgrade", "remove-replica", "place", "add-worker", "remove-worker"}) {
    EXPECT_EQ(kinds.count(kind), 1u) << kind << " never happened";
  }
  size_t decisions = 0;
  for (size_t i = 0; i < r.sim.size(); ++i) {
    const std::vector<std::string> sim = Lines(r.sim[i]);
    decisions += sim.size();
    ASSERT_EQ(r.controller_lines[i], sim)
        << "round " << i << " at " << ToSeconds(r.sim[i].observation.now) << " s ("
        << (r.sim[i].model ? "model" : "cluster") << ")";
  }
  EXPECT_GT(decisions, 10u);
}

TEST(ControlWorldsTest, AControllerConfiguredDifferentlyIsCaught) {
  Replayed r = RunBoth(kScenario, "recorded-controller-infaas", "horizontal");
  bool differ = false;
  for (size_t i = 0; i < r.sim.size() && i < r.controller_lines.size(); ++i) {
    differ |= r.controller_lines[i] != Lines(r.sim[i]);
  }
  EXPECT_TRUE(differ);
}

// How many decisions of each kind the simulator made.
std::map<std::string, int> DecisionKinds(const Replayed& r) {
  std::map<std::string, int> kinds;
  for (const Round& round : r.sim) {
    for (const control::Decision& d : round.decisions) ++kinds[d.kind];
  }
  return kinds;
}

// The controller decided what the simulator decided, round by round.
void ExpectSameRounds(const Replayed& r) {
  ASSERT_EQ(r.controller.size(), r.sim.size());
  for (size_t i = 0; i < r.sim.size(); ++i) {
    ASSERT_EQ(r.controller_lines[i], Lines(r.sim[i]))
        << "round " << i << " at " << ToSeconds(r.sim[i].observation.now) << " s ("
        << (r.sim[i].model ? "model" : "cluster") << ")";
  }
}

TEST(ControlWorldsTest, ProteusPlansTheSameInBothWorlds) {
  Replayed r = RunBoth(kProteusScenario, "recorded-controller-proteus", "off");
  std::map<std::string, int> kinds = DecisionKinds(r);
  // It planned more than once, and loaded and unloaded as the demand moved.
  EXPECT_GE(kinds["plan"], 2);
  EXPECT_GE(kinds["load"], 3);
  ExpectSameRounds(r);
}

TEST(ControlWorldsTest, MarkProvisionsTheSameInBothWorlds) {
  Replayed r = RunBoth(kMarkScenario, "recorded-controller-mark", "off");
  std::map<std::string, int> kinds = DecisionKinds(r);
  // It launched for the step up, loaded its variant on every worker, and
  // gave the extra workers back after it.
  EXPECT_GE(kinds["launch"], 2);
  EXPECT_GE(kinds["load"], 3);
  EXPECT_GE(kinds["retire"], 1);
  // Its SLO monitor raised the forecasts on the same counts in both.
  EXPECT_GE(kinds["slo-raise"], 1);
  ExpectSameRounds(r);
}

TEST(ControlWorldsTest, AnAppsMaxAccuracyDropReachesBothWorldsAlike) {
  // "fast" is 0.8 / 0.9 of "slow"'s accuracy, an 11% drop: the app allows 5%.
  std::string scenario = kProteusScenario;
  const std::string models = "    models: [m]\n";
  scenario.replace(scenario.find(models), models.size(), models + "    max_accuracy_drop: 0.05\n");
  Replayed r = RunBoth(scenario.c_str(), "recorded-controller-proteus", "off");
  ASSERT_EQ(r.controller.size(), r.sim.size());
  ASSERT_FALSE(r.sim.empty());
  int plans = 0;
  for (size_t i = 0; i < r.sim.size(); ++i) {
    for (const std::vector<Round>* world : {&r.sim, &r.controller}) {
      const control::Observation& o = (*world)[i].observation;
      ASSERT_EQ(o.models.size(), 1u);
      EXPECT_EQ(o.models[0].max_accuracy_drop, 0.05);
    }
    for (const control::Decision& d : r.sim[i].decisions) {
      plans += d.kind == "plan";
      EXPECT_NE(d.target, "m:fast") << control::DecisionLine(d);
    }
    ASSERT_EQ(r.controller_lines[i], Lines(r.sim[i]))
        << "round " << i << " at " << ToSeconds(r.sim[i].observation.now) << " s ("
        << (r.sim[i].model ? "model" : "cluster") << ")";
  }
  EXPECT_GE(plans, 1);
}

}  // namespace
}  // namespace maitre
