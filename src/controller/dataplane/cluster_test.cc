// The Cluster's handling of a worker a call found unreachable (no query goes
// there, by selection or by a pinned variant, until it reports again), and
// of queries waiting on an instance that is removed, and what it tells
// admission control about an instance.
#include "controller/dataplane/cluster.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <set>

#include "controller/dataplane/selection_catalogue.h"
#include "core/clock.h"
#include "policy/selection_index.h"

namespace maitre::controller {
namespace {

class ClusterUnreachableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Cluster::Options options;
    options.types = WorkerTypeTable({{"small", 2, 4096, 0.1}});
    options.clock = &clock_;
    options.connect = [](const std::string&, const std::string&) {
      return std::unique_ptr<WorkerApi>();
    };
    cluster_ = std::make_unique<Cluster>(options);
    // A selection index with one app, one model, one variant on "small".
    policy::SelectionCatalogue catalogue;
    catalogue.worker_types = options.types.types();
    auto profile = Profile::Create({{1, 1.0, 1.1}, {8, 4.0, 4.4}}, 10, 50);
    ASSERT_TRUE(profile.ok());
    policy::ServableVariant v;
    v.key = kKey;
    v.accuracy = 0.9;
    v.profiles["small"] = *profile;
    catalogue.apps.push_back({"a", {v}});
    auto index = policy::SelectionIndex::Create(catalogue);
    ASSERT_TRUE(index.ok()) << index.status();
    app_ = index->FindApp("a");
    cluster_->SetSelectionIndex(std::make_shared<const policy::SelectionIndex>(*std::move(index)),
                                {{"m", 100}});
    for (int i = 0; i < 2; ++i) {
      auto id = cluster_->AddWorker("small", "fake:" + std::to_string(i), 0, "");
      ASSERT_TRUE(id.ok());
      workers_.push_back(*id);
      ASSERT_TRUE(cluster_->BeginLoad(*id, kKey, nullptr).ok());
      cluster_->FinishLoad(*id, kKey, absl::OkStatus());
    }
  }

  // Where selection sends each of `n` queries (each stays in flight).
  std::set<std::string> Select(int n) {
    std::set<std::string> used;
    for (int i = 0; i < n; ++i) {
      policy::SelectionRequest request;
      request.app = app_;
      request.now = clock_.Now();
      LoadWaiter waiter;
      SelectionResult r = cluster_->Select(request, waiter);
      if (r.route.has_value()) used.insert(r.route->worker_id);
    }
    return used;
  }

  const VariantKey kKey{"m", "v"};
  ManualClock clock_{kSecond};
  std::unique_ptr<Cluster> cluster_;
  std::vector<std::string> workers_;
  policy::AppId app_ = policy::kNoId;
};

TEST_F(ClusterUnreachableTest, NoQueryGoesToAnUnreachableWorkerUntilItReports) {
  EXPECT_EQ(Select(4).size(), 2u);  // both serve
  cluster_->MarkUnreachable(workers_[0]);
  EXPECT_EQ(Select(8), std::set<std::string>{workers_[1]});
  for (int i = 0; i < 4; ++i) {
    std::optional<Route> pinned = cluster_->PickReady(kKey);
    ASSERT_TRUE(pinned.has_value());
    EXPECT_EQ(pinned->worker_id, workers_[1]);
  }
  // It answered after all: its next report brings it back.
  WorkerReport report;
  report.worker_id = workers_[0];
  report.instances.push_back({kKey, InstanceStats{1}});
  ASSERT_TRUE(cluster_->ApplyReport(report));
  EXPECT_TRUE(Select(8).count(workers_[0]) > 0);
}

TEST_F(ClusterUnreachableTest, QueriesWaitingOnARemovedInstanceAreToldToChooseAgain) {
  // One query waits for a replica being added to a ready instance, another
  // for a variant still loading; then both instances are unloaded.
  const VariantKey loading{"m", "w"};
  int told = 0;
  auto waiter = [&told](absl::Status status) {
    EXPECT_TRUE(status.ok()) << status;
    ++told;
  };
  ASSERT_TRUE(cluster_->BeginLoad(workers_[0], kKey, waiter, 2).ok());
  ASSERT_TRUE(cluster_->BeginLoad(workers_[1], loading, waiter).ok());
  EXPECT_EQ(told, 0);
  cluster_->BeginUnload(workers_[0], kKey);
  cluster_->RemoveInstance(workers_[0], kKey);
  cluster_->RemoveInstance(workers_[1], loading);
  EXPECT_EQ(told, 2);
  // A load that finishes after its instance was removed finds no one left.
  cluster_->FinishLoad(workers_[1], loading, absl::OkStatus());
  EXPECT_EQ(told, 2);
}

TEST_F(ClusterUnreachableTest, ANotFoundForAnUnloadedInstanceSparesItsNewerLoad) {
  std::optional<Route> old_route = cluster_->PickReady(kKey);
  ASSERT_TRUE(old_route.has_value());
  const std::string worker = old_route->worker_id;
  cluster_->Release(worker, kKey);
  // The instance the query went to is unloaded, and the variant is loaded
  // there again before the worker's NOT_FOUND for that query comes back.
  cluster_->BeginUnload(worker, kKey);
  cluster_->RemoveInstance(worker, kKey);
  ASSERT_TRUE(cluster_->BeginLoad(worker, kKey, nullptr).ok());
  cluster_->ForgetInstance(worker, kKey, old_route->instance_generation);
  cluster_->FinishLoad(worker, kKey, absl::OkStatus());
  std::set<std::string> serving;
  for (int i = 0; i < 4; ++i) {
    std::optional<Route> route = cluster_->PickReady(kKey);
    ASSERT_TRUE(route.has_value());
    serving.insert(route->worker_id);
  }
  EXPECT_EQ(serving.size(), 2u);  // the newer load serves
  // A NOT_FOUND for the current load removes it.
  std::optional<Route> current;
  do {
    current = cluster_->PickReady(kKey);
    ASSERT_TRUE(current.has_value());
  } while (current->worker_id != worker);
  EXPECT_NE(current->instance_generation, old_route->instance_generation);
  cluster_->ForgetInstance(worker, kKey, current->instance_generation);
  for (int i = 0; i < 4; ++i) {
    std::optional<Route> route = cluster_->PickReady(kKey);
    ASSERT_TRUE(route.has_value());
    EXPECT_NE(route->worker_id, worker);
  }
}

TEST_F(ClusterUnreachableTest, AdmissionSeesQueriesInFlightAndTheMeanRoundTripOverhead) {
  std::optional<Route> route = cluster_->PickReady(kKey);
  ASSERT_TRUE(route.has_value());
  ASSERT_TRUE(cluster_->PickReady(kKey).has_value());  // the other worker
  AdmissionView view = cluster_->AdmissionCandidates(kKey);
  ASSERT_EQ(view.candidates.size(), 2u);
  for (const policy::AdmissionCandidate& c : view.candidates) {
    EXPECT_EQ(c.waiting, 1);
    ASSERT_NE(c.profile, nullptr);
    EXPECT_EQ(c.profile->max_batch(), 8);
  }
  // Each reply moves the means an eighth of the way to what it showed: its
  // overhead, and its compute time over the profile's for its batch (the
  // profile says 1 ms at batch 1; these took 3 ms).
  cluster_->Release(route->worker_id, kKey, {80 * kMillisecond, 3 * kMillisecond, 1});
  ASSERT_TRUE(cluster_->PickReady(kKey, {workers_[route->worker_id == workers_[0] ? 1 : 0]})
                  .has_value());
  cluster_->Release(route->worker_id, kKey, {80 * kMillisecond, 3 * kMillisecond, 1});
  for (const policy::AdmissionCandidate& c : cluster_->AdmissionCandidates(kKey).candidates) {
    if (c.waiting != 0) continue;
    EXPECT_EQ(c.overhead, 10 * kMillisecond + 70 * kMillisecond / 8);
    EXPECT_DOUBLE_EQ(c.slowdown, 1 + 2.0 / 8 + (3 - 1.25) / 8);
  }
  // Another model's instances are not candidates.
  EXPECT_TRUE(cluster_->AdmissionCandidates({"other", ""}).candidates.empty());
  // The batching cap a worker reports bounds the batches its queue is
  // estimated to form; unreported, it is 0 (the profile's largest).
  WorkerReport report;
  report.worker_id = workers_[0];
  InstanceStats stats;
  stats.replicas = 1;
  stats.max_batch = 2;
  report.instances.push_back({kKey, stats});
  ASSERT_TRUE(cluster_->ApplyReport(report));
  std::vector<int> caps;
  for (const policy::AdmissionCandidate& c : cluster_->AdmissionCandidates(kKey).candidates) {
    caps.push_back(c.max_batch);
  }
  std::sort(caps.begin(), caps.end());
  EXPECT_EQ(caps, (std::vector<int>{0, 2}));
}

// An instance being unloaded drains: no query goes there, and its unload
// waits until the queries already there are answered, or the drain limit
// has passed (seen on a report), or a load takes the instance back.
TEST_F(ClusterUnreachableTest, AnInstanceBeingUnloadedDrainsFirst) {
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(cluster_->PickReady(kKey).has_value());
  // Fewest in flight first: two on workers_[0], one on workers_[1].
  int drained = 0;
  cluster_->BeginUnload(workers_[0], kKey, [&drained] { ++drained; });
  EXPECT_TRUE(cluster_->Unloading(workers_[0], kKey));
  EXPECT_EQ(Select(4), std::set<std::string>{workers_[1]});
  cluster_->Release(workers_[0], kKey);
  EXPECT_EQ(drained, 0);
  cluster_->Release(workers_[0], kKey);
  EXPECT_EQ(drained, 1);
  cluster_->Release(workers_[0], kKey);  // nothing left: no second call
  EXPECT_EQ(drained, 1);

  // With nothing in flight it goes ahead at once; an unknown one too.
  int idle = 0;
  cluster_->BeginUnload(workers_[0], {"m", "nowhere"}, [&idle] { ++idle; });
  EXPECT_EQ(idle, 1);
}

TEST_F(ClusterUnreachableTest, ADrainEndsAtItsLimitOrWhenALoadTakesTheInstanceBack) {
  ASSERT_TRUE(cluster_->PickReady(kKey).has_value());  // on workers_[0], never answered
  ASSERT_TRUE(cluster_->PickReady(kKey).has_value());  // on workers_[1]
  int drained0 = 0, drained1 = 0;
  cluster_->BeginUnload(workers_[0], kKey, [&drained0] { ++drained0; });
  cluster_->BeginUnload(workers_[1], kKey, [&drained1] { ++drained1; });
  WorkerReport report;
  report.worker_id = workers_[0];
  clock_.Advance(34 * kSecond);
  ASSERT_TRUE(cluster_->ApplyReport(report));
  EXPECT_EQ(drained0, 0);
  clock_.Advance(kSecond);  // 35 s: the limit
  ASSERT_TRUE(cluster_->ApplyReport(report));
  EXPECT_EQ(drained0, 1);
  ASSERT_TRUE(cluster_->ApplyReport(report));
  EXPECT_EQ(drained0, 1);

  // A load of the variant on workers_[1] takes its instance back: its
  // unload never goes ahead, whenever the query there is answered.
  ASSERT_TRUE(cluster_->BeginLoad(workers_[1], kKey, nullptr).ok());
  EXPECT_FALSE(cluster_->Unloading(workers_[1], kKey));
  cluster_->Release(workers_[1], kKey);
  EXPECT_EQ(drained1, 0);
}

}  // namespace
}  // namespace maitre::controller
