// The book of delivered capacity on hand-made observations: which figures it
// takes, how long it believes them, and what a worker of a type not yet seen
// gets. The allocator's use of it is tested with it
// (infaas_allocator_test.cc).
#include "control/delivered_capacity.h"

#include <gtest/gtest.h>

namespace maitre::control {
namespace {

using Reading = DeliveredCapacity::Reading;

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

  double OnType(const DeliveredCapacity& book, int variant, Nanos now,
                Reading reading = Reading::kToKeep) const {
    return book.PerReplicaOnType("c1", model_, model_.variants[variant], now, reading);
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

TEST_F(DeliveredCapacityTest, ToKeepTheLatestFigureThenTheMostOfTheHoldThenTheProfile) {
  DeliveredCapacity book(options_);
  book.Remember(At(10 * kSecond, 150, 0.95));
  book.Remember(At(20 * kSecond, 100, 0.95));
  EXPECT_DOUBLE_EQ(OnType(book, 0, 45 * kSecond), 100) << "the latest, for 30 s";
  EXPECT_DOUBLE_EQ(OnType(book, 0, 60 * kSecond), 150) << "then the most of the hold";
  EXPECT_DOUBLE_EQ(OnType(book, 0, 700 * kSecond), 200) << "then the profile";
}

TEST_F(DeliveredCapacityTest, ToGiveUpTheLeastOfTheHoldThenTheProfile) {
  DeliveredCapacity book(options_);
  book.Remember(At(10 * kSecond, 100, 0.95));
  book.Remember(At(20 * kSecond, 150, 0.95));
  EXPECT_DOUBLE_EQ(OnType(book, 0, 25 * kSecond, Reading::kToGiveUp), 100)
      << "the least, even while the latest is believed to keep";
  EXPECT_DOUBLE_EQ(OnType(book, 0, 25 * kSecond), 150);
  EXPECT_DOUBLE_EQ(OnType(book, 0, 605 * kSecond, Reading::kToGiveUp), 100);
  EXPECT_DOUBLE_EQ(OnType(book, 0, 615 * kSecond, Reading::kToGiveUp), 150)
      << "the 100 of 10 s has left the 600 s hold, the 150 of 20 s has not";
  EXPECT_DOUBLE_EQ(OnType(book, 0, 625 * kSecond, Reading::kToGiveUp), 200) << "the profile";
}

TEST_F(DeliveredCapacityTest, TheHoldSlidesAnOldFigureGoesThoughNewOnesCome) {
  DeliveredCapacity book(options_);
  book.Remember(At(10 * kSecond, 180, 0.95));
  for (Nanos t = 100 * kSecond; t <= 700 * kSecond; t += 100 * kSecond) {
    book.Remember(At(t, 120, 0.95));
  }
  // 180 came 690 s ago, past the 600 s hold, though figures never stopped.
  EXPECT_DOUBLE_EQ(OnType(book, 0, 700 * kSecond + 31 * kSecond), 120);
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
  EXPECT_DOUBLE_EQ(
      book.PerReplica(w1, model_, model_.variants[0], 10 * kSecond, Reading::kToKeep), 80);
  EXPECT_DOUBLE_EQ(OnType(book, 0, 10 * kSecond), 200) << "not the type's: no CPU limit";
  o.now = 11 * kSecond;
  o.workers.clear();
  book.Remember(o);
  EXPECT_DOUBLE_EQ(
      book.PerReplica(w1, model_, model_.variants[0], 11 * kSecond, Reading::kToKeep), 200);
}

TEST_F(DeliveredCapacityTest, AnOverloadedReportThatDrainedABacklogIsNoFigure) {
  // The state trails the load: the report after the router moved the
  // queries elsewhere still says Overloaded, with 18 qps served of 11
  // offered, its worker busy 5% of the time.
  DeliveredCapacity book(options_);
  Observation o = At(10 * kSecond, 18, 0.05);
  ObservedInstance& inst = o.workers[0].instances[0];
  inst.state = policy::InstanceState::kOverloaded;
  inst.arrival_qps = 11;
  inst.mean_batch = 3;
  inst.compute_p50_ms = 12;
  book.Remember(o);
  const ObservedWorker w1 = o.workers[0];
  EXPECT_DOUBLE_EQ(book.PerReplica(w1, model_, model_.variants[0], 10 * kSecond,
                                   Reading::kToGiveUp),
                   200);
  // Its worker busy 70% of the time while it drained: it ran at its limit,
  // and what it served is the figure, though its batches computed only 6%
  // of the time (a worker whose limit is its data path, not its model).
  inst.served_qps = 162;
  inst.arrival_qps = 100;
  inst.mean_batch = 1;
  inst.compute_p50_ms = 0.4;
  o.workers[0].cpu_utilisation = 0.7;
  book.Remember(o);
  EXPECT_DOUBLE_EQ(book.PerReplica(o.workers[0], model_, model_.variants[0], 10 * kSecond,
                                   Reading::kToGiveUp),
                   162);
}

}  // namespace
}  // namespace maitre::control
