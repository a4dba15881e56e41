#include "policy/autoscaling_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "policy/testing/scaling_variant.h"
#include "policy/testing/test_profiles.h"

namespace maitre::policy {
namespace {

using Kind = ModelScaleAction::Kind;

ScalingVariant V(std::string name, double qps, double cost, double load_s, int replicas = 0,
                 double accuracy = 0.9) {
  return testing::MakeVariant(std::move(name), qps, cost, load_s, replicas, accuracy);
}

ModelScalingSnapshot Worker(double cores, std::vector<ScalingVariant> variants, double load) {
  ModelScalingSnapshot s;
  s.cores = cores;
  s.memory_mb = 4096;
  ScalingModel m;
  m.model = "cnn";
  m.load_qps = load;
  m.variants = std::move(variants);
  s.models.push_back(m);
  return s;
}

ModelScalingSnapshot Memory(double mb, ModelScalingSnapshot s) {
  s.memory_mb = mb;
  return s;
}

std::unique_ptr<ModelAutoscaler> Make(ModelAutoscalerOptions o = {}) {
  auto a = ModelAutoscaler::Create(o);
  EXPECT_TRUE(a.ok()) << a.status();
  return *std::move(a);
}

// ---- scale-up: one table, one decision each ----

struct ScaleUpCase {
  std::string name;
  ModelScalingSnapshot snapshot;
  ModelAutoscalerOptions options;
  // Expected: kind, from, remove, to, add ("" / 0 where not applicable);
  // `none` when no action is expected.
  bool none = false;
  Kind kind = Kind::kReplicate;
  std::string from;
  int remove = 0;
  std::string to;
  int add = 0;
};

ModelAutoscalerOptions Lambda(double lambda) {
  ModelAutoscalerOptions o;
  o.lambda_per_s = lambda;
  return o;
}

ModelAutoscalerOptions HorizontalOnly() {
  ModelAutoscalerOptions o;
  o.allow_upgrade = false;
  o.allow_downgrade = false;
  return o;
}

ModelAutoscalerOptions AccuracyDrop(double drop) {
  ModelAutoscalerOptions o;
  o.max_accuracy_drop = drop;
  return o;
}

std::vector<ScaleUpCase> ScaleUpCases() {
  // u: 10 qps per replica at $1/s, w: 100 qps at $1.5/s. A load of 50 qps
  // needs 52.5 qps: replicating u takes 5 more (5·1·1.1 = 5.5), upgrading
  // takes one w and frees u (1.5·1.1 − 1 = 0.65).
  auto u = [](int n) { return V("u", 10, 1, 1, n); };
  auto w = [](double cost, double load_s = 1, double accuracy = 0.9) {
    return V("w", 100, cost, load_s, 0, accuracy);
  };
  std::vector<ScaleUpCase> cases;
  cases.push_back({"enough headroom", Worker(8, {u(6), w(1.5)}, 57), {}, /*none=*/true});
  cases.push_back({"at exactly the slack", Worker(8, {u(1), w(1.5)}, 10 / 1.05), {}, true});
  cases.push_back({"idle model", Worker(8, {u(1), w(1.5)}, 0), {}, true});
  cases.push_back({"only variant: replicate", Worker(8, {u(1)}, 50), {}, false, Kind::kReplicate,
                   "", 0, "u", 5});
  cases.push_back({"upgrade is cheaper", Worker(8, {u(1), w(1.5)}, 50), {}, false, Kind::kUpgrade,
                   "u", 1, "w", 1});
  cases.push_back({"upgrade too costly", Worker(8, {u(1), w(20)}, 50), {}, false,
                   Kind::kReplicate, "", 0, "u", 5});
  cases.push_back({"long load time tips it to replicate", Worker(8, {u(1), w(1.5, 100)}, 50), {},
                   false, Kind::kReplicate, "", 0, "u", 5});
  cases.push_back({"lambda 0 ignores the load time", Worker(8, {u(1), w(1.5, 100)}, 50),
                   Lambda(0), false, Kind::kUpgrade, "u", 1, "w", 1});
  cases.push_back({"horizontal only", Worker(8, {u(1), w(1.5)}, 50), HorizontalOnly(), false,
                   Kind::kReplicate, "", 0, "u", 5});
  cases.push_back({"replicate does not fit: upgrade", Worker(3, {u(1), w(20)}, 50), {}, false,
                   Kind::kUpgrade, "u", 1, "w", 1});
  // Cores are counted once the switch is done: a one-core worker can switch
  // its replica. (Until 2026-11-27 the transition's peak had to fit, two
  // cores, and this asked for placement elsewhere.)
  cases.push_back({"a full worker can switch", Worker(1, {u(1), w(1.5)}, 50), {}, false,
                   Kind::kUpgrade, "u", 1, "w", 1});
  // Memory is counted at the peak: with room for one replica only, nothing
  // fits. Elsewhere there is nothing to replace: the suggestion is the
  // cheapest addition, one w.
  cases.push_back({"nothing fits", Memory(150, Worker(1, {u(1), w(1.5)}, 50)), {}, false,
                   Kind::kNeedsPlacement, "", 0, "w", 1});
  cases.push_back({"less accurate variant is no upgrade", Worker(8, {u(1), w(1.5, 1, 0.85)}, 50),
                   {}, false, Kind::kReplicate, "", 0, "u", 5});
  cases.push_back({"unless the drop is allowed", Worker(8, {u(1), w(1.5, 1, 0.85)}, 50),
                   AccuracyDrop(0.05), false, Kind::kUpgrade, "u", 1, "w", 1});
  cases.push_back({"nothing running: cheapest first load", Worker(8, {u(0), w(1.5)}, 50), {},
                   false, Kind::kReplicate, "", 0, "w", 1});
  ScalingVariant slow = V("slow", 0, 1, 1, 1);
  cases.push_back({"no variant meets the SLO", Worker(8, {slow}, 5), {}, false,
                   Kind::kNeedsPlacement, "", 0, "", 0});
  return cases;
}

TEST(ModelAutoscalerTest, ScaleUpTable) {
  for (const ScaleUpCase& c : ScaleUpCases()) {
    SCOPED_TRACE(c.name);
    auto autoscaler = Make(c.options);
    auto decision = autoscaler->Decide(c.snapshot, {}, 0);
    ASSERT_TRUE(decision.ok()) << decision.status();
    if (c.none) {
      EXPECT_THAT(decision->actions, ::testing::IsEmpty());
      continue;
    }
    ASSERT_EQ(decision->actions.size(), 1u);
    const ModelScaleAction& a = decision->actions[0];
    EXPECT_EQ(ModelScaleActionKindName(a.kind), ModelScaleActionKindName(c.kind)) << a.reason;
    EXPECT_EQ(a.model, "cnn");
    EXPECT_EQ(a.from_variant, c.from);
    EXPECT_EQ(a.remove, c.remove);
    EXPECT_EQ(a.to_variant, c.to);
    EXPECT_EQ(a.add, c.add);
    EXPECT_FALSE(a.reason.empty());
  }
}

TEST(ModelAutoscalerTest, TopsUpWithASmallVariant) {
  // 210 qps needed, 100 there: two more u (4.4) or eleven x (3.63) cost more
  // than one u and one x (2.2 + 0.33).
  auto d = Make()->Decide(Worker(8, {V("u", 100, 2, 1, 1), V("x", 10, 0.3, 1)}, 200), {}, 0);
  ASSERT_TRUE(d.ok());
  ASSERT_EQ(d->actions.size(), 2u);
  EXPECT_EQ(d->actions[0].kind, Kind::kReplicate);
  EXPECT_EQ(d->actions[0].to_variant, "u");
  EXPECT_EQ(d->actions[0].add, 1);
  EXPECT_EQ(d->actions[1].kind, Kind::kAddVariant);
  EXPECT_EQ(d->actions[1].to_variant, "x");
  EXPECT_EQ(d->actions[1].add, 1);
  EXPECT_NEAR(d->actions[0].cost_per_s + d->actions[1].cost_per_s, 2.2 + 0.33, 1e-12);
}

TEST(ModelAutoscalerTest, MoveCostFollowsTheFormula) {
  auto decision = Make()->Decide(Worker(8, {V("u", 10, 1, 1, 1), V("w", 100, 1.5, 2)}, 50), {}, 0);
  ASSERT_TRUE(decision.ok());
  ASSERT_EQ(decision->actions.size(), 1u);
  // C_w·(1 + λ·T_w·1) − C_u·1 with λ = 0.1, T_w = 2.
  EXPECT_DOUBLE_EQ(decision->actions[0].cost_per_s, 1.5 * (1 + 0.1 * 2) - 1);
}

TEST(ModelAutoscalerTest, NeedsPlacementCarriesTheDeficitAndDemand) {
  auto decision = Make()->Decide(Worker(1, {V("u", 10, 1, 1, 1)}, 50), {}, 0);
  ASSERT_TRUE(decision.ok());
  ASSERT_EQ(decision->actions.size(), 1u);
  const ModelScaleAction& a = decision->actions[0];
  EXPECT_EQ(a.kind, Kind::kNeedsPlacement);
  EXPECT_DOUBLE_EQ(a.deficit_qps, 52.5 - 10);
  EXPECT_EQ(a.cores_per_replica, 1);
  EXPECT_EQ(a.memory_mb_per_replica, 100);
}

TEST(ModelAutoscalerTest, LoadingReplicasCountAsCapacity) {
  ScalingVariant u = V("u", 100, 1, 5, 1);
  u.loading = 1;
  auto decision = Make()->Decide(Worker(8, {u}, 150), {}, 0);
  ASSERT_TRUE(decision.ok());
  EXPECT_THAT(decision->actions, ::testing::IsEmpty());
}

TEST(ModelAutoscalerTest, MinReplicasKeptOnUpgrade) {
  // Replacing both u by one cheap w would be cheapest (0.55 − 2), but two
  // replicas must stay: two w (1.1 − 2) beat one w for one u (0.55 − 1).
  ModelAutoscalerOptions o;
  o.min_replicas_per_model = 2;
  auto decision = Make(o)->Decide(Worker(8, {V("u", 10, 1, 1, 2), V("w", 100, 0.5, 1)}, 50), {}, 0);
  ASSERT_TRUE(decision.ok());
  ASSERT_EQ(decision->actions.size(), 1u);
  EXPECT_EQ(decision->actions[0].kind, Kind::kUpgrade);
  EXPECT_EQ(decision->actions[0].remove, 2);
  EXPECT_EQ(decision->actions[0].add, 2);
}

TEST(ModelAutoscalerTest, PartialSwitchAndAddingAlongside) {
  // Three u at $1 and a w of 100 qps at $3: at 110 qps (115.5 needed)
  // replacing one u by one w leaves 120 qps for 3.3 − 1; replacing all three
  // takes two w (6.6 − 3), adding w alongside 3.3.
  auto d = Make()->Decide(Worker(8, {V("u", 10, 1, 1, 3), V("w", 100, 3, 1)}, 110), {}, 0);
  ASSERT_TRUE(d.ok());
  ASSERT_EQ(d->actions.size(), 1u);
  EXPECT_EQ(d->actions[0].kind, Kind::kUpgrade);
  EXPECT_EQ(d->actions[0].remove, 1);
  EXPECT_EQ(d->actions[0].add, 1);
  EXPECT_NEAR(d->actions[0].cost_per_s, 2.3, 1e-12);
  // A replica still loading is never switched away: with one ready u and
  // two loading, switching the ready one costs 3.3 − 1 and keeps the two.
  ScalingVariant loading = V("u", 10, 1, 1, 1);
  loading.loading = 2;
  d = Make()->Decide(Worker(8, {loading, V("w", 100, 3, 1)}, 110), {}, 0);
  ASSERT_TRUE(d.ok());
  ASSERT_EQ(d->actions.size(), 1u);
  EXPECT_EQ(d->actions[0].kind, Kind::kUpgrade);
  EXPECT_EQ(d->actions[0].remove, 1);
  EXPECT_EQ(d->actions[0].add, 1);
  // Nothing ready to switch: w goes alongside.
  loading.replicas = 0;
  loading.loading = 3;
  d = Make()->Decide(Worker(8, {loading, V("w", 100, 3, 1)}, 110), {}, 0);
  ASSERT_TRUE(d.ok());
  ASSERT_EQ(d->actions.size(), 1u);
  EXPECT_EQ(d->actions[0].kind, Kind::kAddVariant);
  EXPECT_EQ(d->actions[0].to_variant, "w");
  EXPECT_EQ(d->actions[0].add, 1);
}

TEST(ModelAutoscalerTest, MemoryIsRespected) {
  ModelScalingSnapshot s = Worker(8, {V("u", 10, 1, 1, 1)}, 50);
  s.memory_mb = 300;  // room for two more replicas of 100 MB, not five
  auto decision = Make()->Decide(s, {}, 0);
  ASSERT_TRUE(decision.ok());
  ASSERT_EQ(decision->actions.size(), 1u);
  EXPECT_EQ(decision->actions[0].kind, Kind::kNeedsPlacement);
}

TEST(ModelAutoscalerTest, ScarceCoresGoToTheMostStarvedModel) {
  ModelScalingSnapshot s;
  s.cores = 4;  // two spare
  ScalingModel a{"a", 12, {V("x", 10, 1, 1, 1)}, std::nullopt};  // headroom 0.83
  ScalingModel b{"b", 20, {V("y", 10, 1, 1, 1)}, std::nullopt};  // headroom 0.5
  s.models = {a, b};
  auto decision = Make()->Decide(s, {}, 0);
  ASSERT_TRUE(decision.ok());
  ASSERT_EQ(decision->actions.size(), 2u);
  EXPECT_EQ(decision->actions[0].model, "b");
  EXPECT_EQ(decision->actions[0].kind, Kind::kReplicate);
  EXPECT_EQ(decision->actions[0].add, 2);
  EXPECT_EQ(decision->actions[1].model, "a");
  EXPECT_EQ(decision->actions[1].kind, Kind::kNeedsPlacement);
}

// ---- scale-down: driven over time with the state passed back ----

// Runs the autoscaler at `times` (seconds) with the loads given, applying
// each decision at once; returns the times at which it acted.
struct Trajectory {
  std::vector<std::pair<double, ModelScaleAction>> actions;
  ModelScalingSnapshot last;
};
Trajectory Drive(const ModelAutoscaler& a, ModelScalingSnapshot s,
          const std::vector<std::pair<double, double>>& time_and_load) {
  Trajectory run;
  ModelAutoscalerState state;
  for (auto [t, load] : time_and_load) {
    s.models[0].load_qps = load;
    auto d = a.Decide(s, state, FromSeconds(t));
    EXPECT_TRUE(d.ok()) << d.status();
    for (const ModelScaleAction& action : d->actions) run.actions.push_back({t, action});
    s = ApplyModelScaleActions(s, d->actions, /*completed=*/true);
    state = d->state;
  }
  run.last = s;
  return run;
}

std::vector<std::pair<double, double>> Steady(double load, int seconds, double from = 0) {
  std::vector<std::pair<double, double>> out;
  for (int i = 0; i <= seconds; ++i) out.push_back({from + i, load});
  return out;
}

TEST(ModelAutoscalerTest, RemovesAReplicaOnlyAfterTheLoadTime) {
  // Three replicas of 100 qps at 100 qps: two would do (200 >= 1.15·100),
  // one would not. The variant loads in 5 s.
  auto a = Make();
  Trajectory run = Drive(*a, Worker(8, {V("u", 100, 1, 5, 3)}, 100), Steady(100, 20));
  ASSERT_EQ(run.actions.size(), 1u);
  EXPECT_EQ(run.actions[0].first, 5);
  EXPECT_EQ(run.actions[0].second.kind, Kind::kRemoveReplica);
  EXPECT_EQ(run.last.models[0].variants[0].replicas, 2);
}

TEST(ModelAutoscalerTest, MinimumWaitAppliesToFastLoadingVariants) {
  auto a = Make();  // min_scale_down_wait = 3 s
  Trajectory run = Drive(*a, Worker(8, {V("u", 100, 1, 0.05, 2)}, 50), Steady(50, 10));
  ASSERT_EQ(run.actions.size(), 1u);
  EXPECT_EQ(run.actions[0].first, 3);
}

TEST(ModelAutoscalerTest, ARecentPeakHoldsTheReplica) {
  auto a = Make();
  std::vector<std::pair<double, double>> loads = Steady(100, 20);
  loads[3].second = 190;  // 200 qps of two replicas would not keep 1.15x headroom
  Trajectory run = Drive(*a, Worker(8, {V("u", 100, 1, 5, 3)}, 100), loads);
  ASSERT_EQ(run.actions.size(), 1u);
  EXPECT_EQ(run.actions[0].first, 9);  // once the peak is more than 5 s old
}

TEST(ModelAutoscalerTest, DowngradesToACheaperVariant) {
  // One expensive replica of 100 qps at 20 qps; a 30 qps variant at a tenth
  // of the price covers 1.15·20 = 23.
  auto a = Make();
  Trajectory run = Drive(*a, Worker(8, {V("big", 100, 10, 2, 1), V("small", 30, 1, 1)}, 20),
                  Steady(20, 10));
  ASSERT_EQ(run.actions.size(), 1u);
  EXPECT_EQ(run.actions[0].first, 3);
  const ModelScaleAction& d = run.actions[0].second;
  EXPECT_EQ(d.kind, Kind::kDowngrade);
  EXPECT_EQ(d.from_variant, "big");
  EXPECT_EQ(d.to_variant, "small");
  EXPECT_EQ(d.add, 1);
  EXPECT_EQ(d.remove, 1);
}

TEST(ModelAutoscalerTest, KeepsTheLastReplicaOfAnIdleModel) {
  auto a = Make();
  Trajectory run = Drive(*a, Worker(8, {V("u", 100, 1, 1, 3)}, 0), Steady(0, 30));
  EXPECT_EQ(run.actions.size(), 2u);
  EXPECT_EQ(run.last.models[0].variants[0].replicas, 1);
}

TEST(ModelAutoscalerTest, NoScaleDownWhileLoading) {
  ScalingVariant u = V("u", 100, 1, 1, 3);
  u.loading = 1;
  auto a = Make();
  ModelAutoscalerState state;
  for (int t = 0; t <= 10; ++t) {
    auto d = a->Decide(Worker(8, {u}, 10), state, FromSeconds(t));
    ASSERT_TRUE(d.ok());
    EXPECT_THAT(d->actions, ::testing::IsEmpty()) << "t=" << t;
    state = d->state;
  }
}

TEST(ModelAutoscalerTest, HistoryStaysBounded) {
  auto a = Make();
  ModelAutoscalerState state;
  ModelScalingSnapshot s = Worker(8, {V("u", 100, 1, 5, 1)}, 10);
  for (int t = 0; t < 1000; ++t) {
    auto d = a->Decide(s, state, FromSeconds(t));
    ASSERT_TRUE(d.ok());
    state = d->state;
  }
  // Five seconds of load time: six samples and the one proving coverage.
  EXPECT_LE(state.history["cnn"].size(), 7u);
  // A model that disappears takes its history with it.
  s.models[0].model = "other";
  auto d = a->Decide(s, state, FromSeconds(1000));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->state.history.count("cnn"), 0u);
}

TEST(ModelAutoscalerTest, WorkerHeadroomIsReported) {
  auto d = Make()->Decide(Worker(8, {V("u", 100, 1, 1, 2)}, 50), {}, 0);
  ASSERT_TRUE(d.ok());
  EXPECT_DOUBLE_EQ(d->headroom, 4);
}

TEST(ModelAutoscalerTest, BuildsVariantsFromProfiles) {
  WorkerType type{"cpu-2", 2, 4096, 0.085};
  std::vector<LatencyPoint> points = {{1, 5, 6}, {8, 20, 24}};
  Profile profile = *Profile::Create(points, 250, 512);
  ScalingVariant v = MakeScalingVariant("torch", 0.9, profile, 40, type);
  EXPECT_DOUBLE_EQ(v.saturation_qps, profile.SaturationQps(40));
  EXPECT_DOUBLE_EQ(v.load_s, 0.25);
  EXPECT_DOUBLE_EQ(v.memory_mb, 512);
  EXPECT_DOUBLE_EQ(v.cores, 1);
  // One core of two is the dominant share: half the worker's price.
  EXPECT_DOUBLE_EQ(v.cost_per_s, 0.085 / 3600 / 2);
  EXPECT_DOUBLE_EQ(ReplicaCostPerSecond(type, 0.5, 3072), 0.085 / 3600 * 0.75);
}

TEST(ModelAutoscalerTest, RejectsBadOptionsAndSnapshots) {
  ModelAutoscalerOptions o;
  o.slack = 0.9;
  EXPECT_FALSE(ModelAutoscaler::Create(o).ok());
  o = {};
  o.scale_down_headroom = 1.0;
  EXPECT_FALSE(ModelAutoscaler::Create(o).ok());
  o = {};
  o.lambda_per_s = -1;
  EXPECT_FALSE(ModelAutoscaler::Create(o).ok());

  auto a = Make();
  ModelScalingSnapshot twice = Worker(8, {V("u", 10, 1, 1, 1), V("u", 20, 1, 1)}, 5);
  EXPECT_EQ(a->Decide(twice, {}, 0).status().code(), absl::StatusCode::kInvalidArgument);
  ModelScalingSnapshot negative = Worker(8, {V("u", 10, 1, 1, 1)}, -5);
  EXPECT_EQ(a->Decide(negative, {}, 0).status().code(), absl::StatusCode::kInvalidArgument);
  for (double busy : {-0.1, 1.5, std::nan("")}) {
    ModelScalingSnapshot odd = Worker(8, {V("u", 10, 1, 1, 1)}, 5);
    odd.models[0].busy = busy;
    EXPECT_EQ(a->Decide(odd, {}, 0).status().code(), absl::StatusCode::kInvalidArgument) << busy;
  }
}

TEST(ModelAutoscalerTest, ApplyShowsTheTransitionPeak) {
  ModelScalingSnapshot s = Worker(8, {V("u", 10, 1, 1, 1), V("w", 100, 1.5, 1)}, 50);
  auto d = Make()->Decide(s, {}, 0);
  ASSERT_TRUE(d.ok());
  ModelScalingSnapshot peak = ApplyModelScaleActions(s, d->actions, /*completed=*/false);
  EXPECT_EQ(peak.models[0].variants[0].replicas, 1);
  EXPECT_EQ(peak.models[0].variants[1].loading, 1);
  EXPECT_DOUBLE_EQ(UsedCores(peak), 2);
  ModelScalingSnapshot after = ApplyModelScaleActions(s, d->actions, /*completed=*/true);
  EXPECT_EQ(after.models[0].variants[0].replicas, 0);
  EXPECT_EQ(after.models[0].variants[1].replicas, 1);
  EXPECT_DOUBLE_EQ(UsedCores(after), 1);
}

}  // namespace
}  // namespace maitre::policy
