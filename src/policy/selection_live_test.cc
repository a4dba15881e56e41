#include "policy/selection_live.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "policy/selection_testing.h"

namespace maitre::policy {
namespace {

using selection_testing::LinearProfile;

SelectionCatalogue Catalogue() {
  SelectionCatalogue c;
  c.worker_types = {{"a", 1, 1000, 0.1}, {"b", 2, 2000, 0.2}};
  ServableVariant x{{"m1", "x"}, 0.9, {{"a", LinearProfile(1, 1, 10, 10)}}};
  ServableVariant y{{"m1", "y"}, 0.8, {{"a", LinearProfile(1, 1, 10, 10)}}};
  ServableVariant z{{"m2", "z"}, 0.8, {{"b", LinearProfile(1, 1, 10, 10)}}};
  c.apps.push_back({"app1", {x, y}});
  c.apps.push_back({"app2", {z}});
  return c;
}

std::vector<WorkerId> Order(const LiveState& live, WorkerTypeId t) {
  auto s = live.workers_by_utilisation(t);
  return {s.begin(), s.end()};
}

std::vector<InstanceId> Sorted(absl::Span<const InstanceId> s) {
  std::vector<InstanceId> v(s.begin(), s.end());
  std::sort(v.begin(), v.end());
  return v;
}

TEST(LiveStateTest, WorkersStayOrderedByUtilisation) {
  LiveState live;
  WorkerId w0 = live.AddWorker({0, 0.5, 100, true});
  WorkerId w1 = live.AddWorker({0, 0.2, 300, true});
  WorkerId w2 = live.AddWorker({0, 0.5, 200, true});
  WorkerId w3 = live.AddWorker({1, 0.9, 50, true});
  EXPECT_EQ(Order(live, 0), (std::vector<WorkerId>{w1, w0, w2}));
  EXPECT_EQ(Order(live, 1), (std::vector<WorkerId>{w3}));
  EXPECT_DOUBLE_EQ(live.max_free_memory(0), 300);
  live.UpdateWorker(w1, 0.7, 10);
  EXPECT_EQ(Order(live, 0), (std::vector<WorkerId>{w0, w2, w1}));
  EXPECT_DOUBLE_EQ(live.max_free_memory(0), 200);
  live.UpdateWorker(w2, 0.0, 10);
  EXPECT_EQ(Order(live, 0), (std::vector<WorkerId>{w2, w0, w1}));
  live.SetAccepting(w0, false);
  EXPECT_DOUBLE_EQ(live.max_free_memory(0), 10);
  live.RemoveWorker(w2);
  EXPECT_EQ(Order(live, 0), (std::vector<WorkerId>{w0, w1}));
  EXPECT_FALSE(live.has_worker(w2));
  EXPECT_EQ(live.AddWorker({1, 0.1, 0, true}), w2);  // ids are reused
  EXPECT_EQ(Order(live, 1), (std::vector<WorkerId>{w2, w3}));
  EXPECT_DOUBLE_EQ(live.max_free_memory(7), -1);
}

TEST(LiveStateTest, InstancesAreListedPerAppVariantAndWorker) {
  SelectionIndex index = *SelectionIndex::Create(Catalogue());
  const VariantId x = index.FindVariant({"m1", "x"});
  const VariantId y = index.FindVariant({"m1", "y"});
  const VariantId z = index.FindVariant({"m2", "z"});
  const AppId app1 = index.FindApp("app1");
  LiveState live;
  WorkerId w0 = live.AddWorker({0, 0.1, 100, true});
  WorkerId w1 = live.AddWorker({1, 0.1, 100, true});
  InstanceId ix = *live.AddInstance(index, {x, w0});
  InstanceId iy = *live.AddInstance(index, {y, w0});
  InstanceId iz = *live.AddInstance(index, {z, w1});
  InstanceId ix1 = *live.AddInstance(index, {x, w1});
  EXPECT_EQ(live.AddInstance(index, {x, w0}).status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_FALSE(live.AddInstance(index, {x, 99}).ok());
  EXPECT_FALSE(live.AddInstance(index, {77, w0}).ok());

  EXPECT_EQ(Sorted(live.instances_of_app(app1)), (std::vector<InstanceId>{ix, iy, ix1}));
  EXPECT_EQ(Sorted(live.instances_of_variant(x)), (std::vector<InstanceId>{ix, ix1}));
  EXPECT_EQ(Sorted(live.instances_on_worker(w1)), (std::vector<InstanceId>{iz, ix1}));
  EXPECT_EQ(live.instance_model(iy), index.FindModel("m1"));
  EXPECT_TRUE(live.Hosts(w0, y));
  EXPECT_FALSE(live.Hosts(w1, y));

  live.AddWaiting(ix, 3);
  live.AddWaiting(ix, -5);
  EXPECT_EQ(live.instance(ix).waiting, 0);
  live.SetState(ix, InstanceState::kOverloaded);
  EXPECT_EQ(live.instance(ix).state, InstanceState::kOverloaded);

  live.RemoveInstance(iy);
  EXPECT_FALSE(live.Hosts(w0, y));
  EXPECT_EQ(Sorted(live.instances_of_app(app1)), (std::vector<InstanceId>{ix, ix1}));
  live.RemoveWorker(w1);  // takes iz and ix1 with it
  EXPECT_FALSE(live.has_instance(iz));
  EXPECT_FALSE(live.has_instance(ix1));
  EXPECT_EQ(Sorted(live.instances_of_variant(x)), (std::vector<InstanceId>{ix}));
  EXPECT_TRUE(live.instances_of_app(index.FindApp("app2")).empty());
}

TEST(LiveStateTest, SyncDropsInstancesOfRemovedVariants) {
  SelectionIndex first = *SelectionIndex::Create(Catalogue());
  LiveState live;
  WorkerId w0 = live.AddWorker({0, 0.1, 100, true});
  InstanceId ix = *live.AddInstance(first, {first.FindVariant({"m1", "x"}), w0});
  InstanceId iy = *live.AddInstance(first, {first.FindVariant({"m1", "y"}), w0});
  SelectionCatalogue next = Catalogue();
  next.apps[0].variants.pop_back();  // m1:y is gone
  SelectionIndex second = *SelectionIndex::Create(next, &first);
  EXPECT_EQ(live.Sync(second), (std::vector<InstanceId>{iy}));
  EXPECT_TRUE(live.has_instance(ix));
  EXPECT_FALSE(live.has_instance(iy));
}

}  // namespace
}  // namespace maitre::policy
