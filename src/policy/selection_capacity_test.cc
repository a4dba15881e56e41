// Step 4 of selection under load (selection.h; docs/policies.md, "Variant
// selection", step 4), on the example zoo's fmnist-cnn variants as the server
// profiled them (policy/testing/zoo_profiles.h): the first query loads the
// quickest variant to start (opencv), but a load asked for because the
// model's instances are saturated is the variant that carries the most per
// dollar (torch-opt, 3x opencv's capacity at 20 ms). Before this rule the
// second load was opencv again, or torch-int8 (docs/policies.md, "Variant selection").
// Every decision is also checked against the brute-force reference.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "policy/selection.h"
#include "policy/testing/zoo_profiles.h"

namespace maitre::policy {
namespace {

using O = SelectionOutcome;
using ::testing::HasSubstr;
constexpr Nanos kNow = 1000 * kSecond;

class CapacitySelectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SelectionCatalogue c;
    c.worker_types = {{"cpu-1", 1, 4096, 0.0425}, {"cpu-2", 2, 8192, 0.085}};
    ServableApp app{"fashion", {}};
    for (const testing::ZooVariant& z : testing::FmnistCnnVariants()) {
      ServableVariant v;
      v.key = {"fmnist-cnn", z.variant};
      v.accuracy = z.accuracy;
      v.profiles["cpu-1"] = z.profile;
      v.profiles["cpu-2"] = z.profile;
      app.variants.push_back(v);
    }
    c.apps.push_back(app);
    index_ = *SelectionIndex::Create(c);
    cpu1_ = index_.FindType("cpu-1");
    cpu2_ = index_.FindType("cpu-2");
    opencv_ = index_.FindVariant({"fmnist-cnn", "opencv"});
    int8_ = index_.FindVariant({"fmnist-cnn", "torch-int8"});
    opt_ = index_.FindVariant({"fmnist-cnn", "torch-opt"});
  }

  WorkerId Worker(WorkerTypeId type, double utilisation) {
    return live_.AddWorker({type, utilisation, 4000, true});
  }
  // `arrival_qps`: what its last report says it was offered.
  InstanceId Instance(VariantId v, WorkerId w, InstanceState state, int waiting = 0,
                      double arrival_qps = 0) {
    LiveInstance in;
    in.variant = v;
    in.worker = w;
    in.state = state;
    in.waiting = waiting;
    in.arrival_qps = arrival_qps;
    return *live_.AddInstance(index_, in);
  }
  // `--model fmnist-cnn` at the app's 20 ms objective; the deadline adds the
  // 2 ms serving allowance unless given.
  SelectionRequest Request(Nanos deadline_after = 22 * kMillisecond) {
    SelectionRequest r;
    r.model = index_.FindModel("fmnist-cnn");
    r.requirements.latency_ms = 20;
    r.now = kNow;
    r.deadline = kNow + deadline_after;
    return r;
  }
  SelectionDecision Decide(const SelectionRequest& r) {
    SelectionDecision d = Select(index_, live_, r);
    EXPECT_EQ(DebugString(d), DebugString(SelectBruteForce(index_, live_, r)));
    EXPECT_EQ(DebugString(d),
              DebugString(SelectBruteForce(index_, live_, r, {}, BruteForceScan::kScopeOnly)));
    return d;
  }
  VariantId ServingVariant(const SelectionDecision& d) {
    return d.serving == kNoId ? kNoId : index_.option(d.serving).variant;
  }
  VariantId LoadVariant(const SelectionDecision& d) {
    return d.load.valid() ? index_.option(d.load.option).variant : kNoId;
  }

  SelectionIndex index_;
  LiveState live_;
  WorkerTypeId cpu1_ = kNoId, cpu2_ = kNoId;
  VariantId opencv_ = kNoId, int8_ = kNoId, opt_ = kNoId;
};

TEST_F(CapacitySelectionTest, TheFirstQueryLoadsTheQuickestToStart) {
  // Light load, as today: nothing runs, so nothing is saturated.
  WorkerId w1 = Worker(cpu1_, 0.0);
  Worker(cpu2_, 0.0);
  SelectionDecision d = Decide(Request());
  EXPECT_EQ(d.outcome, O::kLoadAndServe);
  EXPECT_EQ(LoadVariant(d), opencv_);
  EXPECT_EQ(d.load.worker, w1);  // cpu-1 is cheaper
  EXPECT_EQ(d.load_rule, LoadRule::kQuickest);
  EXPECT_THAT(ExplainLoad(index_, live_, Request(), d), HasSubstr("quickest"));
}

TEST_F(CapacitySelectionTest, AnOverloadedModelLoadsTheVariantThatCarriesWhatItLacksCheapest) {
  // opencv is offered 30,000 qps and sustains 12,485: 17,515 qps short.
  WorkerId w1 = Worker(cpu1_, 1.0);
  WorkerId w2 = Worker(cpu2_, 0.1);
  WorkerId w3 = Worker(cpu1_, 0.5);
  Instance(opencv_, w1, InstanceState::kOverloaded, 0, /*arrival_qps=*/30000);
  SelectionDecision d = Decide(Request());
  // Before: opencv again, on cpu-2 (the quickest that cpu-1 does not hold).
  EXPECT_EQ(d.outcome, O::kLoadAndServe);
  EXPECT_EQ(LoadVariant(d), opt_);
  // One torch-opt carries it; on cpu-1 its instance is the cheaper, and not
  // beside the opencv that keeps w1's one core busy.
  EXPECT_EQ(d.load.worker, w3);
  EXPECT_EQ(d.load_rule, LoadRule::kCapacity);
  const std::string why = ExplainLoad(index_, live_, Request(), d);
  EXPECT_THAT(why, HasSubstr("capacity: instances of model 'fmnist-cnn' are saturated, 17515 qps "
                             "short by their last reports"));
  EXPECT_THAT(why, HasSubstr("fmnist-cnn:torch-opt on cpu-1 sustains 38269 qps at latency_ms 20 "
                             "for $0.0425/h, 1 instance(s) for $0.0425/h"));
  EXPECT_THAT(why, HasSubstr("the quickest to start, fmnist-cnn:opencv on cpu-1, sustains 12485 "
                             "qps for $0.0425/h: 2 instance(s) for $0.085/h"));
  // With torch-opt on the other cpu-1 too, offered 40,000 more: 19,216
  // short. Two torch or int8 instances on cpu-1 cost as much as one
  // torch-opt on cpu-2, which carries more per dollar: never int8 or opencv
  // while torch-opt can go somewhere.
  Instance(opt_, w3, InstanceState::kOverloaded, 0, /*arrival_qps=*/40000);
  d = Decide(Request());
  EXPECT_EQ(LoadVariant(d), opt_);
  EXPECT_EQ(d.load.worker, w2);
}

TEST_F(CapacitySelectionTest, WhatTheModelLacksDecidesHowMuchCapacityToBuy) {
  // torch-opt on cpu-1 worker w1 is saturated, and keeps w1's one core busy:
  // nothing loads beside it. The other cpu-1 worker, w3, has memory for
  // torch (0.47 MB) but not for torch-opt (0.61 MB). With little missing,
  // one more instance of any variant carries it, and the cheapest instance
  // comes first: torch on cpu-1 ($0.0425/h, the most per dollar there).
  // With 21,731 qps missing, torch would need two, as dear as one
  // torch-opt on cpu-2, which carries more per dollar.
  WorkerId w1 = Worker(cpu1_, 1.0);
  WorkerId w2 = Worker(cpu2_, 0.1);
  WorkerId w3 = live_.AddWorker({cpu1_, 0.5, /*free_memory_mb=*/0.5, true});
  const VariantId torch = index_.FindVariant({"fmnist-cnn", "torch"});
  InstanceId saturated = Instance(opt_, w1, InstanceState::kOverloaded, 0, 40000);
  SelectionDecision d = Decide(Request());
  EXPECT_EQ(LoadVariant(d), torch);
  EXPECT_EQ(d.load.worker, w3);
  live_.UpdateInstanceLoad(saturated, 1, 1, 38000, /*arrival_qps=*/60000, 0);
  d = Decide(Request());
  EXPECT_EQ(LoadVariant(d), opt_);
  EXPECT_EQ(d.load.worker, w2);
}

TEST_F(CapacitySelectionTest, AnInstanceTooFarBehindCountsAsLoad) {
  // Active, but 300 queries ahead at batch 1 put a new one 26.8 ms out.
  WorkerId w1 = Worker(cpu1_, 0.9);
  Worker(cpu2_, 0.1);
  Instance(opencv_, w1, InstanceState::kActive, /*waiting=*/300);
  SelectionDecision d = Decide(Request());
  EXPECT_EQ(LoadVariant(d), opt_);
  EXPECT_EQ(d.load_rule, LoadRule::kCapacity);
}

TEST_F(CapacitySelectionTest, InterferenceIsNotLoad) {
  // An Interfered instance is slowed by its neighbours: step 4 runs, but for
  // the quickest answer, as before.
  WorkerId w1 = Worker(cpu1_, 0.9);
  WorkerId w2 = Worker(cpu2_, 0.1);
  Instance(opencv_, w1, InstanceState::kInterfered);
  SelectionDecision d = Decide(Request());
  EXPECT_EQ(LoadVariant(d), opencv_);
  EXPECT_EQ(d.load.worker, w2);
  EXPECT_EQ(d.load_rule, LoadRule::kQuickest);
}

TEST_F(CapacitySelectionTest, AQuickLoadDoesNotTakeTheCoreOfABusyVariant) {
  // The real load step of 2026-11-27: torch-opt carries the load on cpu-1
  // worker w1 and reports Interfered (the data path slows its batches), so
  // no instance is saturated and step 4 loads the quickest to start. Before,
  // that was opencv on w1, the least utilised, beside torch-opt on its one
  // core; the two then churned. Now it goes to w2, whose core is free.
  WorkerId w1 = Worker(cpu1_, 0.4);
  WorkerId w2 = Worker(cpu1_, 0.6);
  InstanceId busy = Instance(opt_, w1, InstanceState::kInterfered);
  live_.UpdateInstanceLoad(busy, 4, 1, /*served_qps=*/4000, /*arrival_qps=*/4000, 0);
  SelectionDecision d = Decide(Request());
  EXPECT_EQ(d.outcome, O::kLoadAndServe);
  EXPECT_EQ(LoadVariant(d), opencv_);
  EXPECT_EQ(d.load.worker, w2);
  EXPECT_EQ(d.load_rule, LoadRule::kQuickest);
  // With w2 gone the busy instance answers, degraded; nothing loads.
  live_.SetAccepting(w2, false);
  d = Decide(Request());
  EXPECT_FALSE(d.load.valid()) << DebugString(d);
  EXPECT_EQ(d.outcome, O::kUseInstance);
  EXPECT_TRUE(d.degraded);
  EXPECT_EQ(d.instance, busy);
}

TEST_F(CapacitySelectionTest, AFreeCoreOrAnIdleVariantLeavesRoomForALoad) {
  // One replica of a busy torch-opt on a cpu-2 worker leaves a core free.
  WorkerId two = Worker(cpu2_, 0.5);
  InstanceId opt = Instance(opt_, two, InstanceState::kInterfered);
  live_.UpdateInstanceLoad(opt, 4, 1, /*served_qps=*/4000, /*arrival_qps=*/4000, 0);
  SelectionDecision d = Decide(Request());
  EXPECT_EQ(LoadVariant(d), opencv_);
  EXPECT_EQ(d.load.worker, two);
  // Two replicas keep both cores busy.
  live_.UpdateInstanceLoad(opt, 4, 2, /*served_qps=*/4000, /*arrival_qps=*/4000, 0);
  EXPECT_FALSE(Decide(Request()).load.valid());
  // Interfered, it is busy however idle: selection avoids it, so it shows
  // no queries, but it is probed again soon (on the real server opencv was
  // loaded beside such a torch-opt and both then served on one core).
  live_.UpdateInstanceLoad(opt, 1, 2, 0, 0, 0);
  EXPECT_FALSE(Decide(Request()).load.valid());
  // Active and idle, it keeps no core busy, whatever its replicas (a query
  // pinned to opencv loads it there).
  live_.SetState(opt, InstanceState::kActive);
  SelectionRequest pinned = Request();
  pinned.model = kNoId;
  pinned.pinned = opencv_;
  d = Decide(pinned);
  EXPECT_EQ(LoadVariant(d), opencv_);
  EXPECT_EQ(d.load.worker, two);
  // Waiting queries make it busy again, but a query pinned to opencv still
  // loads it (the client chose it; nothing else can serve it); one by model
  // does not.
  live_.SetWaiting(opt, 3);
  EXPECT_FALSE(Decide(Request()).load.valid());
  d = Decide(pinned);
  EXPECT_EQ(LoadVariant(d), opencv_);
  EXPECT_EQ(d.load.worker, two);
}

TEST_F(CapacitySelectionTest, UnderLoadAnAnswerInTimeComesFirst) {
  // A 5 ms deadline: torch-opt's cold start (11.2 ms) would miss it, opencv's
  // (1.8 ms) makes it, so this query gets opencv; torch-int8 (8.5 ms) misses
  // too.
  WorkerId w1 = Worker(cpu1_, 1.0);
  Worker(cpu2_, 0.1);
  Instance(opencv_, w1, InstanceState::kOverloaded);
  SelectionDecision d = Decide(Request(5 * kMillisecond));
  EXPECT_EQ(d.outcome, O::kLoadAndServe);
  EXPECT_EQ(LoadVariant(d), opencv_);
  EXPECT_EQ(d.load_rule, LoadRule::kCapacity);
  // With no option in time, the load for the next queries is the capacity
  // one, and this query is served degraded by the overloaded instance.
  SelectionDecision late = Decide(Request(1 * kMillisecond));
  EXPECT_EQ(late.outcome, O::kServeAndLoad);
  EXPECT_TRUE(late.degraded);
  EXPECT_EQ(LoadVariant(late), opt_);
}

TEST_F(CapacitySelectionTest, ABurstDoesNotLoadLesserVariantsWhileTheBestLoads) {
  // torch-opt is loading on cpu-1, too far behind already for this query.
  // A saturated query may load more torch-opt (on cpu-2), never a lesser
  // variant: on the real server a burst at the step loaded torch-opt,
  // torch-int8 and torch on both workers within the same millisecond.
  WorkerId w1 = Worker(cpu1_, 1.0);
  WorkerId w2 = Worker(cpu2_, 0.1);
  Instance(opencv_, w1, InstanceState::kOverloaded);
  Instance(opt_, w1, InstanceState::kInactive, /*waiting=*/30000);
  SelectionDecision d = Decide(Request());
  EXPECT_EQ(LoadVariant(d), opt_);
  EXPECT_EQ(d.load.worker, w2);
  // With torch-opt loading everywhere it can go, nothing else loads: the
  // query is served degraded by the overloaded instance meanwhile.
  Instance(opt_, w2, InstanceState::kInactive, /*waiting=*/30000);
  d = Decide(Request());
  EXPECT_FALSE(d.load.valid()) << DebugString(d);
  EXPECT_EQ(d.outcome, O::kUseInstance);
  EXPECT_TRUE(d.degraded);
  EXPECT_EQ(ServingVariant(d), opencv_);
}

TEST_F(CapacitySelectionTest, SaturatedWithNothingMissingAddsOnlyTheBestVariant) {
  // torch-opt serves 5,000 qps on cpu-1 and reports Overloaded: its profile
  // sustains 38,269, so nothing is missing by the profiles (on the real
  // 2-core host the data path, ~300 us of CPU a query, caps it there). More
  // torch-opt on cpu-2 may help; a lesser variant beside it would not.
  WorkerId w1 = Worker(cpu1_, 1.0);
  WorkerId w2 = Worker(cpu2_, 0.5);
  Instance(opt_, w1, InstanceState::kOverloaded, 0, /*arrival_qps=*/5000);
  SelectionDecision d = Decide(Request());
  EXPECT_EQ(LoadVariant(d), opt_);
  EXPECT_EQ(d.load.worker, w2);
  // With torch-opt on both, saturated the same way: no load at all (before,
  // the cheapest instance, torch on cpu-1), the query is served degraded.
  Instance(opt_, w2, InstanceState::kOverloaded, 0, /*arrival_qps=*/5000);
  d = Decide(Request());
  EXPECT_FALSE(d.load.valid()) << DebugString(d);
  EXPECT_TRUE(d.degraded);
  EXPECT_EQ(ServingVariant(d), opt_);
}

TEST_F(CapacitySelectionTest, APinnedVariantIsNotSwapped) {
  // Under load a pinned variant still loads only itself (on the type with
  // the most throughput per dollar: cpu-1).
  WorkerId w1 = Worker(cpu1_, 1.0);
  WorkerId w2 = Worker(cpu2_, 0.1);
  Instance(opencv_, w1, InstanceState::kOverloaded);
  SelectionRequest r = Request();
  r.model = kNoId;
  r.pinned = opencv_;
  SelectionDecision d = Decide(r);
  EXPECT_EQ(LoadVariant(d), opencv_);
  EXPECT_EQ(d.load.worker, w2);
  EXPECT_EQ(d.load_rule, LoadRule::kCapacity);
}

}  // namespace
}  // namespace maitre::policy
