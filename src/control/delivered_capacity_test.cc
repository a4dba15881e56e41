// The book of delivered capacity on hand-made observations: which figures it
// takes, how long it believes them, and what a worker of a type not yet seen
// gets. The allocator's use of it is tested with it
// (infaas_allocator_test.cc).
#include "control/delivered_capacity.h"

#include <gtest/gtest.h>

namespace maitre::control {
namespace {

class DeliveredCapacityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // One replica of either variant sustains 200 qps within 100 ms.
    auto profile = Profile::Create({{1, 10, 11}, {8, 40, 44}}, 100, 50);
    ASSERT_TRUE(profile.ok());
    profile_ = *profile;
    model_.name = "m";
    model_.app = "a";
    model_.slo_ms = 100;
    model_.variants = {{"fast", "c1", 0.9, &profile_, 1}, {"slow", "c1", 0.9, &profile_, 1}};
    options_.latest_for = 30 * kSecond;
    options_.held_for = 600 * kSecond;
    options_.model_period = kSecond;
  }

  // w1 (type c1) with one replica of `fast` serving `served` qps, its
  // process at `cpu` of its cores.
  Observation At(Nanos now, double served, double cpu) const {
    Observation o;
    o.now = now;
    o.models = {model_};
    ObservedWorker w;
    w.id = "w1";
    w.type = "c1";
    w.cpu_utilisation = cpu;
    ObservedInstance inst;
    inst.key = {"m", "fast"};
    inst.ready = 1;
    inst.takes_queries = true;
    inst.arrival_qps = inst.served_qps = served;
    inst.state = policy::InstanceState::kActive;
    w.instances.push_back(inst);
    o.workers.push_back(w);
    return o;
  }

  double OnType(const DeliveredCapacity& book, int variant, Nanos now) const {
    return book.PerReplicaOnType("c1", model_, model_.variants[variant], now);
  }

  Profile profile_;
  ModelOption model_;
  DeliveredCapacity::Options options_;
};

TEST_F(DeliveredCapacityTest, BelowItsCpuLimitAWorkerIsTakenAtItsProfile) {
  DeliveredCapacity book(options_);
  book.Remember(At(10 * kSecond, 120, 0.5));
  EXPECT_DOUBLE_EQ(OnType(book, 0, 10 * kSecond), 200);
}

TEST_F(DeliveredCapacityTest, AtItsLimitEveryVariantOfTheTypeGetsTheShareItDelivered) {
  DeliveredCapacity book(options_);
  book.Remember(At(10 * kSecond, 120, 0.95));
  EXPECT_DOUBLE_EQ(OnType(book, 0, 10 * kSecond), 120);
  // `slow` was not seen, but the data path that held `fast` to 60% of its
  // profile is the worker's.
  EXPECT_DOUBLE_EQ(OnType(book, 1, 10 * kSecond), 120);
}

TEST_F(DeliveredCapacityTest, TheLatestFigureThenTheMostOfTheHoldThenTheProfile) {
  DeliveredCapacity book(options_);
  book.Remember(At(10 * kSecond, 150, 0.95));
  book.Remember(At(20 * kSecond, 100, 0.95));
  EXPECT_DOUBLE_EQ(OnType(book, 0, 45 * kSecond), 100) << "the latest, for 30 s";
  EXPECT_DOUBLE_EQ(OnType(book, 0, 60 * kSecond), 150) << "then the most of the hold";
  EXPECT_DOUBLE_EQ(OnType(book, 0, 700 * kSecond), 200) << "then the profile";
}

TEST_F(DeliveredCapacityTest, AFreshInstanceShowsNoLimit) {
  DeliveredCapacity book(options_);
  Observation o = At(10 * kSecond, 50, 0.95);
  o.workers[0].instances[0].ready_since = 9 * kSecond;  // its load's CPU
  book.Remember(o);
  EXPECT_DOUBLE_EQ(OnType(book, 0, 10 * kSecond), 200);
}

TEST_F(DeliveredCapacityTest, AnOverloadedInstanceIsTheWorkersOwnAndGoesWithIt) {
  DeliveredCapacity book(options_);
  Observation o = At(10 * kSecond, 80, 0.5);
  o.workers[0].instances[0].state = policy::InstanceState::kOverloaded;
  book.Remember(o);
  const ObservedWorker w1 = o.workers[0];
  EXPECT_DOUBLE_EQ(book.PerReplica(w1, model_, model_.variants[0], 10 * kSecond), 80);
  EXPECT_DOUBLE_EQ(OnType(book, 0, 10 * kSecond), 200) << "not the type's: no CPU limit";
  o.now = 11 * kSecond;
  o.workers.clear();
  book.Remember(o);
  EXPECT_DOUBLE_EQ(book.PerReplica(w1, model_, model_.variants[0], 11 * kSecond), 200);
}

}  // namespace
}  // namespace maitre::control
