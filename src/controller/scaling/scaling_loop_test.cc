// The scaling loop's wiring of consolidation across workers: a real
// registry, catalog, cluster and placer, with no worker processes behind the
// cluster (the Unload each would get is observed as the instance turning
// kUnloading). The policy's own rules are tested in
// policy/autoscaling_consolidation_test.cc.
#include "controller/scaling/scaling_loop.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <optional>

#include "controller/registry/registry.h"
#include "core/work_queue.h"

namespace maitre::controller {
namespace {

class ConsolidationLoopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("scaling_loop_test_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    auto registry = registry::Registry::Open({(dir_ / "registry.db").string()});
    ASSERT_TRUE(registry.ok()) << registry.status();
    registry_ = *std::move(registry);
    ASSERT_TRUE(registry_->PutApp({"fashion", {}}).ok());
    registry::ModelRecord model;
    model.app = "fashion";
    model.name = "m";
    model.spec.inputs = {{"x", DataType::kFp32, {-1, 4}}};
    model.spec.outputs = {{"y", DataType::kFp32, {-1, 2}}};
    model.source_blob = std::string(64, 'a');
    registry::VariantRecord variant;
    variant.key = kKey;
    variant.runtime = Runtime::kOpenCv;
    variant.blob = model.source_blob;
    variant.accuracy = 0.9;
    variant.state = registry::VariantState::kReady;
    absl::Status registered = registry_->RegisterModel(model, {variant});
    ASSERT_TRUE(registered.ok()) << registered;
    // 1 ms per query at batch 1: about 1,000 qps per replica at the SLO.
    auto profile = Profile::Create({{1, 1.0, 1.1}, {8, 4.0, 4.4}}, 100, 50);
    ASSERT_TRUE(profile.ok());
    ASSERT_TRUE(registry_->PutProfile({kKey, "cpu-2", 0.9, *profile}).ok());
    ASSERT_TRUE(catalog_.Reload(*registry_).ok());

    Cluster::Options cluster;
    cluster.clock = &clock_;
    cluster.connect = [](const std::string&, const std::string&) {
      return std::unique_ptr<WorkerApi>();
    };
    cluster_ = std::make_unique<Cluster>(cluster);
    Placer::Options placer;
    placer.cluster = cluster_.get();
    placer.control = &control_;
    placer.clock = &clock_;
    placer_ = std::make_unique<Placer>(placer);
    ScalingLoop::Options loop;
    loop.catalog = &catalog_;
    loop.cluster = cluster_.get();
    loop.placer = placer_.get();
    loop.clock = &clock_;
    loop.allocator_options.cluster_scaling = false;
    auto created = ScalingLoop::Create(loop);
    ASSERT_TRUE(created.ok()) << created.status();
    loop_ = *std::move(created);
    for (int i = 0; i < 2; ++i) {
      auto id = cluster_->AddWorker("cpu-2", "127.0.0.1:" + std::to_string(i + 1), i + 1, "");
      ASSERT_TRUE(id.ok());
      workers_.push_back(*id);
      ASSERT_TRUE(cluster_->BeginLoad(*id, kKey, nullptr).ok());
      cluster_->FinishLoad(*id, kKey, absl::OkStatus());
    }
  }

  void TearDown() override { std::filesystem::remove_all(dir_); }

  // One second: each worker whose instance is ready reports `qps` for it (an
  // instance being unloaded takes no queries), then a round.
  void Second(double qps) {
    clock_.Advance(kSecond);
    for (const std::string& id : workers_) {
      if (!Ready(id)) continue;
      WorkerReport report;
      report.worker_id = id;
      InstanceStats stats;
      stats.replicas = 1;
      stats.arrival_qps = stats.served_qps = qps;
      stats.mean_batch = 1;
      stats.compute_p50_ms = 1;
      report.instances.push_back({kKey, stats});
      cluster_->ApplyReport(report);
    }
    loop_->RunModelRound();
  }

  // The phase of the variant's instance on a worker; nullopt when it has none.
  std::optional<InstancePhase> Phase(const std::string& worker_id) const {
    for (const WorkerView& w : cluster_->Snapshot()) {
      for (const InstanceView& inst : w.instances) {
        if (w.id == worker_id && inst.key == kKey) return inst.phase;
      }
    }
    return std::nullopt;
  }
  bool Ready(const std::string& worker_id) const {
    return Phase(worker_id) == InstancePhase::kReady;
  }

  // Workers whose instance of the variant is still ready.
  int ReadyWorkers() const {
    int n = 0;
    for (const std::string& id : workers_) n += Ready(id);
    return n;
  }

  const VariantKey kKey{"m", "opencv"};
  std::filesystem::path dir_;
  ManualClock clock_{1000 * kSecond};
  std::unique_ptr<registry::Registry> registry_;
  Catalog catalog_;
  std::unique_ptr<Cluster> cluster_;
  std::unique_ptr<Placer> placer_;
  std::unique_ptr<ScalingLoop> loop_;
  std::vector<std::string> workers_;
  // Last, so it is destroyed first: its destructor runs the unloads still
  // queued, which use the cluster.
  WorkQueue control_{1};
};

TEST_F(ConsolidationLoopTest, AQuietModelOnTwoWorkersEndsOnOneAfterTheWait) {
  // 20 qps on each worker: either replica alone carries 40 many times over,
  // but the model is kept on both for the 30 s wait (the instances are also
  // 30 s old by then).
  for (int s = 1; s <= 30; ++s) {
    Second(20);
    ASSERT_EQ(ReadyWorkers(), 2) << "at " << s << " s";
  }
  for (int s = 31; s <= 33 && ReadyWorkers() == 2; ++s) Second(20);
  ASSERT_EQ(ReadyWorkers(), 1);
  const std::string vacated = Ready(workers_[0]) ? workers_[1] : workers_[0];
  // The one left is kept: it is the model's last worker. The one given up
  // is not loaded again: its last report's load was not the worker's to serve.
  for (int s = 0; s < 40; ++s) {
    Second(20);
    ASSERT_EQ(Phase(vacated), InstancePhase::kUnloading) << "at " << s << " s";
  }
  EXPECT_EQ(ReadyWorkers(), 1);
}

// An instance unloaded and loaded again between two rounds (selection
// reloads in a fraction of a second) is a new instance: it is kept for the
// minimum age like any other. It used to inherit the age of the one it
// replaced, and was given up or shrunk again a second after its reload.
TEST_F(ConsolidationLoopTest, AnInstanceReloadedBetweenRoundsIsYoung) {
  for (int s = 0; s < 60; ++s) Second(900);  // both old, both needed
  ASSERT_EQ(ReadyWorkers(), 2);
  for (int s = 0; s < 20; ++s) Second(20);  // quiet: one may go once 30 s show it
  // workers_[0] (it goes first on a tie) is unloaded and loaded again.
  cluster_->RemoveInstance(workers_[0], kKey);
  ASSERT_TRUE(cluster_->BeginLoad(workers_[0], kKey, nullptr).ok());
  cluster_->FinishLoad(workers_[0], kKey, absl::OkStatus());
  // It is 30 s young from now: neither goes meanwhile (the one that should
  // go is kept, and no other goes in its place), then it goes.
  for (int s = 1; s < 30; ++s) {
    Second(20);
    ASSERT_EQ(ReadyWorkers(), 2) << "at " << s << " s after the reload";
  }
  for (int s = 0; s < 3 && ReadyWorkers() == 2; ++s) Second(20);
  EXPECT_EQ(ReadyWorkers(), 1);
  EXPECT_FALSE(Ready(workers_[0]));
}

TEST_F(ConsolidationLoopTest, ABusyModelStaysOnBothWorkers) {
  // 900 qps on each: one replica alone would lack the headroom.
  for (int s = 0; s < 60; ++s) Second(900);
  EXPECT_EQ(ReadyWorkers(), 2);
}

}  // namespace
}  // namespace maitre::controller
