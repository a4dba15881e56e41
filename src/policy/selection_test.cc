// The selection rules, one scenario each, on a small hand-built catalogue.
// Every decision is also checked against the brute-force reference.
#include "policy/selection.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "policy/selection_testing.h"

namespace maitre::policy {
namespace {

using selection_testing::LinearProfile;
using ::testing::HasSubstr;
using O = SelectionOutcome;
constexpr Nanos kNow = 1000 * kSecond;

// App "vision": lr (accuracy 0.80), mlp (0.85), cnn:torch (0.92), cnn:opt
// (0.91), each on "small" ($0.04/h) and "big" ($0.08/h, twice as fast).
// Latency at batch 1, small/big: lr 1/0.5, mlp 3/1.5, cnn:torch 10/5,
// cnn:opt 6/3 ms. Load: lr 50, mlp 100, cnn:torch 300, cnn:opt 200 ms.
// Memory: lr 100, mlp 200, cnn 400 MB.
class SelectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SelectionCatalogue c;
    c.worker_types = {{"small", 1, 1000, 0.04}, {"big", 2, 2000, 0.08}};
    ServableApp app{"vision", {}};
    auto add = [&app](std::string model, std::string variant, double accuracy, double fixed,
                      double per_row, double load, double memory) {
      ServableVariant v;
      v.key = {model, variant};
      v.accuracy = accuracy;
      v.profiles["small"] = LinearProfile(fixed, per_row, load, memory);
      v.profiles["big"] = LinearProfile(fixed / 2, per_row / 2, load, memory);
      app.variants.push_back(v);
    };
    add("lr", "torch", 0.80, 0.5, 0.5, 50, 100);
    add("mlp", "torch", 0.85, 2, 1, 100, 200);
    add("cnn", "torch", 0.92, 8, 2, 300, 400);
    add("cnn", "opt", 0.91, 5, 1, 200, 400);
    c.apps.push_back(app);
    index_ = *SelectionIndex::Create(c);
    small_ = index_.FindType("small");
    big_ = index_.FindType("big");
    lr_ = index_.FindVariant({"lr", "torch"});
    mlp_ = index_.FindVariant({"mlp", "torch"});
    cnn_ = index_.FindVariant({"cnn", "torch"});
    opt_ = index_.FindVariant({"cnn", "opt"});
  }

  WorkerId Worker(WorkerTypeId type, double utilisation, double free_mb = 1000) {
    return live_.AddWorker({type, utilisation, free_mb, true});
  }
  InstanceId Instance(VariantId v, WorkerId w, InstanceState state = InstanceState::kActive,
                      int waiting = 0, double batch = 1, int max_batch = 0) {
    LiveInstance in;
    in.variant = v;
    in.worker = w;
    in.state = state;
    in.waiting = waiting;
    in.mean_batch = batch;
    in.max_batch = max_batch;
    return *live_.AddInstance(index_, in);
  }
  SelectionRequest Request(std::optional<double> latency, std::optional<double> accuracy,
                           std::optional<double> cost = std::nullopt) {
    SelectionRequest r;
    r.app = index_.FindApp("vision");
    r.requirements.latency_ms = latency;
    r.requirements.min_accuracy = accuracy;
    r.requirements.max_cost = cost;
    r.now = kNow;
    r.deadline = latency ? kNow + FromMillis(*latency) : kInfiniteFuture;
    return r;
  }
  SelectionDecision Decide(const SelectionRequest& r, const SelectionOptions& o = {}) {
    SelectionDecision d = Select(index_, live_, r, o);
    EXPECT_EQ(DebugString(d), DebugString(SelectBruteForce(index_, live_, r, o)));
    EXPECT_EQ(DebugString(d),
              DebugString(SelectBruteForce(index_, live_, r, o, BruteForceScan::kScopeOnly)));
    return d;
  }
  // `n` queries like `r`, one a millisecond from kNow, each sent where
  // selection decides and answered before the next; how many went where.
  // Leaves `r` at the last query's time.
  std::map<InstanceId, int> SendStream(SelectionRequest& r, int n) {
    const Nanos budget = r.deadline - r.now;
    std::map<InstanceId, int> sent;
    for (int i = 0; i < n; ++i) {
      r.now = kNow + i * kMillisecond;
      r.deadline = r.now + budget;
      SelectionDecision d = Decide(r);
      EXPECT_EQ(d.outcome, SelectionOutcome::kUseInstance);
      ++sent[d.instance];
      live_.Sent(index_, d.instance, r.now);
      live_.AddWaiting(d.instance, -1);
    }
    return sent;
  }
  VariantId ServingVariant(const SelectionDecision& d) {
    return d.serving == kNoId ? kNoId : index_.option(d.serving).variant;
  }

  SelectionIndex index_;
  LiveState live_;
  WorkerTypeId small_, big_;
  VariantId lr_, mlp_, cnn_, opt_;
};

TEST_F(SelectionTest, ActiveInstanceOnTheLeastUtilisedWorker) {
  WorkerId busy = Worker(small_, 0.9);
  WorkerId idle = Worker(small_, 0.2);
  Instance(mlp_, busy);
  InstanceId wanted = Instance(cnn_, idle);
  SelectionDecision d = Decide(Request(50, 0.8));
  EXPECT_EQ(d.outcome, O::kUseInstance);
  EXPECT_EQ(d.instance, wanted);
  EXPECT_DOUBLE_EQ(d.estimated_ms, 10);
  EXPECT_FALSE(d.degraded);
}

TEST_F(SelectionTest, EqualUtilisationGoesToTheCheaperType) {
  WorkerId big = Worker(big_, 0.5);
  WorkerId small = Worker(small_, 0.5);
  Instance(mlp_, big);
  InstanceId cheap = Instance(mlp_, small);
  EXPECT_EQ(Decide(Request(50, 0.8)).instance, cheap);
}

TEST_F(SelectionTest, RequirementsFilterInstances) {
  WorkerId w1 = Worker(small_, 0.1);
  WorkerId w2 = Worker(big_, 0.5);
  WorkerId w3 = Worker(small_, 0.6);
  Instance(lr_, w1);   // too inaccurate for 0.85
  Instance(cnn_, w2);  // too expensive for $0.05/h
  InstanceId ok = Instance(mlp_, w3);
  SelectionDecision d = Decide(Request(50, 0.85, 0.05));
  EXPECT_EQ(d.instance, ok);
  EXPECT_EQ(ServingVariant(d), mlp_);
}

TEST_F(SelectionTest, QueueWaitingCountsAgainstTheLatency) {
  WorkerId idle = Worker(small_, 0.1);
  WorkerId busy = Worker(small_, 0.7);
  // cnn:opt on small runs batch 4 in 9 ms; 4 waiting: 4·9/4 + 9 = 18 ms.
  Instance(opt_, idle, InstanceState::kActive, 4, 4);
  InstanceId other = Instance(cnn_, busy);  // 10 ms
  SelectionDecision d = Decide(Request(15, 0.9));
  EXPECT_EQ(d.instance, other);
  // With a looser objective the queued instance fits and wins on utilisation.
  d = Decide(Request(20, 0.9));
  EXPECT_NE(d.instance, other);
  EXPECT_DOUBLE_EQ(d.estimated_ms, 18);
}

TEST_F(SelectionTest, QueriesSpreadEvenlyBetweenReportsWhateverTheyLastSaid) {
  // Two equal instances whose workers' last reports say 10% and 40% busy,
  // and a stream of queries, each answered before the next: by the reports
  // alone the idler worker would take every one until the next report.
  WorkerId idler = Worker(small_, 0.1);
  WorkerId busier = Worker(small_, 0.4);
  InstanceId a = Instance(mlp_, idler);
  InstanceId b = Instance(mlp_, busier);
  SelectionRequest r = Request(50, 0.8);
  std::map<InstanceId, int> sent = SendStream(r, 1000);
  EXPECT_EQ(sent[a], 500);
  EXPECT_EQ(sent[b], 500);
  // Once nothing was sent for 10 time constants, the reports decide again:
  // the next query goes to the idler worker.
  r.now += 10 * kRecentSentTau;
  r.deadline = r.now + 50 * kMillisecond;
  EXPECT_EQ(Decide(r).instance, a);
}

TEST_F(SelectionTest, TheStreamSplitsByWorkerNotByInstance) {
  // Two variants of the model on one worker, one on the other: each worker
  // takes half, and the first's two instances share its half.
  WorkerId two = Worker(small_, 0.2);
  WorkerId one = Worker(small_, 0.2);
  InstanceId opt_there = Instance(opt_, two);
  InstanceId torch_there = Instance(cnn_, two);
  InstanceId alone = Instance(opt_, one);
  SelectionRequest r = Request(50, 0.9);
  std::map<InstanceId, int> sent = SendStream(r, 1600);
  EXPECT_EQ(sent[alone], 800);
  EXPECT_EQ(sent[opt_there] + sent[torch_there], 800);
}

TEST_F(SelectionTest, TheStreamSplitsByWork) {
  // cnn:opt (6 ms a query at batch 1) and cnn:torch (10 ms) on equal
  // workers: each worker takes the same work, so opt answers 10 queries
  // for torch's 6.
  WorkerId w1 = Worker(small_, 0.2);
  WorkerId w2 = Worker(small_, 0.2);
  InstanceId fast = Instance(opt_, w1);
  InstanceId slow = Instance(cnn_, w2);
  SelectionRequest r = Request(50, 0.9);
  std::map<InstanceId, int> sent = SendStream(r, 1600);
  EXPECT_NEAR(sent[fast], 1000, 2);
  EXPECT_NEAR(sent[slow], 600, 2);
}

TEST_F(SelectionTest, ReplicasShareTheQueue) {
  WorkerId w = Worker(small_, 0.1);
  InstanceId id = Instance(opt_, w, InstanceState::kActive, 12, 4);
  live_.UpdateInstanceLoad(id, 4, 2, 100, 0, 0);
  // 12 waiting over 2 replicas: one starts on the free replica's next batch,
  // 11 queue. At the mean batch of 4 (9 ms) they would take 11·9/8 + 9 =
  // 21.4 ms; the 6 a replica (11 ms) the queue allows answer sooner:
  // 11·11/12 + 11 = 21.1 ms.
  EXPECT_DOUBLE_EQ(Decide(Request(25, 0.9)).estimated_ms, 11 * 11.0 / 12 + 11);
}

TEST_F(SelectionTest, ABurstDrainsInTheBatchesItAllowsUpToTheInstancesCap) {
  // cnn:torch on small: batch 1 in 10 ms, batch 5 in 18 ms. Five queries
  // sent after a quiet spell (its last report's mean batch 1): charged at
  // batch 1 they would read as 60 ms; the queue goes as one batch of 5 and
  // the query rides one, 18 + 18 = 36 ms, within 40.
  WorkerId w = Worker(small_, 0.1);
  InstanceId batches = Instance(cnn_, w, InstanceState::kActive, 5);
  live_.UpdateInstanceLoad(batches, 1, 1, 10, 10, 64);
  SelectionDecision d = Decide(Request(40, 0.9));
  EXPECT_EQ(d.outcome, O::kUseInstance);
  EXPECT_EQ(d.instance, batches);
  EXPECT_DOUBLE_EQ(d.estimated_ms, 36);
  // A worker that batches at most one row drains them one at a time: 60 ms
  // does not make the objective, so selection looks elsewhere.
  live_.UpdateInstanceLoad(batches, 1, 1, 10, 10, 1);
  d = Decide(Request(40, 0.9));
  EXPECT_NE(d.instance, batches);
  EXPECT_DOUBLE_EQ(Decide(Request(1000, 0.9)).estimated_ms, 60);
}

TEST_F(SelectionTest, TheMeanBatchStandsWhenItAnswersSooner) {
  // mlp:torch on small (2 ms + 1 a row), 17 waiting on 2 replicas with a
  // mean batch of 4: the 16 ahead take 16·6/8 + 6 = 18 ms in batches of 4,
  // 16·10/16 + 10 = 20 ms in the 8 a replica the queue allows. Under a
  // steady load the batching already formed is the better guess.
  WorkerId w = Worker(small_, 0.1);
  InstanceId id = Instance(mlp_, w, InstanceState::kActive, 17, 4);
  live_.UpdateInstanceLoad(id, 4, 2, 100, 100, 32);
  EXPECT_DOUBLE_EQ(Decide(Request(50, 0.8)).estimated_ms, 18);
}

TEST_F(SelectionTest, UnhealthyInstancesAreAvoided) {
  WorkerId w1 = Worker(small_, 0.0);
  WorkerId w2 = Worker(small_, 0.1);
  WorkerId w3 = Worker(small_, 0.9);
  Instance(mlp_, w1, InstanceState::kOverloaded);
  Instance(mlp_, w2, InstanceState::kInterfered);
  InstanceId healthy = Instance(mlp_, w3);
  EXPECT_EQ(Decide(Request(50, 0.8)).instance, healthy);
}

// On the 2-core host one worker's copy turned Interfered (its batches
// slowed by the data path beside it) and the other's took the model's whole
// load, past what it delivered, while the first stood idle. At its measured
// speed the Interfered copy answers sooner than the queue on the Active one.
TEST_F(SelectionTest, AnInterferedCopyServesWhenItAnswersSoonerAtItsMeasuredSpeed) {
  WorkerId w1 = Worker(small_, 0.9);
  WorkerId w2 = Worker(small_, 0.1);
  InstanceId active = Instance(mlp_, w1, InstanceState::kActive, /*waiting=*/12);
  InstanceId interfered = Instance(mlp_, w2, InstanceState::kInterfered);
  live_.SetSlowdown(active, 1.2);
  live_.SetSlowdown(interfered, 2);
  SelectionDecision d = Decide(Request(50, 0.8));
  EXPECT_EQ(d.outcome, O::kUseInstance);
  EXPECT_EQ(d.instance, interfered);
  EXPECT_DOUBLE_EQ(d.estimated_ms, 2 * 3);  // mlp's 3 ms at batch 1, twice as slow
  EXPECT_FALSE(d.degraded);
  // With no queue on the Active copy it answers first: 3 × 1.2 < 6 ms.
  live_.SetWaiting(active, 0);
  d = Decide(Request(50, 0.8));
  EXPECT_EQ(d.instance, active);
  EXPECT_DOUBLE_EQ(d.estimated_ms, 3);
  // As fast as the healthy copy, at the two copies' speeds: the tie stays
  // with the healthy one.
  live_.SetSlowdown(active, 2);
  EXPECT_EQ(Decide(Request(50, 0.8)).instance, active);
}

// An Interfered copy whose speed was never measured, or that at its speed
// misses the objective, is still passed over in step 1.
TEST_F(SelectionTest, AnInterferedCopyOfUnknownOrTooSlowSpeedIsPassedOver) {
  WorkerId w1 = Worker(small_, 0.9);
  WorkerId w2 = Worker(small_, 0.1);
  InstanceId active = Instance(mlp_, w1, InstanceState::kActive, /*waiting=*/12);
  InstanceId interfered = Instance(mlp_, w2, InstanceState::kInterfered);
  EXPECT_EQ(Decide(Request(50, 0.8)).instance, active);  // speed unknown
  live_.SetSlowdown(interfered, 20);                       // 60 ms at batch 1
  EXPECT_EQ(Decide(Request(50, 0.8)).instance, active);
  // With no healthy copy left it serves only degraded (step 5), as before.
  live_.SetState(active, InstanceState::kOverloaded);
  SelectionDecision d = Decide(Request(50, 0.8));
  EXPECT_TRUE(d.degraded);
}

// With every copy Interfered, step 1 takes the one that answers soonest at
// its measured speed, and nothing is loaded for a query that copy answers
// within its objective.
TEST_F(SelectionTest, WithEveryCopyInterferedTheSoonestAtItsSpeedServes) {
  Worker(small_, 0.0);  // room for a load
  WorkerId w1 = Worker(small_, 0.9);
  WorkerId w2 = Worker(small_, 0.1);
  InstanceId slow = Instance(mlp_, w1, InstanceState::kInterfered);
  InstanceId slower = Instance(mlp_, w2, InstanceState::kInterfered);
  live_.SetSlowdown(slow, 2);
  live_.SetSlowdown(slower, 3);
  SelectionDecision d = Decide(Request(50, 0.8));
  EXPECT_EQ(d.outcome, O::kUseInstance);
  EXPECT_EQ(d.instance, slow);
  EXPECT_FALSE(d.degraded);
  EXPECT_FALSE(d.load.valid());
  live_.SetWaiting(slow, 4);  // 2 × (4 × 3 + 3) = 30 ms against the other's 9
  EXPECT_EQ(Decide(Request(50, 0.8)).instance, slower);
}

TEST(NextSlowdownTest, MovesAnEighthOfTheWayPerAnswerFromTheProfilesSpeed) {
  EXPECT_DOUBLE_EQ(NextSlowdown(0, 3, 1), 1 + 2.0 / 8);  // unknown starts at 1
  EXPECT_DOUBLE_EQ(NextSlowdown(2, 2, 1), 2);
  EXPECT_DOUBLE_EQ(NextSlowdown(1, 3, 1, 2), 1 + 2 * (1 - 49.0 / 64));  // two answers
  EXPECT_DOUBLE_EQ(NextSlowdown(1, 1000, 1), 1 + 19.0 / 8);             // clamped to 20
  EXPECT_DOUBLE_EQ(NextSlowdown(1.5, 0, 1), 1.5);  // nothing measured: unchanged
  EXPECT_DOUBLE_EQ(NextSlowdown(0, 1, 0), 1);
}

TEST_F(SelectionTest, ColdLoadPicksTheFastestToServeAndTheIdlestWorker) {
  Worker(small_, 0.5);
  WorkerId idle_small = Worker(small_, 0.1);
  Worker(big_, 0.3);
  // For accuracy 0.9: cnn:opt (cold 206 small, 203 big) beats cnn:torch
  // (310, 305); the big type wins on load + latency despite the price.
  SelectionDecision d = Decide(Request(1000, 0.9));
  EXPECT_EQ(d.outcome, O::kLoadAndServe);
  EXPECT_EQ(ServingVariant(d), opt_);
  EXPECT_EQ(index_.option(d.load.option).type, big_);
  EXPECT_DOUBLE_EQ(d.estimated_ms, 203);
  // Limit the cost: only small workers qualify, and the idler one gets it.
  d = Decide(Request(1000, 0.9, 0.05));
  EXPECT_EQ(d.outcome, O::kLoadAndServe);
  EXPECT_EQ(d.load.worker, idle_small);
  EXPECT_EQ(index_.option(d.load.option).type, small_);
}

TEST_F(SelectionTest, PlacementNeedsMemoryAcceptanceAndNoSecondCopy) {
  WorkerId full = Worker(small_, 0.0, 300);  // cnn needs 400 MB
  WorkerId draining = Worker(small_, 0.1);
  live_.SetAccepting(draining, false);
  WorkerId has_it = Worker(small_, 0.2);
  Instance(opt_, has_it, InstanceState::kOverloaded);
  WorkerId target = Worker(small_, 0.8);
  SelectionDecision d = Decide(Request(1000, 0.9, 0.05));
  EXPECT_EQ(d.outcome, O::kLoadAndServe);
  EXPECT_EQ(d.load.worker, target);
  EXPECT_EQ(ServingVariant(d), opt_);
  (void)full;
}

TEST_F(SelectionTest, ColdTiesGoToTheLowerPrice) {
  // Same profile on both types: equal load + latency, so the cheaper wins.
  SelectionCatalogue c;
  c.worker_types = {{"pricey", 1, 1000, 0.5}, {"cheap", 1, 1000, 0.1}};
  ServableVariant v{{"m", "v"}, 0.9, {}};
  v.profiles["pricey"] = LinearProfile(1, 1, 10, 10);
  v.profiles["cheap"] = LinearProfile(1, 1, 10, 10);
  c.apps.push_back({"a", {v}});
  SelectionIndex index = *SelectionIndex::Create(c);
  LiveState live;
  live.AddWorker({index.FindType("pricey"), 0.0, 100, true});
  WorkerId cheap = live.AddWorker({index.FindType("cheap"), 0.9, 100, true});
  SelectionRequest r;
  r.app = index.FindApp("a");
  SelectionDecision d = Select(index, live, r);
  EXPECT_EQ(d.outcome, O::kLoadAndServe);
  EXPECT_EQ(d.load.worker, cheap);
  EXPECT_EQ(DebugString(d), DebugString(SelectBruteForce(index, live, r)));
}

TEST_F(SelectionTest, LoadTooSlowServesOnAnUnhealthyInstanceMeanwhile) {
  WorkerId w = Worker(small_, 0.2);
  InstanceId overloaded = Instance(cnn_, w, InstanceState::kOverloaded, 2);  // 2·10 + 10 = 30 ms
  Worker(big_, 0.1);
  SelectionRequest r = Request(50, 0.9);  // loads take 200+ ms
  SelectionDecision d = Decide(r);
  EXPECT_EQ(d.outcome, O::kServeAndLoad);
  EXPECT_EQ(d.instance, overloaded);
  EXPECT_TRUE(d.degraded);
  EXPECT_EQ(index_.option(d.load.option).variant, opt_);
  // Without the fallback, the query is refused but the load still planned.
  SelectionOptions strict;
  strict.allow_degraded = false;
  d = Decide(r, strict);
  EXPECT_EQ(d.outcome, O::kUnavailable);
  EXPECT_EQ(d.unavailable, UnavailableReason::kDeadline);
  EXPECT_TRUE(d.load.valid());
  EXPECT_THAT(ExplainDecision(index_, live_, r, d), HasSubstr("before this query's deadline"));
}

TEST_F(SelectionTest, DeadlineLaterThanTheObjectiveAllowsASlowInstance) {
  WorkerId w = Worker(small_, 0.2, 0);                              // no room to load anything
  // Its worker batches one query at a time: 10·3 + 3 = 33 ms.
  InstanceId slow = Instance(mlp_, w, InstanceState::kActive, 10, 1, /*max_batch=*/1);
  SelectionRequest r = Request(20, 0.8);
  r.deadline = kNow + 40 * kMillisecond;
  SelectionDecision d = Decide(r);
  EXPECT_EQ(d.outcome, O::kUseInstance);
  EXPECT_EQ(d.instance, slow);
  EXPECT_TRUE(d.degraded);
  r.deadline = kNow + 30 * kMillisecond;
  d = Decide(r);
  EXPECT_EQ(d.outcome, O::kUnavailable);
  // The instance is there but busy; and no other fits, for want of memory.
  EXPECT_EQ(d.unavailable, UnavailableReason::kBusy);
  const std::string text = ExplainDecision(index_, live_, r, d);
  EXPECT_THAT(text, HasSubstr("busy: the least busy would answer in 33 ms, and it has 30 ms left"));
  EXPECT_THAT(text, HasSubstr("no worker has the memory to load one"));
}

// At 128 queries in flight the server answered "no worker has the memory
// to load one" while its workers had gigabytes free: every instance was
// busy and every worker already held the variants. The reason is the load.
TEST_F(SelectionTest, BusyInstancesOnWorkersThatHoldEveryVariantAreNotAMemoryShortage) {
  // Both CNN variants on both small workers (1000 MB free each, 400 MB
  // needed), 32 queries in flight on each instance; no big worker.
  for (int i = 0; i < 2; ++i) {
    WorkerId w = Worker(small_, 0.9, 1000);
    Instance(cnn_, w, InstanceState::kActive, 32);
    Instance(opt_, w, InstanceState::kOverloaded, 32);
  }
  SelectionRequest r = Request(20, 0.9);
  SelectionDecision d = Decide(r);
  ASSERT_EQ(d.outcome, O::kUnavailable);
  EXPECT_EQ(d.unavailable, UnavailableReason::kBusy);
  EXPECT_FALSE(d.load.valid());
  const std::string text = ExplainDecision(index_, live_, r, d);
  // cnn:opt, 32 ahead: at the mean batch of 1, 198 ms; as one batch of 32
  // (37 ms), then the query's, 74 ms.
  EXPECT_THAT(text, HasSubstr("variants of app 'vision' meet min_accuracy 0.9 and latency_ms 20, "
                              "but the instances serving them are busy: the least busy would "
                              "answer in 74 ms, and it has 20 ms left"));
  EXPECT_THAT(text, HasSubstr("every worker with the memory to load another already holds one"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("no worker has the memory")));
  // A loading instance is a load under way, not a busy one: the deadline.
  live_.RemoveInstance(0);
  live_.SetReadyAt(Instance(cnn_, 0, InstanceState::kInactive), kNow + kSecond);
  d = Decide(r);
  EXPECT_EQ(d.unavailable, UnavailableReason::kDeadline);
}

// "No room" says which of its causes it is: before any worker of a fitting
// type has joined (a restarted controller) there is no memory shortage to
// report.
TEST_F(SelectionTest, NoRoomSaysWhetherWorkersAreMissingOrShortOfMemory) {
  SelectionRequest r = Request(std::nullopt, 0.9);  // cnn:torch or cnn:opt, on either type
  SelectionDecision d = Decide(r);
  ASSERT_EQ(d.outcome, O::kUnavailable);
  ASSERT_EQ(d.unavailable, UnavailableReason::kNoRoom);
  std::string text = ExplainDecision(index_, live_, r, d);
  EXPECT_THAT(text, HasSubstr("no worker of a type they are profiled on (big, small) has joined"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("memory")));

  Worker(small_, 0.1, 150);  // joined, but the CNNs need 400 MB
  d = Decide(r);
  ASSERT_EQ(d.unavailable, UnavailableReason::kNoRoom);
  EXPECT_THAT(ExplainDecision(index_, live_, r, d),
              HasSubstr("no worker has the memory to load one: the smallest needs 400.0 MB, "
                        "the most free on a worker of a type it runs on is 150.0 MB"));
}

TEST_F(SelectionTest, NoRoomWhileTheOnlyWorkerIsDraining) {
  WorkerId w = Worker(small_, 0.1, 1000);
  live_.SetAccepting(w, false);
  SelectionRequest r = Request(std::nullopt, 0.9);
  SelectionDecision d = Decide(r);
  ASSERT_EQ(d.outcome, O::kUnavailable);
  ASSERT_EQ(d.unavailable, UnavailableReason::kNoRoom);
  std::string text = ExplainDecision(index_, live_, r, d);
  EXPECT_THAT(text, HasSubstr("is draining (small)"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("memory")));
}

TEST_F(SelectionTest, LoadingInstanceServesWhenReadyInTime) {
  WorkerId w = Worker(small_, 0.1);
  InstanceId loading = Instance(opt_, w, InstanceState::kInactive);
  live_.SetReadyAt(loading, kNow + 30 * kMillisecond);
  Worker(big_, 0.0);
  SelectionDecision d = Decide(Request(40, 0.9));  // 30 + 6 ms
  EXPECT_EQ(d.outcome, O::kUseInstance);
  EXPECT_EQ(d.instance, loading);
  EXPECT_DOUBLE_EQ(d.estimated_ms, 36);
  SelectionOptions no_loading;
  no_loading.use_loading_instances = false;
  EXPECT_NE(Decide(Request(40, 0.9), no_loading).instance, loading);
}

TEST_F(SelectionTest, NoLoadThatWouldAnswerLaterThanOneUnderWay) {
  WorkerId w1 = Worker(small_, 0.1);
  Worker(small_, 0.2);
  InstanceId loading = Instance(opt_, w1, InstanceState::kInactive);
  live_.SetReadyAt(loading, kNow + 150 * kMillisecond);
  SelectionRequest r = Request(100, 0.9, 0.05);  // not ready in time
  SelectionDecision d = Decide(r);
  // cnn:opt, loading on small already, answers in 156 ms; cnn:torch would
  // take 310 ms to load and serve, so nothing new is planned. A load is
  // under way, so the reason is the deadline, not the room.
  EXPECT_EQ(d.outcome, O::kUnavailable);
  EXPECT_EQ(d.unavailable, UnavailableReason::kDeadline);
  EXPECT_FALSE(d.load.valid());
  // A load under way that answers later than another variant's cold start
  // (ready in a second) leaves room for it: cnn:torch is planned, on the
  // idlest small worker, which lacks it.
  live_.SetReadyAt(loading, kNow + kSecond);
  d = Decide(r);
  EXPECT_EQ(d.outcome, O::kUnavailable);
  ASSERT_TRUE(d.load.valid());
  EXPECT_EQ(index_.option(d.load.option).variant, cnn_);
  EXPECT_EQ(d.load.worker, w1);
  // Once cnn:torch is loading too there is nothing new to plan.
  InstanceId second = Instance(cnn_, w1, InstanceState::kInactive);
  live_.SetReadyAt(second, kNow + kSecond);
  d = Decide(r);
  EXPECT_EQ(d.outcome, O::kUnavailable);
  EXPECT_EQ(d.unavailable, UnavailableReason::kDeadline);
  EXPECT_FALSE(d.load.valid());
}

// The real server's load step (docs/experiments.md, steady-load run 7): the
// scope's one instance turned Interfered, and each query of the burst,
// served on it meanwhile, started the next variant in cold order on the
// idle worker. Only the first load may start.
TEST_F(SelectionTest, ABurstOnAnInterferedInstanceStartsOneLoad) {
  WorkerId idle = Worker(small_, 0.0);
  WorkerId busy = Worker(small_, 0.9);
  InstanceId interfered = Instance(opt_, busy, InstanceState::kInterfered);
  SelectionRequest r = Request(100, 0.9, 0.05);
  SelectionDecision d = Decide(r);
  EXPECT_EQ(d.outcome, O::kServeAndLoad);
  EXPECT_EQ(d.instance, interfered);
  ASSERT_TRUE(d.load.valid());
  EXPECT_EQ(index_.option(d.load.option).variant, opt_);
  EXPECT_EQ(d.load.worker, idle);
  InstanceId started = Instance(opt_, idle, InstanceState::kInactive);
  live_.SetReadyAt(started, kNow + 200 * kMillisecond);
  d = Decide(r);
  EXPECT_EQ(d.outcome, O::kUseInstance);  // was kServeAndLoad, loading cnn:torch
  EXPECT_EQ(d.instance, interfered);
  EXPECT_TRUE(d.degraded);
  EXPECT_FALSE(d.load.valid());
}

// A load on a worker that stopped accepting (a call to it failed) will
// serve nothing, so the same load is planned on another worker.
TEST_F(SelectionTest, ALoadOnAWorkerNotAcceptingIsPlannedAgainElsewhere) {
  WorkerId lost = Worker(small_, 0.1);
  WorkerId other = Worker(small_, 0.2);
  Instance(opt_, lost, InstanceState::kInactive);
  live_.SetAccepting(lost, false);
  SelectionDecision d = Decide(Request(1000, 0.9, 0.05));
  EXPECT_EQ(d.outcome, O::kLoadAndServe);
  EXPECT_EQ(ServingVariant(d), opt_);
  EXPECT_EQ(d.load.worker, other);
}

TEST_F(SelectionTest, UnsatisfiableAccuracyNamesTheMostAccurate) {
  SelectionRequest r = Request(50, 0.95);
  SelectionDecision d = Decide(r);
  ASSERT_EQ(d.outcome, O::kUnsatisfiable);
  // cnn:torch at 0.92 is 0.03/0.95 short on either type; ties go to price.
  EXPECT_EQ(index_.option(d.closest).variant, cnn_);
  EXPECT_EQ(index_.option(d.closest).type, small_);
  EXPECT_EQ(d.unmet, kAccuracyUnmet);
  EXPECT_NEAR(d.shortfall, 0.03 / 0.95, 1e-12);
  const std::string why = ExplainDecision(index_, live_, r, d);
  EXPECT_THAT(why, HasSubstr("cnn:torch on small"));
  EXPECT_THAT(why, HasSubstr("min_accuracy 0.95"));
  EXPECT_THAT(why, HasSubstr("0.03 below"));
}

TEST_F(SelectionTest, UnsatisfiableLatencyAndAccuracyTogether) {
  // Accuracy 0.9 needs a CNN (>= 3 ms); 2 ms is too tight for all of them.
  SelectionRequest r = Request(2, 0.9);
  SelectionDecision d = Decide(r);
  ASSERT_EQ(d.outcome, O::kUnsatisfiable);
  // cnn:opt on big: (3 − 2)/2 = 0.5 short; mlp on big: 1.5 ms but
  // (0.9 − 0.85)/0.9 = 0.056 short: the closer.
  EXPECT_EQ(index_.option(d.closest).variant, mlp_);
  EXPECT_EQ(index_.option(d.closest).type, big_);
  EXPECT_EQ(d.unmet, kAccuracyUnmet);
  r = Request(0.4, std::nullopt);
  d = Decide(r);
  ASSERT_EQ(d.outcome, O::kUnsatisfiable);
  EXPECT_EQ(index_.option(d.closest).variant, lr_);
  EXPECT_EQ(d.unmet, kLatencyUnmet);
  EXPECT_THAT(ExplainDecision(index_, live_, r, d), HasSubstr("over latency_ms 0.4"));
}

TEST_F(SelectionTest, UnsatisfiableCost) {
  SelectionRequest r = Request(50, 0.8, 0.01);
  SelectionDecision d = Decide(r);
  ASSERT_EQ(d.outcome, O::kUnsatisfiable);
  EXPECT_EQ(d.unmet, kCostUnmet);
  EXPECT_EQ(index_.option(d.closest).type, small_);
  EXPECT_THAT(ExplainDecision(index_, live_, r, d), HasSubstr("max_cost"));
}

TEST_F(SelectionTest, ModelScopeAndPinnedVariant) {
  WorkerId w1 = Worker(small_, 0.1);
  WorkerId w2 = Worker(small_, 0.5);
  Instance(lr_, w1);
  InstanceId cnn = Instance(cnn_, w2);
  SelectionRequest r = Request(50, std::nullopt);
  EXPECT_EQ(ServingVariant(Decide(r)), lr_);
  r.model = index_.FindModel("cnn");
  EXPECT_EQ(Decide(r).instance, cnn);
  // A pinned variant ignores the requirements it would fail.
  r.model = kNoId;
  r.pinned = opt_;
  r.requirements.min_accuracy = 0.99;
  r.deadline = kInfiniteFuture;  // a load takes 200 ms
  SelectionDecision d = Decide(r);
  EXPECT_EQ(d.outcome, O::kLoadAndServe);
  EXPECT_EQ(ServingVariant(d), opt_);
}

TEST_F(SelectionTest, UnknownScopeIsUnsatisfiableWithNoClosest) {
  SelectionRequest r = Request(50, std::nullopt);
  r.app = 42;
  SelectionDecision d = Decide(r);
  EXPECT_EQ(d.outcome, O::kUnsatisfiable);
  EXPECT_EQ(d.closest, kNoId);
  EXPECT_THAT(ExplainDecision(index_, live_, r, d), HasSubstr("no variant profiled"));
}

TEST_F(SelectionTest, ExplainsChoices) {
  WorkerId w = Worker(small_, 0.1);
  Instance(mlp_, w);
  SelectionRequest r = Request(50, 0.85);
  EXPECT_THAT(ExplainDecision(index_, live_, r, Decide(r)),
              HasSubstr("use-instance mlp:torch on small"));
}

}  // namespace
}  // namespace maitre::policy
