// Observed capacity on hand-made observations: what each kind of evidence
// says, how long it is believed, and what a worker's type carries. How the
// allocators plan with it is in infaas_allocator_test.cc and
// mark_allocator_test.cc.
#include "control/observed_capacity.h"

#include <gtest/gtest.h>

#include <optional>

namespace maitre::control {
namespace {

class ObservedCapacityTest : public ::testing::Test {
 protected:
  ObservedCapacityTest() {
    options_.latest_memory = 30 * kSecond;
    options_.hold = 600 * kSecond;
    options_.saturated_cpu_utilisation = 0.85;
    options_.model_period = 2 * kSecond;
  }

  // One worker of type "c1" with one instance of m:v serving `served` qps.
  static ObservedWorker Worker(const std::string& id, double served, double cpu,
                               policy::InstanceState state = policy::InstanceState::kActive) {
    ObservedWorker w;
    w.id = id;
    w.type = "c1";
    w.cpu_utilisation = cpu;
    ObservedInstance inst;
    inst.key = key_;
    inst.ready = 2;
    inst.arrival_qps = inst.served_qps = served;
    inst.state = state;
    w.instances.push_back(inst);
    return w;
  }

  static Observation At(Nanos now, std::vector<ObservedWorker> workers) {
    Observation o;
    o.now = now;
    o.workers = std::move(workers);
    return o;
  }

  static inline const VariantKey key_{"m", "v"};
  ObservedCapacityOptions options_;
};

TEST_F(ObservedCapacityTest, AWorkerAtItsCpuLimitGivesItsTypeWhatItServedPerReplica) {
  ObservedCapacity observed(options_);
  observed.Remember(At(10 * kSecond, {Worker("w1", 300, 0.9)}));
  EXPECT_EQ(observed.AtTypeLimit("c1", key_, 10 * kSecond), 150);
  EXPECT_EQ(observed.OnWorker(Worker("w1", 0, 0), key_, 10 * kSecond), 150);
  // Another worker of the type, never seen at its limit, gets the type's.
  EXPECT_EQ(observed.OnWorker(Worker("w2", 0, 0), key_, 10 * kSecond), 150);
  EXPECT_EQ(observed.AtTypeLimit("c4", key_, 10 * kSecond), std::nullopt);
}

TEST_F(ObservedCapacityTest, BelowTheCpuLimitNothingIsLearned) {
  ObservedCapacity observed(options_);
  observed.Remember(At(10 * kSecond, {Worker("w1", 300, 0.8)}));
  EXPECT_EQ(observed.AtTypeLimit("c1", key_, 10 * kSecond), std::nullopt);
  EXPECT_EQ(observed.OnWorker(Worker("w1", 0, 0), key_, 10 * kSecond), std::nullopt);
}

TEST_F(ObservedCapacityTest, AnOverloadedInstanceIsTheWorkersNotTheTypes) {
  ObservedCapacity observed(options_);
  observed.Remember(
      At(10 * kSecond, {Worker("w1", 300, 0.5, policy::InstanceState::kOverloaded)}));
  EXPECT_EQ(observed.OnWorker(Worker("w1", 0, 0), key_, 10 * kSecond), 150);
  EXPECT_EQ(observed.AtTypeLimit("c1", key_, 10 * kSecond), std::nullopt);
  EXPECT_EQ(observed.OnWorker(Worker("w2", 0, 0), key_, 10 * kSecond), std::nullopt);
}

TEST_F(ObservedCapacityTest, TheLatestIsBelievedThenTheMostOfTheHoldThenNothing) {
  ObservedCapacity observed(options_);
  observed.Remember(At(10 * kSecond, {Worker("w1", 400, 0.9)}));
  observed.Remember(At(20 * kSecond, {Worker("w1", 200, 0.9)}));
  EXPECT_EQ(observed.AtTypeLimit("c1", key_, 40 * kSecond), 100);   // the latest
  EXPECT_EQ(observed.AtTypeLimit("c1", key_, 60 * kSecond), 200);   // the most held
  EXPECT_EQ(observed.AtTypeLimit("c1", key_, 620 * kSecond), std::nullopt);
}

TEST_F(ObservedCapacityTest, NoCpuLimitIsReadWithinTwoRoundsOfALoadsEnd) {
  ObservedCapacity observed(options_);
  ObservedWorker fresh = Worker("w1", 300, 0.9);
  fresh.instances[0].ready_since = 7 * kSecond;  // 3 s before: under two 2 s rounds
  observed.Remember(At(10 * kSecond, {fresh}));
  EXPECT_EQ(observed.AtTypeLimit("c1", key_, 10 * kSecond), std::nullopt);
}

TEST_F(ObservedCapacityTest, AGoneWorkersFigureGoesButItsTypesStays) {
  ObservedCapacity observed(options_);
  observed.Remember(At(10 * kSecond, {Worker("w1", 100, 0.5, policy::InstanceState::kOverloaded),
                                      Worker("w2", 300, 0.9)}));
  // The least of its own figure and its type's.
  EXPECT_EQ(observed.OnWorker(Worker("w1", 0, 0), key_, 10 * kSecond), 50);
  observed.ForgetGoneWorkers(At(12 * kSecond, {Worker("w2", 0, 0)}));
  // w1 comes back: only its type's figure is left.
  EXPECT_EQ(observed.OnWorker(Worker("w1", 0, 0), key_, 12 * kSecond), 150);
}

}  // namespace
}  // namespace maitre::control
