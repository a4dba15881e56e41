// A worker under an interruption notice (Cluster::BeginLeaving) as a last
// resort: its ready instance serves a query only when no instance on a
// worker that stays can take it, under the selection policy and the
// weighted router alike; no load is placed on it; and it takes nothing in
// the last max(1 s, the query's objective) before it stops
// (docs/operations.md, "Spot interruptions").
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "control/query_router.h"
#include "controller/dataplane/cluster.h"
#include "core/clock.h"
#include "policy/selection_index.h"
#include "policy/testing/zoo_profiles.h"

namespace maitre::controller {
namespace {

using policy::SelectionOutcome;

const VariantKey kOpencv{"fmnist-cnn", "opencv"};

class ClusterLeavingTest : public ::testing::TestWithParam<std::string> {
 protected:
  // The example zoo's fmnist-cnn under the app "fashion" on the default
  // types, loading in 1.4 s, routed by GetParam(); workers are added by
  // each test.
  void SetUp() override {
    Cluster::Options options;
    options.clock = &clock_;
    options.connect = [](const std::string&, const std::string&) {
      return std::unique_ptr<WorkerApi>();
    };
    auto router = control::CreateQueryRouter(GetParam(), {});
    ASSERT_TRUE(router.ok()) << router.status();
    options.router = *std::move(router);
    cluster_ = std::make_unique<Cluster>(options);
    policy::SelectionCatalogue catalogue;
    catalogue.worker_types = options.types.types();
    policy::ServableApp app{"fashion", {}};
    for (const policy::testing::ZooVariant& z : policy::testing::FmnistCnnVariants()) {
      policy::ServableVariant v;
      v.key = {"fmnist-cnn", z.variant};
      v.accuracy = z.accuracy;
      // Loads of 1.4 s, as the real fmnist-mlp's: a load under way cannot
      // take a query with a 20 ms objective.
      auto slow = Profile::Create(z.profile.points(), 1400, z.profile.memory_mb());
      ASSERT_TRUE(slow.ok()) << slow.status();
      for (const WorkerType& t : catalogue.worker_types) v.profiles[t.name] = *slow;
      app.variants.push_back(v);
    }
    catalogue.apps.push_back(app);
    auto index = policy::SelectionIndex::Create(catalogue);
    ASSERT_TRUE(index.ok()) << index.status();
    app_ = index->FindApp("fashion");
    cluster_->SetSelectionIndex(std::make_shared<const policy::SelectionIndex>(*std::move(index)),
                                {{"fmnist-cnn", 20}});
  }

  std::string AddWorker(const std::string& type) {
    auto id = cluster_->AddWorker(type, "fake:" + type, 0, "");
    EXPECT_TRUE(id.ok()) << id.status();
    return id.value_or("");
  }

  // `key` loaded and ready on `worker`, with a weight for the weighted router.
  void LoadReady(const std::string& worker, const VariantKey& key = kOpencv) {
    ASSERT_TRUE(cluster_->BeginLoad(worker, key, nullptr).ok());
    cluster_->FinishLoad(worker, key, absl::OkStatus());
    weights_.push_back({worker, key, 100});
    cluster_->SetRouteWeights(weights_);
  }

  // One model-less query of the app at `latency_ms`.
  SelectionResult Select(double latency_ms = 20) {
    policy::SelectionRequest request;
    request.app = app_;
    request.requirements.latency_ms = latency_ms;
    request.now = clock_.Now();
    request.deadline = request.now + FromMillis(latency_ms) + 2 * kMillisecond;
    LoadWaiter waiter = [](absl::Status) {};
    return cluster_->Select(request, waiter);
  }

  // The worker a query was sent to now ("" if none; "wait" if it waits on a load).
  static std::string RoutedTo(const SelectionResult& r) {
    if (r.route.has_value()) return r.route->worker_id;
    return r.waiting_for_load ? "wait" : "";
  }

  ManualClock clock_{kSecond};
  std::unique_ptr<Cluster> cluster_;
  std::vector<control::RouteWeight> weights_;
  policy::AppId app_ = policy::kNoId;
};

// The notice leaves no other instance: the leaving worker keeps serving;
// the load that replaces it goes to the worker that stays, never to it; once
// the replacement is ready, the leaving worker gets nothing.
TEST_P(ClusterLeavingTest, ServesOnlyWhileNothingElseCan) {
  const std::string leaving = AddWorker("cpu-1");
  LoadReady(leaving);
  ASSERT_TRUE(cluster_->BeginLeaving(leaving, clock_.Now() + 30 * kSecond));
  const std::string stays = AddWorker("cpu-2");

  SelectionResult first = Select();
  EXPECT_EQ(RoutedTo(first), leaving) << first.explanation;
  if (first.load.has_value()) {
    EXPECT_EQ(first.load->worker_id, stays);  // the infaas router replaces it on demand
  }
  for (int i = 0; i < 20; ++i) {
    SelectionResult r = Select();
    EXPECT_EQ(RoutedTo(r), leaving) << i << ": " << r.explanation;
    // One replacement: no further load while it is under way.
    EXPECT_FALSE(r.load.has_value()) << i << ": " << r.load->variant.ToString();
  }
  for (const WorkerView& w : cluster_->Snapshot()) {
    if (w.id != leaving) continue;
    EXPECT_TRUE(w.unreachable);  // the allocator still sees it gone
    EXPECT_EQ(w.instances.size(), 1u);
  }
  EXPECT_EQ(cluster_->reachable_worker_count(), 1u);

  // The replacement is ready: from now on the leaving worker gets nothing,
  // however busy the replacement is (nothing is released here).
  if (!first.load.has_value()) LoadReady(stays);
  else {
    cluster_->FinishLoad(stays, first.load->variant, absl::OkStatus());
    weights_.push_back({stays, first.load->variant, 100});
    cluster_->SetRouteWeights(weights_);
  }
  for (int i = 0; i < 50; ++i) {
    SelectionResult r = Select();
    EXPECT_EQ(RoutedTo(r), stays) << i << ": " << r.explanation;
  }
}

// Another ready instance exists: the leaving one is never chosen, not even
// when the other has queries piling up.
TEST_P(ClusterLeavingTest, NeverChosenWhileAnotherReadyInstanceExists) {
  const std::string leaving = AddWorker("cpu-2");
  const std::string stays = AddWorker("cpu-1");
  LoadReady(leaving);
  LoadReady(stays);
  ASSERT_TRUE(cluster_->BeginLeaving(leaving, clock_.Now() + 30 * kSecond));
  for (int i = 0; i < 100; ++i) {
    SelectionResult r = Select();
    EXPECT_EQ(RoutedTo(r), stays) << i << ": " << r.explanation;
    if (r.load.has_value()) EXPECT_NE(r.load->worker_id, leaving);
  }
  // The data path for a model named without selection alike.
  for (int i = 0; i < 10; ++i) {
    std::optional<Route> route = cluster_->PickReady(kOpencv);
    ASSERT_TRUE(route.has_value());
    EXPECT_EQ(route->worker_id, stays);
  }
  // Once the other instance goes, the leaving one serves again.
  cluster_->RemoveInstance(stays, kOpencv);
  EXPECT_EQ(RoutedTo(Select()), leaving);
  std::optional<Route> route = cluster_->PickReady(kOpencv);
  ASSERT_TRUE(route.has_value());
  EXPECT_EQ(route->worker_id, leaving);
}

// Alone and empty, a leaving worker gets no load: nothing can serve.
TEST_P(ClusterLeavingTest, NoLoadIsPlacedOnALeavingWorker) {
  const std::string leaving = AddWorker("cpu-2");
  ASSERT_TRUE(cluster_->BeginLeaving(leaving, clock_.Now() + 30 * kSecond));
  SelectionResult r = Select();
  EXPECT_FALSE(r.load.has_value()) << r.load->worker_id;
  EXPECT_FALSE(r.route.has_value());
  EXPECT_FALSE(r.waiting_for_load);
  EXPECT_EQ(r.decision.outcome, SelectionOutcome::kUnavailable);
  // With a ready instance of one variant, a query it serves goes there,
  // and still no load is placed there (a second variant or more replicas).
  LoadReady(leaving);
  for (int i = 0; i < 20; ++i) {
    r = Select();
    EXPECT_EQ(RoutedTo(r), leaving) << i << ": " << r.explanation;
    EXPECT_FALSE(r.load.has_value()) << i;
  }
}

// The margin: nothing new in the last second, or the last objective when
// longer; a failed call ends the last resort at once.
TEST_P(ClusterLeavingTest, NotUsedWithinTheMarginOrAfterAFailedCall) {
  const std::string leaving = AddWorker("cpu-1");
  LoadReady(leaving);
  const Nanos stops_at = clock_.Now() + 10 * kSecond;
  ASSERT_TRUE(cluster_->BeginLeaving(leaving, stops_at));
  clock_.Set(stops_at - 2500 * kMillisecond);
  EXPECT_EQ(RoutedTo(Select(20)), leaving);
  EXPECT_EQ(RoutedTo(Select(2000)), leaving);
  EXPECT_EQ(RoutedTo(Select(3000)), "");  // its objective is longer than what is left
  EXPECT_TRUE(cluster_->PickReady(kOpencv).has_value());
  EXPECT_FALSE(cluster_->AdmissionCandidates({"fmnist-cnn", ""}).candidates.empty());

  clock_.Set(stops_at - 900 * kMillisecond);  // within 1 s of the end
  SelectionResult late = Select(20);
  EXPECT_EQ(RoutedTo(late), "");
  EXPECT_EQ(late.decision.outcome, SelectionOutcome::kUnavailable);
  EXPECT_FALSE(cluster_->PickReady(kOpencv).has_value());
  EXPECT_TRUE(cluster_->AdmissionCandidates({"fmnist-cnn", ""}).candidates.empty());

  clock_.Set(stops_at - 5 * kSecond);
  EXPECT_EQ(RoutedTo(Select(20)), leaving);
  cluster_->MarkUnreachable(leaving);  // a call to it failed
  EXPECT_EQ(RoutedTo(Select(20)), "");
  EXPECT_FALSE(cluster_->PickReady(kOpencv).has_value());
}

// A query already lost on the leaving worker does not go back there.
TEST_P(ClusterLeavingTest, AQueryLostThereDoesNotGoBack) {
  const std::string leaving = AddWorker("cpu-1");
  LoadReady(leaving);
  ASSERT_TRUE(cluster_->BeginLeaving(leaving, clock_.Now() + 30 * kSecond));
  LoadWaiter waiter = [](absl::Status) {};
  policy::SelectionRequest request;
  request.app = app_;
  request.requirements.latency_ms = 20;
  request.now = clock_.Now();
  request.deadline = request.now + 22 * kMillisecond;
  SelectionResult r = cluster_->Select(request, waiter, {leaving});
  EXPECT_FALSE(r.route.has_value());
  EXPECT_FALSE(cluster_->PickReady(kOpencv, {leaving}).has_value());
  // Another query, not lost there, is served there.
  EXPECT_EQ(RoutedTo(cluster_->Select(request, waiter)), leaving);
  EXPECT_TRUE(cluster_->PickReady(kOpencv).has_value());
}

INSTANTIATE_TEST_SUITE_P(Routers, ClusterLeavingTest, ::testing::Values("infaas", "weighted"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace maitre::controller
