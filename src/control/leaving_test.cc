// The rules both worlds apply to a worker under an interruption notice
// (control/leaving.h); how routing goes around it is tested where each
// world drives it (controller/dataplane/cluster_leaving_test.cc,
// sim/spot_leaving_test.cc).
#include "control/leaving.h"

#include <gtest/gtest.h>

namespace maitre::control {
namespace {

TEST(LeavingTest, TheMarginIsTheFloorOrTheQuerysObjectiveIfLonger) {
  EXPECT_EQ(LeavingMargin(kSecond, std::nullopt), kSecond);
  EXPECT_EQ(LeavingMargin(kSecond, 0.0), kSecond);
  EXPECT_EQ(LeavingMargin(kSecond, 100.0), kSecond);
  EXPECT_EQ(LeavingMargin(kSecond, 2500.0), 2500 * kMillisecond);
  EXPECT_EQ(LeavingMargin(3 * kSecond, 2500.0), 3 * kSecond);
}

TEST(LeavingTest, ItServesUntilTheMarginBeforeItStops) {
  const Nanos stops_at = 10 * kSecond;
  EXPECT_TRUE(ServesWhileLeaving(stops_at, 0, kSecond));
  EXPECT_TRUE(ServesWhileLeaving(stops_at, 9 * kSecond, kSecond));
  EXPECT_FALSE(ServesWhileLeaving(stops_at, 9 * kSecond + 1, kSecond));
  EXPECT_FALSE(ServesWhileLeaving(stops_at, 8 * kSecond + 1, 2 * kSecond));
}

TEST(LeavingTest, LeavingWorkersKeepTheWeightsTheAllocatorDoesNotName) {
  policy::SelectionCatalogue catalogue;
  WorkerType small;
  small.name = "small";
  small.cores = 2;
  small.memory_mb = 4096;
  catalogue.worker_types = {small};
  auto profile = Profile::Create({{1, 5, 5.5}}, 100, 100);
  ASSERT_TRUE(profile.ok()) << profile.status();
  catalogue.apps.push_back(
      {"a", {{{"m", "x"}, 0.8, {{"small", *profile}}}, {{"m", "y"}, 0.7, {{"small", *profile}}}}});
  auto index = policy::SelectionIndex::Create(catalogue);
  ASSERT_TRUE(index.ok()) << index.status();
  const policy::VariantId x = index->FindVariant({"m", "x"});
  const policy::VariantId y = index->FindVariant({"m", "y"});
  policy::LiveState live;
  const policy::WorkerId stays = live.AddWorker({0, 0, 1000, true});
  const policy::WorkerId leaves = live.AddWorker({0, 0, -1, false});
  for (policy::WorkerId w : {stays, leaves}) {
    for (policy::VariantId v : {x, y}) {
      policy::LiveInstance inst;
      inst.variant = v;
      inst.worker = w;
      ASSERT_TRUE(live.AddInstance(*index, inst).ok());
    }
  }
  live.SetRouteWeights({{stays, x, 1}, {leaves, x, 2}, {leaves, y, 3}});

  // The allocator, which does not see the leaving worker, names only the
  // one that stays, and (as it may) one of the leaving worker's variants.
  std::vector<policy::LiveState::RouteWeight> weights = {{stays, x, 5}, {stays, y, 6},
                                                         {leaves, y, 7}};
  KeepLeavingWeights(live, {leaves}, weights);
  ASSERT_EQ(weights.size(), 4u);
  EXPECT_EQ(weights[3].worker, leaves);
  EXPECT_EQ(weights[3].variant, x);
  EXPECT_EQ(weights[3].weight, 2);
  EXPECT_EQ(weights[2].weight, 7);  // what it named stands

  // With no worker leaving, the allocator's weights are all there is.
  std::vector<policy::LiveState::RouteWeight> none;
  KeepLeavingWeights(live, {}, none);
  EXPECT_TRUE(none.empty());
}

}  // namespace
}  // namespace maitre::control
