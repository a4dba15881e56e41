// Properties of the model autoscaler over random worker snapshots
// (docs/policies.md, "Model autoscaler", "Tests"): it never exceeds the
// worker's memory during a transition or its cores after one, a scale-up
// restores the headroom, and a steady load never makes it flap.
#include <random>

#include <gtest/gtest.h>

#include "policy/autoscaling_model.h"
#include "policy/autoscaling_random.h"

namespace maitre::policy {
namespace {

using Kind = ModelScaleAction::Kind;
constexpr double kEps = 1e-6;

std::unique_ptr<ModelAutoscaler> Make(ModelAutoscalerOptions o = {}) { return *ModelAutoscaler::Create(o); }

// Replicas that were loading in the random snapshot become ready.
ModelScalingSnapshot FinishLoads(ModelScalingSnapshot s) {
  for (ScalingModel& m : s.models) {
    for (ScalingVariant& v : m.variants) {
      v.replicas += v.loading;
      v.loading = 0;
    }
  }
  return s;
}

const ScalingModel& ModelNamed(const ModelScalingSnapshot& s, const std::string& name) {
  for (const ScalingModel& m : s.models) {
    if (m.model == name) return m;
  }
  static const ScalingModel none;
  return none;
}

TEST(ModelAutoscalerPropertyTest, NeverExceedsResourcesAndRestoresHeadroom) {
  std::mt19937_64 rng(7);
  for (bool horizontal_only : {false, true}) {
    ModelAutoscalerOptions o;
    o.allow_upgrade = o.allow_downgrade = !horizontal_only;
    auto a = Make(o);
    int scaled = 0, placed = 0;
    for (int i = 0; i < 2000; ++i) {
      ModelScalingSnapshot s = testing::RandomScalingSnapshot(rng);
      SCOPED_TRACE(i);
      auto d = a->Decide(s, {}, 0);
      ASSERT_TRUE(d.ok()) << d.status();
      // Memory during the transition (new replicas loading, old ones not
      // yet gone) and after it; cores after it (a loading replica runs no
      // batches, and the ones it replaces drain as soon as it serves).
      for (bool completed : {false, true}) {
        ModelScalingSnapshot next = ApplyModelScaleActions(s, d->actions, completed);
        if (completed) EXPECT_LE(UsedCores(next), s.cores + kEps);
        EXPECT_LE(UsedMemoryMb(next), s.memory_mb + kEps);
      }
      ModelScalingSnapshot after = ApplyModelScaleActions(s, d->actions, /*completed=*/true);
      for (const ModelScaleAction& action : d->actions) {
        const ScalingModel& m = ModelNamed(after, action.model);
        if (action.kind == Kind::kNeedsPlacement) {
          ++placed;
          EXPECT_GT(action.deficit_qps, 0);
          continue;
        }
        ++scaled;
        EXPECT_GE(ModelCapacityQps(m), o.slack * m.load_qps - kEps) << action.reason;
        if (horizontal_only) EXPECT_EQ(action.kind, Kind::kReplicate);
      }
      // Every model below the slack got one move: one action, or two
      // additions (a top-up); the others got none.
      for (const ScalingModel& m : s.models) {
        bool starved = ModelCapacityQps(m) < o.slack * m.load_qps - 1e-9;
        int count = 0, additions = 0;
        for (const ModelScaleAction& action : d->actions) {
          if (action.model != m.model) continue;
          ++count;
          additions += action.kind == Kind::kReplicate || action.kind == Kind::kAddVariant;
        }
        if (!starved) {
          EXPECT_EQ(count, 0) << m.model;
        } else if (count != 1) {
          EXPECT_EQ(count, 2) << m.model;
          EXPECT_EQ(additions, 2) << m.model;
        }
      }
    }
    EXPECT_GT(scaled, 500);
    EXPECT_GT(placed, 10);
  }
}

// Under a steady load the autoscaler scales up, then only down, then stops:
// no scale-up ever follows a scale-down, and the last minute is quiet.
TEST(ModelAutoscalerPropertyTest, NoFlappingUnderSteadyLoad) {
  std::mt19937_64 rng(11);
  auto a = Make();
  testing::RandomScalingOptions shape;
  shape.min_headroom = 0.3;
  shape.max_headroom = 4;  // some start over-provisioned
  for (int i = 0; i < 300; ++i) {
    SCOPED_TRACE(i);
    ModelScalingSnapshot s = testing::RandomScalingSnapshot(rng, shape);
    ModelAutoscalerState state;
    std::map<std::string, bool> went_down;
    int last_action = -1;
    for (int t = 0; t < 240; ++t) {
      auto d = a->Decide(s, state, FromSeconds(t));
      ASSERT_TRUE(d.ok());
      for (const ModelScaleAction& action : d->actions) {
        if (action.kind == Kind::kNeedsPlacement) continue;  // the load stays unserved here
        last_action = t;
        // Only a starved model is scaled up; any other move is a scale-down.
        const ScalingModel& before = ModelNamed(s, action.model);
        bool up = ModelCapacityQps(before) < a->options().slack * before.load_qps;
        if (up) {
          EXPECT_FALSE(went_down[action.model]) << "scale-up after scale-down: " << action.reason;
        } else {
          went_down[action.model] = true;
        }
      }
      // Loads complete within the second: the setup moves straight on.
      s = FinishLoads(ApplyModelScaleActions(s, d->actions, /*completed=*/true));
      state = d->state;
    }
    EXPECT_LT(last_action, 180) << "still acting after three minutes of steady load";
  }
}

// Headroom never falls below the slack after a scale-down, at any steady
// load: what is removed was truly spare.
TEST(ModelAutoscalerPropertyTest, ScaleDownKeepsHeadroom) {
  std::mt19937_64 rng(13);
  auto a = Make();
  testing::RandomScalingOptions shape;
  shape.min_headroom = 1.2;
  shape.max_headroom = 6;
  for (int i = 0; i < 300; ++i) {
    ModelScalingSnapshot s = testing::RandomScalingSnapshot(rng, shape);
    ModelAutoscalerState state;
    for (int t = 0; t < 60; ++t) {
      auto d = a->Decide(s, state, FromSeconds(t));
      ASSERT_TRUE(d.ok());
      s = FinishLoads(ApplyModelScaleActions(s, d->actions, /*completed=*/true));
      state = d->state;
      for (const ScalingModel& m : s.models) {
        EXPECT_GE(ModelCapacityQps(m), a->options().scale_down_headroom * m.load_qps - kEps)
            << "model " << m.model << " at t=" << t;
      }
    }
  }
}

}  // namespace
}  // namespace maitre::policy
