// The Proteus allocator's driving of the allocation MILP on hand-made
// observations, with a sink that carries loads out at once on the
// observation's workers: when it solves, what it loads and unloads, the
// route weights it publishes, and its baselines' restrictions. The MILP's
// own optimality is tested in src/policy.
#include "control/proteus_allocator.h"

#include <gtest/gtest.h>

#include "control/testing/recording_sink.h"

namespace maitre::control {
namespace {

using testing::RecordingSink;

class ProteusAllocatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // "large": 40 ms for a batch of 8 (200 qps a replica within 100 ms);
    // "small": 8 ms for 8 (1000 qps). Four replicas on a 4-core worker.
    large_ = *Profile::Create({{1, 10, 11}, {8, 40, 44}}, 100, 50);
    small_ = *Profile::Create({{1, 2, 3}, {8, 8, 9}}, 100, 50);
    options_.types = {{"cpu-4", 4, 16000, 0.4}};
    for (int i = 1; i <= 4; ++i) {
      ObservedWorker w;
      w.id = "w" + std::to_string(i);
      w.type = "cpu-4";
      workers_.push_back(w);
    }
  }

  std::unique_ptr<ProteusAllocator> Make(ProteusMode mode = ProteusMode::kProteus) {
    auto made = ProteusAllocator::Create(options_, mode);
    EXPECT_TRUE(made.ok()) << made.status();
    return made.ok() ? *std::move(made) : nullptr;
  }

  // Demand arrives as refused rows over the last second (nothing is
  // loaded to count arrivals on before the first plan).
  Observation At(Nanos now, double qps_a, double qps_b) const {
    Observation o;
    o.now = now;
    o.types = options_.types;
    for (const char* app : {"a", "b"}) {
      ModelOption m;
      m.name = std::string("m") + app;
      m.app = app;
      m.slo_ms = 100;
      if (std::string(app) == "a") m.max_accuracy_drop = a_max_accuracy_drop_;
      m.variants.push_back({"small", "cpu-4", 0.80, &small_, 1});
      m.variants.push_back({"large", "cpu-4", 0.95, &large_, 1});
      o.models.push_back(m);
    }
    o.workers = workers_;
    o.refused_rows["a"] = static_cast<int64_t>(qps_a);
    o.refused_rows["b"] = static_cast<int64_t>(qps_b);
    return o;
  }

  // Carries out what the sink was asked since the last call, at once.
  void Carry(RecordingSink& sink) {
    for (auto& load : sink.loads) {
      ObservedWorker& w = Worker(load.worker);
      ObservedInstance inst;
      inst.key = load.key;
      inst.ready = load.add;
      inst.state = policy::InstanceState::kActive;
      w.instances.push_back(inst);
      for (const auto& [key, n] : load.then_remove) Drop(w, key);
      if (load.done) load.done();
    }
    sink.loads.clear();
    for (const auto& [worker, what] : sink.removes) {
      ObservedWorker& w = Worker(worker);
      Drop(w, *VariantKey::Parse(what.substr(0, what.find(' '))));
    }
    sink.removes.clear();
  }

  ObservedWorker& Worker(const std::string& id) {
    for (ObservedWorker& w : workers_) {
      if (w.id == id) return w;
    }
    ADD_FAILURE() << "no worker " << id;
    return workers_[0];
  }
  static void Drop(ObservedWorker& w, const VariantKey& key) {
    w.instances.erase(std::remove_if(w.instances.begin(), w.instances.end(),
                                     [&](const ObservedInstance& i) { return i.key == key; }),
                      w.instances.end());
  }
  std::map<std::string, int> Hosted() const {  // "model:variant" → devices
    std::map<std::string, int> count;
    for (const ObservedWorker& w : workers_) {
      EXPECT_LE(w.instances.size(), 1u) << w.id;  // one variant per device
      for (const ObservedInstance& i : w.instances) ++count[i.key.ToString()];
    }
    return count;
  }
  int Plans(const RecordingSink& sink) const {
    int n = 0;
    for (const Decision& d : sink.decisions) n += d.kind == "plan";
    return n;
  }

  Profile large_, small_;
  std::optional<double> a_max_accuracy_drop_;
  AllocatorOptions options_;
  std::vector<ObservedWorker> workers_;
};

TEST_F(ProteusAllocatorTest, LowDemandGetsTheAccurateVariantsAndWeights) {
  auto allocator = Make();
  RecordingSink sink;
  ASSERT_TRUE(allocator->ModelRound(At(kSecond, 50, 50), sink).ok());
  EXPECT_EQ(Plans(sink), 1);
  ASSERT_TRUE(allocator->plan().has_value());
  EXPECT_NEAR(allocator->plan()->effective_accuracy, 1, 1e-9);
  Carry(sink);
  std::map<std::string, int> hosted = Hosted();
  EXPECT_GE(hosted["ma:large"], 1);
  EXPECT_GE(hosted["mb:large"], 1);
  EXPECT_EQ(hosted["ma:small"] + hosted["mb:small"], 0);
  // The weights name the devices the plan gave each app.
  double a = 0;
  for (const RouteWeight& w : sink.route_weights) a += w.key.model == "ma" ? w.weight : 0;
  EXPECT_NEAR(a, 50, 0.01);  // spare devices take a sliver
}

TEST_F(ProteusAllocatorTest, ADemandJumpReplansAtOnceAndLowersAccuracy) {
  auto allocator = Make();
  RecordingSink sink;
  ASSERT_TRUE(allocator->ModelRound(At(kSecond, 50, 50), sink).ok());
  Carry(sink);
  // Steady demand: no new plan and nothing touched.
  for (int s = 2; s <= 6; ++s) {
    ASSERT_TRUE(allocator->ModelRound(At(s * kSecond, 50, 50), sink).ok());
    EXPECT_TRUE(sink.loads.empty());
    EXPECT_TRUE(sink.removes.empty());
  }
  EXPECT_EQ(Plans(sink), 1);
  // "a" jumps past what four large devices carry (3,200 qps): the mean over
  // the window leaves the band within a round or two and the plan follows.
  for (int s = 7; s <= 8; ++s) {
    ASSERT_TRUE(allocator->ModelRound(At(s * kSecond, 9000, 50), sink).ok());
    Carry(sink);
  }
  // The window's mean climbs over two rounds: one or two new plans.
  EXPECT_GE(Plans(sink), 2);
  EXPECT_LE(Plans(sink), 3);
  EXPECT_LT(allocator->plan()->effective_accuracy, 1);
  EXPECT_GT(Hosted()["ma:small"], 0);
  // Every device hosts one variant and "b" kept somewhere to go.
  EXPECT_GE(Hosted()["mb:large"] + Hosted()["mb:small"], 1);
}

TEST_F(ProteusAllocatorTest, ReplansEveryPeriodWithoutMovingWhatItKeeps) {
  options_.proteus.period = 10 * kSecond;
  auto allocator = Make();
  RecordingSink sink;
  for (int s = 1; s <= 35; ++s) {
    ASSERT_TRUE(allocator->ModelRound(At(s * kSecond, 300, 200), sink).ok());
    if (s > 1) {
      EXPECT_TRUE(sink.loads.empty()) << s;
      EXPECT_TRUE(sink.removes.empty()) << s;
    }
    Carry(sink);
  }
  EXPECT_EQ(Plans(sink), 4);  // at 1, 11, 21 and 31 s
  EXPECT_EQ(allocator->plan()->moves, 0);
}

TEST_F(ProteusAllocatorTest, ClipperHighAccuracyPlacesOnceWithTheMostAccurateOnly) {
  auto allocator = Make(ProteusMode::kClipperHighAccuracy);
  RecordingSink sink;
  ASSERT_TRUE(allocator->ModelRound(At(kSecond, 0, 0), sink).ok());
  EXPECT_EQ(Plans(sink), 0);  // waits for the demand mix
  ASSERT_TRUE(allocator->ModelRound(At(2 * kSecond, 300, 100), sink).ok());
  Carry(sink);
  EXPECT_EQ(Plans(sink), 1);
  std::map<std::string, int> hosted = Hosted();
  EXPECT_EQ(hosted["ma:large"] + hosted["mb:large"], 4);  // every device used
  EXPECT_GE(hosted["ma:large"], hosted["mb:large"]);
  for (int s = 3; s <= 10; ++s) {
    ASSERT_TRUE(allocator->ModelRound(At(s * kSecond, 9000, 9000), sink).ok());
  }
  EXPECT_EQ(Plans(sink), 1);
  EXPECT_TRUE(sink.loads.empty());
}

TEST_F(ProteusAllocatorTest, ClipperHighThroughputUsesTheFastestOnly) {
  auto allocator = Make(ProteusMode::kClipperHighThroughput);
  RecordingSink sink;
  ASSERT_TRUE(allocator->ModelRound(At(kSecond, 100, 100), sink).ok());
  Carry(sink);
  EXPECT_EQ(Hosted()["ma:small"] + Hosted()["mb:small"], 4);
}

TEST_F(ProteusAllocatorTest, SommelierSwapsVariantsButKeepsEachDeviceToItsApp) {
  auto allocator = Make(ProteusMode::kSommelier);
  RecordingSink sink;
  ASSERT_TRUE(allocator->ModelRound(At(kSecond, 50, 50), sink).ok());
  Carry(sink);
  std::map<std::string, std::string> first_app;
  for (const ObservedWorker& w : workers_) {
    if (!w.instances.empty()) first_app[w.id] = w.instances[0].key.model;
  }
  for (int s = 2; s <= 8; ++s) {
    ASSERT_TRUE(allocator->ModelRound(At(s * kSecond, 9000, 50), sink).ok());
    Carry(sink);
  }
  EXPECT_GE(Plans(sink), 2);
  for (const ObservedWorker& w : workers_) {
    if (first_app.count(w.id) && !w.instances.empty()) {
      EXPECT_EQ(w.instances[0].key.model, first_app[w.id]) << w.id;
    }
  }
}

TEST_F(ProteusAllocatorTest, InfaasAccuracyReactsEveryRoundWithinWhatIsFree) {
  auto allocator = Make(ProteusMode::kInfaasAccuracy);
  RecordingSink sink;
  ASSERT_TRUE(allocator->ModelRound(At(kSecond, 50, 50), sink).ok());
  Carry(sink);
  // One large device each carries 640 qps: the other two stay free.
  EXPECT_EQ(Hosted(), (std::map<std::string, int>{{"ma:large", 1}, {"mb:large", 1}}));
  for (int s = 2; s <= 4; ++s) {
    ASSERT_TRUE(allocator->ModelRound(At(s * kSecond, 50, 50), sink).ok());
    EXPECT_TRUE(sink.loads.empty() && sink.removes.empty()) << s;
  }
  EXPECT_EQ(Plans(sink), 1);
  // "a" jumps: it moves to "small" and takes the free devices, round by
  // round as the measured demand climbs.
  for (int s = 5; s <= 12; ++s) {
    ASSERT_TRUE(allocator->ModelRound(At(s * kSecond, 9000, 50), sink).ok());
    Carry(sink);
  }
  EXPECT_EQ(Hosted(), (std::map<std::string, int>{{"ma:small", 3}, {"mb:large", 1}}));
  // Then "b" jumps too, and finds no free device: it only switches its own.
  for (int s = 13; s <= 20; ++s) {
    ASSERT_TRUE(allocator->ModelRound(At(s * kSecond, 9000, 5000), sink).ok());
    Carry(sink);
  }
  EXPECT_EQ(Hosted(), (std::map<std::string, int>{{"ma:small", 3}, {"mb:small", 1}}));
}

TEST_F(ProteusAllocatorTest, AnOverloadedInstanceScalesItsTypesProfilesForAWhile) {
  options_.proteus.period = 100 * kSecond;  // no periodic re-solve in this test
  auto allocator = Make();
  RecordingSink sink;
  ASSERT_TRUE(allocator->ModelRound(At(kSecond, 300, 100), sink).ok());
  Carry(sink);
  ASSERT_EQ(Plans(sink), 1);
  auto overload_a = [&](Nanos ready_since) {
    for (ObservedWorker& w : workers_) {
      for (ObservedInstance& i : w.instances) {
        if (i.key.model != "ma") continue;
        i.state = policy::InstanceState::kOverloaded;
        i.served_qps = 400;
        i.mean_batch = 8;
        i.ready_since = ready_since;
      }
    }
  };
  // A device of "a" serves half of what its profile promises while
  // overloaded (four replicas of "large" at batch 8: 800 qps). Just after its
  // load that says nothing yet...
  overload_a(kSecond);
  for (int s = 2; s <= 5; ++s) {
    ASSERT_TRUE(allocator->ModelRound(At(s * kSecond, 300, 100), sink).ok());
  }
  EXPECT_EQ(Plans(sink), 1);
  // ... but once it has served for the demand window (5 s), the next
  // round re-plans with every cpu-4 profile at half.
  ASSERT_TRUE(allocator->ModelRound(At(6 * kSecond, 300, 100), sink).ok());
  ASSERT_EQ(Plans(sink), 2);
  EXPECT_NE(sink.decisions.back().reason.find("cpu-4 at 0.50 of its profiles"), std::string::npos)
      << sink.decisions.back().reason;
  // Nothing is overloaded afterwards: the factor is believed for
  // observed_capacity_memory (30 s), then recovers half-way to 1 each
  // further 30 s, re-planning each time, until it is within 10% of 1.
  for (ObservedWorker& w : workers_) {
    for (ObservedInstance& i : w.instances) i.state = policy::InstanceState::kActive;
  }
  int plans = 2;
  for (const char* expected : {"cpu-4 at 0.75 of", "cpu-4 at 0.88 of", ""}) {
    const int from = 6 + 30 * (plans - 2);
    for (int s = from + 1; s < from + 30; ++s) {
      ASSERT_TRUE(allocator->ModelRound(At(s * kSecond, 300, 100), sink).ok());
    }
    EXPECT_EQ(Plans(sink), plans);
    ASSERT_TRUE(allocator->ModelRound(At((from + 30) * kSecond, 300, 100), sink).ok());
    ASSERT_EQ(Plans(sink), ++plans);
    const std::string& reason = sink.decisions.back().reason;
    if (*expected != 0) {
      EXPECT_NE(reason.find(expected), std::string::npos) << reason;
    } else {
      EXPECT_EQ(reason.find("of its profiles"), std::string::npos) << reason;
    }
  }
}

TEST_F(ProteusAllocatorTest, AnAppsMaxAccuracyDropKeepsItsLessAccurateVariantsOut) {
  // "small" is 0.80 / 0.95 = 84% of "a"'s best: more than a 5% drop.
  a_max_accuracy_drop_ = 0.05;
  auto allocator = Make();
  RecordingSink sink;
  for (int s = 1; s <= 8; ++s) {
    ASSERT_TRUE(allocator->ModelRound(At(s * kSecond, 9000, 9000), sink).ok());
    Carry(sink);
  }
  std::map<std::string, int> hosted = Hosted();
  EXPECT_EQ(hosted["ma:small"], 0);
  EXPECT_GE(hosted["ma:large"], 1);
  EXPECT_GE(hosted["mb:small"], 1);  // "b" has no bound
}

TEST_F(ProteusAllocatorTest, BadOptionsAreRefused) {
  options_.proteus.band = 0;
  EXPECT_FALSE(ProteusAllocator::Create(options_, ProteusMode::kProteus).ok());
  options_.proteus.band = 0.2;
  options_.proteus.max_accuracy_drop = 2;
  EXPECT_FALSE(ProteusAllocator::Create(options_, ProteusMode::kProteus).ok());
  EXPECT_FALSE(CreateAllocator("proteus-typo", options_).ok());
}

}  // namespace
}  // namespace maitre::control
