// The pipeline part of allocation on hand-made observations: stages held
// at their plan on their types, loads under way not stacked, the tuner's
// scale-up on a burst and scale-down after the quiet period carried out,
// workers asked for when the type runs short, and the allocator beside it
// shown everything but the stages. The tuner's own rules are tested in
// src/pipeline (tuner_test.cc).
#include "control/pipeline_allocator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "control/testing/recording_sink.h"

namespace maitre::control {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::RecordingSink;

// Remembers what it was shown; decides nothing.
struct ShownAllocator : Allocator {
  absl::Status ModelRound(const Observation& o, ActionSink&) override {
    shown.push_back(o);
    return absl::OkStatus();
  }
  absl::Status ClusterRound(const Observation& o, ActionSink&) override {
    shown.push_back(o);
    return absl::OkStatus();
  }
  std::vector<Observation> shown;
};

class PipelineAllocatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto profile = Profile::Create({{1, 10, 11}, {8, 40, 44}}, 100, 50);
    ASSERT_TRUE(profile.ok());
    profile_ = *profile;
    options_.types = {{"c4", 4, 16000, 0.2}};
    options_.cluster_scaling = true;
    // Planned for 50 qps over 1 s windows: "fast" sees every query (µ 100,
    // ρ 0.5: one replica), "slow" half of them (µ 25, ρ 0.5: two).
    pipeline_.name = "cascade";
    pipeline_.app = "fashion";
    pipeline_.plan_id = 1;
    pipeline_.plan.stages = {{"fast", 100, 1, 0.5, 1}, {"slow", 25, 0.5, 0.5, 2}};
    pipeline_.plan.windows = {kSecond};
    pipeline_.plan.planned_rates = {50};
    pipeline_.stage_models = {"fast-m", "slow-m"};
    pipeline_.stage_types = {"c4", "c4"};
  }

  std::unique_ptr<PipelineAllocator> Make() {
    auto inner = std::make_unique<ShownAllocator>();
    inner_ = inner.get();
    return std::make_unique<PipelineAllocator>(std::move(inner), options_);
  }

  Observation At(Nanos now, std::vector<ObservedWorker> workers, double qps = 0) const {
    Observation o;
    o.now = now;
    o.types = options_.types;
    for (const char* name : {"fast-m", "slow-m", "other"}) {
      ModelOption m;
      m.name = name;
      m.app = "fashion";
      m.slo_ms = 100;
      m.variants.push_back({"v", "c4", 0.9, &profile_, 1});
      m.variants.push_back({"w", "c4", 0.8, &profile_, 1});
      o.models.push_back(m);
    }
    o.workers = std::move(workers);
    ObservedPipeline p = pipeline_;
    // Evenly spread over the second before `now`.
    const int n = static_cast<int>(qps);
    for (int i = 0; i < n; ++i) p.arrivals.push_back(now - kSecond + (i + 1) * kSecond / n);
    o.pipelines.push_back(p);
    return o;
  }

  static ObservedWorker Worker(std::string id, std::map<std::string, int> ready = {}) {
    ObservedWorker w;
    w.id = std::move(id);
    w.type = "c4";
    w.idle_since = 0;
    for (const auto& [model, n] : ready) {
      ObservedInstance inst;
      inst.key = {model, "v"};
      inst.ready = n;
      w.instances.push_back(inst);
    }
    return w;
  }

  // Replicas loaded per model, over every load asked for.
  static std::map<std::string, int> Loaded(const RecordingSink& sink) {
    std::map<std::string, int> loaded;
    for (const auto& l : sink.loads) loaded[l.key.model] += l.add;
    return loaded;
  }

  static std::vector<std::string> Kinds(const RecordingSink& sink) {
    std::vector<std::string> kinds;
    for (const Decision& d : sink.decisions) kinds.push_back(d.kind);
    return kinds;
  }

  Profile profile_;
  AllocatorOptions options_;
  ObservedPipeline pipeline_;
  ShownAllocator* inner_ = nullptr;
};

TEST_F(PipelineAllocatorTest, TheFirstRoundLoadsThePlanOnTheStagesTypes) {
  auto allocator = Make();
  RecordingSink sink;
  ASSERT_TRUE(allocator->ModelRound(At(kSecond, {Worker("w1"), Worker("w2")}), sink).ok());
  EXPECT_EQ(Loaded(sink), (std::map<std::string, int>{{"fast-m", 1}, {"slow-m", 2}}));
  // One load per worker a round: fast went to w1 (a tie, by id), slow to w2.
  ASSERT_EQ(sink.loads.size(), 2u);
  EXPECT_EQ(sink.loads[0].worker, "w1");
  EXPECT_EQ(sink.loads[1].worker, "w2");
}

TEST_F(PipelineAllocatorTest, AStagePlannedOnAVariantHoldsThatOneAndNoOther) {
  pipeline_.stage_variants = {"", "w"};
  auto allocator = Make();
  RecordingSink sink;
  // Selection had loaded slow-m's first variant on w2 before the plan.
  ASSERT_TRUE(allocator
                  ->ModelRound(At(kSecond, {Worker("w1"), Worker("w2", {{"slow-m", 2}}),
                                            Worker("w3")}),
                               sink)
                  .ok());
  ASSERT_EQ(sink.loads.size(), 2u);
  EXPECT_EQ(sink.loads[0].key.ToString(), "fast-m:v");  // no variant planned: the first
  EXPECT_EQ(sink.loads[1].key.ToString(), "slow-m:w");
  EXPECT_EQ(sink.loads[1].add, 2) << "slow-m:v's replicas do not count for the stage";
  EXPECT_THAT(sink.removes, ElementsAre(std::make_pair(std::string("w2"),
                                                       std::string("slow-m:v x2"))));
}

TEST_F(PipelineAllocatorTest, ALoadUnderWayIsNotAskedForAgain) {
  auto allocator = Make();
  RecordingSink sink;
  const std::vector<ObservedWorker> empty = {Worker("w1"), Worker("w2")};
  ASSERT_TRUE(allocator->ModelRound(At(kSecond, empty), sink).ok());
  ASSERT_EQ(sink.loads.size(), 2u);
  // The next report does not show the loads yet: nothing more is asked.
  ASSERT_TRUE(allocator->ModelRound(At(2 * kSecond, empty), sink).ok());
  EXPECT_EQ(sink.loads.size(), 2u);
  // Once they ended and show, the plan is met: still nothing.
  for (auto& l : sink.loads) l.done();
  ASSERT_TRUE(allocator
                  ->ModelRound(At(3 * kSecond, {Worker("w1", {{"fast-m", 1}}),
                                                Worker("w2", {{"slow-m", 2}})}),
                               sink)
                  .ok());
  EXPECT_EQ(sink.loads.size(), 2u);
  EXPECT_TRUE(sink.removes.empty());
}

TEST_F(PipelineAllocatorTest, ABurstScalesEveryStageUpAndTheQuietAfterItDown) {
  auto allocator = Make();
  RecordingSink sink;
  const std::vector<ObservedWorker> planned = {Worker("w1", {{"fast-m", 1}}),
                                               Worker("w2", {{"slow-m", 2}})};
  // At the planned 50 qps nothing moves.
  for (int t = 1; t <= 5; ++t) {
    ASSERT_TRUE(allocator->ModelRound(At(t * kSecond, planned, 50), sink).ok());
  }
  EXPECT_TRUE(sink.loads.empty());
  EXPECT_TRUE(sink.decisions.empty());
  // 100 qps: k = ceil(100 · s / (µ · ρ)): fast 2, slow 4.
  ASSERT_TRUE(allocator->ModelRound(At(6 * kSecond, planned, 100), sink).ok());
  EXPECT_THAT(allocator->Replicas("fashion", "cascade"), ElementsAre(2, 4));
  ASSERT_FALSE(sink.decisions.empty());
  EXPECT_EQ(sink.decisions[0].kind, "pipeline-up");
  EXPECT_THAT(sink.decisions[0].reason, HasSubstr("100.0 qps"));
  EXPECT_EQ(Loaded(sink), (std::map<std::string, int>{{"fast-m", 1}, {"slow-m", 2}}));
  for (auto& l : sink.loads) l.done();
  // Then 10 qps, each round's report showing what was decided: the
  // scale-down waits for the quiet period (15 s after the rise: 21 s; the
  // live envelope spans the planning trace's 1 s, so the burst has left
  // it); then it drops to ceil(λ · s / (µ · ρ_p)) with λ the peak of the
  // last 30 s in 5 s windows: one replica each.
  sink.decisions.clear();
  for (int t = 7; t <= 60; ++t) {
    const std::vector<int32_t> r = allocator->Replicas("fashion", "cascade");
    ASSERT_TRUE(allocator
                    ->ModelRound(At(t * kSecond, {Worker("w1", {{"fast-m", r[0]}}),
                                                  Worker("w2", {{"slow-m", r[1]}})},
                                    10),
                                 sink)
                    .ok());
  }
  ASSERT_FALSE(sink.decisions.empty());
  EXPECT_EQ(sink.decisions[0].kind, "pipeline-down");
  EXPECT_EQ(sink.decisions[0].at, 21 * kSecond);
  EXPECT_THAT(allocator->Replicas("fashion", "cascade"), ElementsAre(1, 1));
  std::map<std::string, int> removed;
  for (const Decision& d : sink.decisions) {
    if (d.kind == "pipeline-remove") removed[d.target] += d.replicas;
  }
  EXPECT_EQ(removed, (std::map<std::string, int>{{"fast-m:v", 1}, {"slow-m:v", 3}}));
}

TEST_F(PipelineAllocatorTest, TheAllocatorBesideItSeesEverythingButTheStages) {
  auto allocator = Make();
  RecordingSink sink;
  ASSERT_TRUE(allocator
                  ->ModelRound(At(kSecond, {Worker("w1", {{"fast-m", 1}}),
                                            Worker("w2", {{"slow-m", 2}, {"other", 1}}),
                                            Worker("w3", {{"other", 1}})}),
                               sink)
                  .ok());
  ASSERT_EQ(inner_->shown.size(), 1u);
  const Observation& shown = inner_->shown[0];
  ASSERT_EQ(shown.models.size(), 1u);
  EXPECT_EQ(shown.models[0].name, "other");
  EXPECT_TRUE(shown.pipelines.empty());
  // w1 holds only a stage: hidden. w2 is shown without its stage, never idle.
  ASSERT_EQ(shown.workers.size(), 2u);
  EXPECT_EQ(shown.workers[0].id, "w2");
  ASSERT_EQ(shown.workers[0].instances.size(), 1u);
  EXPECT_EQ(shown.workers[0].instances[0].key.model, "other");
  EXPECT_FALSE(shown.workers[0].idle_since.has_value());
  EXPECT_EQ(shown.workers[1].id, "w3");
  EXPECT_TRUE(shown.workers[1].idle_since.has_value());
}

TEST_F(PipelineAllocatorTest, WithoutPipelinesTheAllocatorBesideItSeesItAll) {
  auto allocator = Make();
  RecordingSink sink;
  Observation o = At(kSecond, {Worker("w1", {{"fast-m", 1}})});
  o.pipelines.clear();
  ASSERT_TRUE(allocator->ModelRound(o, sink).ok());
  ASSERT_EQ(inner_->shown.size(), 1u);
  EXPECT_EQ(inner_->shown[0].models.size(), 3u);
  EXPECT_EQ(inner_->shown[0].workers.size(), 1u);
  EXPECT_TRUE(sink.loads.empty());
}

TEST_F(PipelineAllocatorTest, AShortTypeAsksForWorkersUpToItsMaximum) {
  options_.types = {{"c4", 1, 4000, 0.1}};  // one replica a worker
  options_.max_workers["c4"] = 2;
  auto allocator = Make();
  RecordingSink sink;
  // Three replicas wanted, one worker free: two more would do, the maximum
  // allows one.
  ASSERT_TRUE(allocator->ClusterRound(At(kSecond, {Worker("w1")}), sink).ok());
  EXPECT_THAT(sink.added, ElementsAre("c4"));
  // A starting worker counts as free cores.
  RecordingSink again;
  ObservedWorker starting = Worker("starting-c4-0");
  starting.starting = true;
  options_.max_workers["c4"] = 10;
  auto roomy = Make();
  ASSERT_TRUE(roomy->ClusterRound(At(kSecond, {Worker("w1"), starting}), again).ok());
  EXPECT_THAT(again.added, ElementsAre("c4"));
}

TEST_F(PipelineAllocatorTest, ANewPlanStartsTheTunerOver) {
  auto allocator = Make();
  RecordingSink sink;
  const std::vector<ObservedWorker> planned = {Worker("w1", {{"fast-m", 1}}),
                                               Worker("w2", {{"slow-m", 2}})};
  ASSERT_TRUE(allocator->ModelRound(At(kSecond, planned, 100), sink).ok());
  EXPECT_THAT(allocator->Replicas("fashion", "cascade"), ElementsAre(2, 4));
  pipeline_.plan_id = 2;
  pipeline_.plan.planned_rates = {200};
  ASSERT_TRUE(allocator->ModelRound(At(2 * kSecond, planned, 100), sink).ok());
  EXPECT_THAT(allocator->Replicas("fashion", "cascade"), ElementsAre(1, 2));
}

}  // namespace
}  // namespace maitre::control
