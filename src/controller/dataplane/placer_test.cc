#include "controller/dataplane/placer.h"

#include <map>

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

}  // namespace
}  // namespace maitre::controller
