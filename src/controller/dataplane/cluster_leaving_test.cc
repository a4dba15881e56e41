// A worker under an interruption notice (Cluster::BeginLeaving): its ready
// instances take their share of the queries like any other, under the
// selection policy and the weighted router alike; no load is placed on it;
// and it takes nothing in the last max(1 s, the query's objective) before it
// stops (docs/operations.md, "Spot interruptions").
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
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

// Beside another ready instance, the leaving one takes its share of the
// queries, as MArk's spot instances serve through their notice (the last
// resort before gave it none while another could take a query), and no load
// goes there; within the margin the other takes them all.
TEST_P(ClusterLeavingTest, TakesItsShareUntilTheMargin) {
  const std::string leaving = AddWorker("cpu-1");
  const std::string stays = AddWorker("cpu-1");
  LoadReady(leaving);
  LoadReady(stays);
  const Nanos stops_at = clock_.Now() + 30 * kSecond;
  ASSERT_TRUE(cluster_->BeginLeaving(leaving, stops_at));
  // The allocator's next weights, made without the leaving worker, keep its
  // weight.
  cluster_->SetRouteWeights({{stays, kOpencv, 100}});
  std::map<std::string, int> routed;
  for (int i = 0; i < 10; ++i) {
    SelectionResult r = Select();
    ++routed[RoutedTo(r)];
    if (r.load.has_value()) EXPECT_NE(r.load->worker_id, leaving) << i;
  }
  EXPECT_GE(routed[leaving], 3);
  EXPECT_GE(routed[stays], 3);
  // The data path for a model named without selection alike.
  routed.clear();
  for (int i = 0; i < 10; ++i) {
    std::optional<Route> route = cluster_->PickReady(kOpencv);
    ASSERT_TRUE(route.has_value());
    ++routed[route->worker_id];
  }
  EXPECT_EQ(routed[leaving], 5);
  EXPECT_EQ(routed[stays], 5);
  // The allocator still sees it gone.
  for (const WorkerView& w : cluster_->Snapshot()) {
    if (w.id == leaving) EXPECT_TRUE(w.unreachable);
  }
  EXPECT_EQ(cluster_->reachable_worker_count(), 1u);

  clock_.Set(stops_at - 900 * kMillisecond);  // within 1 s of the end
  for (int i = 0; i < 20; ++i) {
    SelectionResult r = Select();
    EXPECT_EQ(RoutedTo(r), stays) << i << ": " << r.explanation;
    std::optional<Route> route = cluster_->PickReady(kOpencv);
    ASSERT_TRUE(route.has_value());
    EXPECT_EQ(route->worker_id, stays);
  }
}

// The notice leaves no other instance: the leaving worker serves on, the
// load that replaces it goes to the worker that stays (once, under the
// infaas router; under the weighted one loads are the allocator's), and
// once the replacement is ready both serve.
TEST_P(ClusterLeavingTest, ServesBesideItsReplacement) {
  const std::string leaving = AddWorker("cpu-1");
  LoadReady(leaving);
  ASSERT_TRUE(cluster_->BeginLeaving(leaving, clock_.Now() + 30 * kSecond));
  const std::string stays = AddWorker("cpu-1");

  // Each query is answered before the next (Release) until the
  // replacement is ready.
  SelectionResult first = Select();
  EXPECT_EQ(RoutedTo(first), leaving) << first.explanation;
  if (first.route.has_value()) cluster_->Release(leaving, first.variant);
  if (GetParam() == "infaas") {
    ASSERT_TRUE(first.load.has_value());
    EXPECT_EQ(first.load->worker_id, stays);
  } else {
    EXPECT_FALSE(first.load.has_value()) << first.load->worker_id;
  }
  for (int i = 0; i < 5; ++i) {
    SelectionResult r = Select();
    EXPECT_EQ(RoutedTo(r), leaving) << i << ": " << r.explanation;
    // One replacement: no further load while it is under way.
    EXPECT_FALSE(r.load.has_value()) << i << ": " << r.load->worker_id;
    if (r.route.has_value()) cluster_->Release(leaving, r.variant);
  }

  if (first.load.has_value()) {
    cluster_->FinishLoad(stays, first.load->variant, absl::OkStatus());
    weights_.push_back({stays, first.load->variant, 100});
    cluster_->SetRouteWeights(weights_);
  } else {
    LoadReady(stays);
  }
  // The two share the queries. Selection's step 1 counts the queries sent
  // to each worker lately (the clock stands still here, so all of them):
  // the replacement, which had none of the first six, takes more until
  // the two are even. The plan's weights split them evenly.
  std::map<std::string, int> routed;
  for (int i = 0; i < 10; ++i) {
    SelectionResult r = Select();
    ++routed[RoutedTo(r)];
    EXPECT_FALSE(r.load.has_value()) << i << ": " << r.load->worker_id;
  }
  if (GetParam() == "infaas") {
    EXPECT_GE(routed[leaving], 1) << routed[stays];
    EXPECT_LE(std::abs(routed[leaving] + 6 - routed[stays]), 1) << routed[leaving];
  } else {
    EXPECT_GE(routed[leaving], 3) << routed[stays];
    EXPECT_GE(routed[stays], 3) << routed[leaving];
  }
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
// longer; a failed call ends its service at once.
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
