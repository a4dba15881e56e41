#include "policy/selection_weighted.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "policy/selection_testing.h"

namespace maitre::policy {
namespace {

using selection_testing::LinearProfile;

// One app with two variants of one model, all on worker type "a".
struct Cluster {
  SelectionIndex index;
  LiveState live;
  AppId app = kNoId;
  VariantId small = kNoId, large = kNoId;
  std::vector<WorkerId> workers;
  std::vector<InstanceId> instances;

  explicit Cluster(int n) {
    SelectionCatalogue c;
    c.worker_types = {{"a", 1, 1000, 0.1}};
    ServableVariant s{{"m", "small"}, 0.8, {{"a", LinearProfile(1, 1, 10, 10)}}};
    ServableVariant l{{"m", "large"}, 0.95, {{"a", LinearProfile(4, 4, 10, 10)}}};
    c.apps.push_back({"app", {s, l}});
    index = *SelectionIndex::Create(c);
    app = index.FindApp("app");
    small = index.FindVariant({"m", "small"});
    large = index.FindVariant({"m", "large"});
    for (int i = 0; i < n; ++i) {
      workers.push_back(live.AddWorker({0, 0.1, 500, true}));
      LiveInstance in{i % 2 ? large : small, workers.back()};
      instances.push_back(*live.AddInstance(index, in));
      live.SetState(instances.back(), InstanceState::kActive);
    }
  }
  SelectionRequest Request() const {
    SelectionRequest r;
    r.app = app;
    r.now = kSecond;
    r.deadline = r.now + 100 * kMillisecond;
    return r;
  }
};

TEST(WeightedRoundRobinTest, SharesFollowTheWeightsWithinOneQuery) {
  Cluster c(3);
  const double weights[] = {1, 2, 3};
  c.live.SetRouteWeights(
      {{c.workers[0], c.small, 1}, {c.workers[1], c.large, 2}, {c.workers[2], c.small, 3}});
  WeightedRoundRobin router;
  std::map<InstanceId, int> count;
  for (int n = 1; n <= 600; ++n) {
    SelectionDecision d = router.Route(c.index, c.live, c.Request(), {});
    ASSERT_EQ(d.outcome, SelectionOutcome::kUseInstance);
    ++count[d.instance];
    // Smooth: every prefix is within one query of the exact shares.
    for (int i = 0; i < 3; ++i) {
      EXPECT_LE(std::abs(count[c.instances[i]] - n * weights[i] / 6), 1.0) << n;
    }
  }
  EXPECT_EQ(count[c.instances[0]], 100);
  EXPECT_EQ(count[c.instances[1]], 200);
  EXPECT_EQ(count[c.instances[2]], 300);
}

TEST(WeightedRoundRobinTest, SkipsWhatCannotServeTheQuery) {
  Cluster c(2);
  c.live.SetRouteWeights({{c.workers[0], c.small, 5}, {c.workers[1], c.large, 1}});
  WeightedRoundRobin router;
  SelectionRequest r = c.Request();
  r.requirements.min_accuracy = 0.9;  // only "large" fits
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(router.Route(c.index, c.live, r, {}).instance, c.instances[1]);
  }
  c.live.SetAccepting(c.workers[1], false);  // draining: falls back, never loads
  SelectionDecision d = router.Route(c.index, c.live, r, {});
  EXPECT_EQ(d.outcome, SelectionOutcome::kUnavailable);
  EXPECT_FALSE(d.load.valid());
}

TEST(WeightedRoundRobinTest, WithoutAPlanItUsesWhatIsLoadedButNeverLoads) {
  Cluster c(2);
  WeightedRoundRobin router;
  SelectionDecision d = router.Route(c.index, c.live, c.Request(), {});
  EXPECT_EQ(d.outcome, SelectionOutcome::kUseInstance);
  // The app's only instance is on a worker that takes no queries, and
  // another has room: still no load (the app is not cold).
  Cluster one(1);
  one.live.SetAccepting(one.workers[0], false);
  one.live.AddWorker({0, 0.1, 500, true});
  d = router.Route(one.index, one.live, one.Request(), {});
  EXPECT_EQ(d.outcome, SelectionOutcome::kUnavailable);
  EXPECT_FALSE(d.load.valid());
}

// A cold start (the app has no instance anywhere, as before the allocator's
// first load): the query loads what selection would, as under "infaas",
// rather than fail while a worker has room; the uniform router alike.
TEST(WeightedRoundRobinTest, AColdStartLoadsWhereThereIsRoomWhenAsked) {
  SelectionOptions cold_start;
  cold_start.load_on_cold_start = true;
  for (bool uniform : {false, true}) {
    Cluster empty(0);
    const WorkerId worker = empty.live.AddWorker({0, 0.1, 500, true});
    WeightedRoundRobin router(uniform);
    SelectionDecision d = router.Route(empty.index, empty.live, empty.Request(), cold_start);
    EXPECT_EQ(d.outcome, SelectionOutcome::kLoadAndServe) << uniform;
    ASSERT_TRUE(d.load.valid()) << uniform;
    EXPECT_EQ(d.load.worker, worker);
    // Not asked (a plan that leaves the app unplaced): no load.
    d = router.Route(empty.index, empty.live, empty.Request(), {});
    EXPECT_EQ(d.outcome, SelectionOutcome::kUnavailable) << uniform;
    EXPECT_FALSE(d.load.valid()) << uniform;
    // No room anywhere: unavailable as before.
    Cluster full(0);
    full.live.AddWorker({0, 0.1, 0, true});
    d = router.Route(full.index, full.live, full.Request(), cold_start);
    EXPECT_EQ(d.outcome, SelectionOutcome::kUnavailable) << uniform;
    EXPECT_FALSE(d.load.valid());
  }
}

TEST(WeightedRoundRobinTest, ALoadingInstanceLendsItsShareToWhatItReplaces) {
  Cluster c(2);  // worker 0 serves "small", worker 1 "large"
  // The plan moves worker 0 to "large": its load is under way for 10 s.
  InstanceId loading = *c.live.AddInstance(c.index, {c.large, c.workers[0]});
  c.live.SetReadyAt(loading, 11 * kSecond);
  c.live.SetRouteWeights({{c.workers[0], c.large, 3}, {c.workers[1], c.large, 1}});
  WeightedRoundRobin router;
  std::map<InstanceId, int> count;
  for (int n = 0; n < 400; ++n) ++count[router.Route(c.index, c.live, c.Request(), {}).instance];
  EXPECT_EQ(count[c.instances[0]], 300);  // "small" on worker 0 stands in
  EXPECT_EQ(count[c.instances[1]], 100);
  EXPECT_EQ(count[loading], 0);
  c.live.SetState(loading, InstanceState::kActive);  // ready: it takes over
  count.clear();
  for (int n = 0; n < 400; ++n) ++count[router.Route(c.index, c.live, c.Request(), {}).instance];
  EXPECT_EQ(count[loading], 300);
  EXPECT_EQ(count[c.instances[0]], 0);
}

TEST(WeightedRoundRobinTest, UniformIgnoresTheWeights) {
  Cluster c(2);
  c.live.SetRouteWeights({{c.workers[0], c.small, 9}, {c.workers[1], c.large, 1}});
  WeightedRoundRobin router(/*uniform=*/true);
  std::map<InstanceId, int> count;
  for (int n = 0; n < 100; ++n) ++count[router.Route(c.index, c.live, c.Request(), {}).instance];
  EXPECT_EQ(count[c.instances[0]], 50);
  EXPECT_EQ(count[c.instances[1]], 50);
}

TEST(WeightedRoundRobinTest, WeightsFollowTheirWorker) {
  Cluster c(2);
  c.live.SetRouteWeights({{c.workers[0], c.small, 1}, {c.workers[1], c.large, 1}});
  EXPECT_DOUBLE_EQ(c.live.route_weight(c.instances[0]), 1);
  c.live.RemoveWorker(c.workers[0]);
  WorkerId again = c.live.AddWorker({0, 0.1, 500, true});  // reuses the id
  ASSERT_EQ(again, c.workers[0]);
  InstanceId in = *c.live.AddInstance(c.index, {c.small, again});
  EXPECT_DOUBLE_EQ(c.live.route_weight(in), 0);
  c.live.SetRouteWeights({});
  EXPECT_DOUBLE_EQ(c.live.route_weight(c.instances[1]), 0);
}

}  // namespace
}  // namespace maitre::policy
