#include "controller/dataplane/placer.h"

#include <map>
#include <utility>
#include <vector>

#include "absl/synchronization/notification.h"
#include "controller/dataplane/dispatcher_testing.h"
#include "core/work_queue.h"
#include "gtest/gtest.h"

namespace maitre::controller {
namespace {

class PlaceReplicasTest : public ::testing::Test {
 protected:
  PlaceReplicasTest() : cluster_(ClusterOptions()), placer_(PlacerOptions()) {
    a_ = *cluster_.AddWorker("cpu-2", "127.0.0.1:1", 1, "");
    b_ = *cluster_.AddWorker("cpu-2", "127.0.0.1:2", 2, "");
    small_ = *cluster_.AddWorker("cpu-1", "127.0.0.1:3", 3, "");
    // One replica of another variant already holds one of b's two cores.
    const VariantKey other{"other", "torch"};
    EXPECT_TRUE(cluster_.BeginLoad(b_, other, nullptr).ok());
    cluster_.FinishLoad(b_, other, absl::OkStatus());
    variant_.spec.key = {"m", "opencv"};
    variant_.profiles["cpu-2"] = *Profile::Create({{1, 1.0, 1.2}}, 10, 50);
  }

  static Cluster::Options ClusterOptions() {
    Cluster::Options o;
    o.connect = [](const std::string&, const std::string&) {
      return std::unique_ptr<WorkerApi>();
    };
    return o;
  }
  Placer::Options PlacerOptions() {
    Placer::Options o;
    o.cluster = &cluster_;
    return o;
  }
  std::map<std::string, int> Place(int count) {
    std::map<std::string, int> by_worker;
    for (const Placer::ReplicaPlacement& p : placer_.PlaceReplicas(variant_, "cpu-2", count)) {
      by_worker[p.worker_id] = p.replicas;
    }
    return by_worker;
  }

  Cluster cluster_;
  Placer placer_;
  std::string a_, b_, small_;
  CatalogVariant variant_;
};

TEST_F(PlaceReplicasTest, BestFitFillsThePartlyUsedWorkerFirst) {
  // Least utilised would pick the empty worker a; best fit by cores packs
  // the replica into b's last core and keeps a free (for removal, or for a
  // larger instance).
  EXPECT_EQ(Place(1), (std::map<std::string, int>{{b_, 1}}));
}

TEST_F(PlaceReplicasTest, SeveralReplicasSpreadOnlyWhenTheyMustAndStayOnTheType) {
  variant_.profiles["cpu-1"] = *Profile::Create({{1, 2.0, 2.4}}, 10, 50);
  EXPECT_EQ(Place(3), (std::map<std::string, int>{{a_, 2}, {b_, 1}}));
  // Five do not fit in the three free cpu-2 cores; the cpu-1 worker is not
  // a candidate even though the variant runs there.
  EXPECT_EQ(Place(5), (std::map<std::string, int>{{a_, 2}, {b_, 1}}));
}

// An on-demand load goes neither to a worker a call found unreachable nor to
// one the query was already lost on.
TEST_F(PlaceReplicasTest, OnDemandLoadsSkipUnreachableAndAvoidedWorkers) {
  EXPECT_EQ(placer_.ChooseWorker(variant_), a_);  // idle and empty
  cluster_.MarkUnreachable(a_);
  EXPECT_EQ(placer_.ChooseWorker(variant_), small_);
  EXPECT_EQ(placer_.ChooseWorker(variant_, {small_}), b_);
  EXPECT_EQ(placer_.ChooseWorker(variant_, {small_, b_}), "");
}

TEST_F(PlaceReplicasTest, CountsReplicasAlreadyHeldThere) {
  const VariantKey key = variant_.spec.key;
  ASSERT_TRUE(cluster_.BeginLoad(a_, key, nullptr).ok());
  cluster_.FinishLoad(a_, key, absl::OkStatus());
  // a holds one replica; one more fits there (best fit: a and b each have
  // one core left; ties go to the earlier worker) and the count to set is 2.
  EXPECT_EQ(Place(1), (std::map<std::string, int>{{a_, 2}}));
}

// Each load a worker is sent, as (replicas, max_batch).
struct SentLoads {
  absl::Mutex mu;
  std::vector<std::pair<int, int32_t>> sent;
};

class RecordingApi final : public testing::ServingOnlyApi {
 public:
  explicit RecordingApi(std::shared_ptr<SentLoads> loads) : loads_(std::move(loads)) {}
  absl::StatusOr<LoadResult> Load(const VariantSpec& spec, int replicas,
                                  const std::vector<LatencyPoint>& profile,
                                  int32_t max_batch) override {
    absl::MutexLock lock(&loads_->mu);
    loads_->sent.emplace_back(replicas, max_batch);
    return LoadResult{1, 10};
  }
  void Infer(const VariantKey&, std::shared_ptr<const std::vector<Tensor>>, const InferOptions&,
             WorkerReplyCallback) override {}

 private:
  std::shared_ptr<SentLoads> loads_;
};

// A load carries the batch a pipeline's plan sets for its variant, and a
// refresh (a plan just applied) sends each ready instance its load again,
// at the replicas it has, with the batch now planned.
TEST(PlacerPlannedBatchTest, LoadsCarryThePlannedBatchAndARefreshResendsThem) {
  auto loads = std::make_shared<SentLoads>();
  Cluster::Options cluster_options;
  cluster_options.connect = [loads](const std::string&, const std::string&) {
    return std::make_unique<RecordingApi>(loads);
  };
  Cluster cluster(cluster_options);
  auto control = std::make_unique<WorkQueue>(1);
  int32_t planned = 4;
  Placer::Options options;
  options.cluster = &cluster;
  options.control = control.get();
  options.planned_batch = [&planned](const VariantKey& key) {
    return key.model == "m" ? planned : 0;
  };
  Placer placer(options);
  const std::string worker = *cluster.AddWorker("cpu-1", "127.0.0.1:1", 1, "");
  CatalogVariant variant;
  variant.spec.key = {"m", "torch"};
  // The first load ends before the refresh reads the instance as ready;
  // the later ones are waited for as the worker sees them, since a load's
  // waiter may be told by an earlier load of the instance finishing.
  absl::Notification loaded;
  placer.LoadOn(worker, variant, 2, [&loaded](absl::Status) { loaded.Notify(); });
  loaded.WaitForNotification();
  auto sent = [&loads](size_t n) {
    auto reached = [&loads, n] { return loads->sent.size() >= n; };
    absl::MutexLock lock(&loads->mu, absl::Condition(&reached));
  };
  WorkerReport report;
  report.worker_id = worker;
  report.instances.push_back({variant.spec.key, InstanceStats{2}});
  ASSERT_TRUE(cluster.ApplyReport(report));
  planned = 1;
  placer.Refresh(variant);
  sent(2);
  placer.LoadOn(worker, variant, 2, nullptr);
  sent(3);
  control.reset();  // the loads' last steps run while the placer is there
  absl::MutexLock lock(&loads->mu);
  EXPECT_EQ(loads->sent, (std::vector<std::pair<int, int32_t>>{{2, 4}, {2, 1}, {2, 1}}));
}

}  // namespace
}  // namespace maitre::controller
