#include "pipeline/coarse_grained_tuner.h"

#include <gtest/gtest.h>

namespace maitre::pipeline {
namespace {

CoarseGrainedTunerOptions Packing(double queries_per_unit) {
  CoarseGrainedTunerOptions o;
  o.packing_factor = queries_per_unit;
  o.idle_before_removal = 120 * kSecond;
  return o;
}

TEST(CoarseGrainedTunerTest, BadOptionsAreRefused) {
  EXPECT_FALSE(CoarseGrainedTuner::Create(Packing(0), 1).ok());
  EXPECT_FALSE(CoarseGrainedTuner::Create(Packing(-3), 1).ok());
  EXPECT_FALSE(CoarseGrainedTuner::Create(Packing(10), 0).ok());
  CoarseGrainedTunerOptions o = Packing(10);
  o.max_units = 4;
  EXPECT_FALSE(CoarseGrainedTuner::Create(o, 5).ok());
  EXPECT_TRUE(CoarseGrainedTuner::Create(o, 4).ok());
}

TEST(CoarseGrainedTunerTest, AddsUnitsOnlyOnceTheQueriesInTheSystemOverflowThem) {
  auto tuner = *CoarseGrainedTuner::Create(Packing(10), 2);
  EXPECT_EQ(tuner.Decide(1 * kSecond, 0), 2);
  EXPECT_EQ(tuner.Decide(2 * kSecond, 20), 2);  // two full units: still enough
  EXPECT_EQ(tuner.Decide(3 * kSecond, 21), 3);
  EXPECT_EQ(tuner.Decide(4 * kSecond, 95), 10);  // at once, not one a step
}

TEST(CoarseGrainedTunerTest, AnUnneededUnitGoesOnlyAfterTheWaitWithoutABreak) {
  auto tuner = *CoarseGrainedTuner::Create(Packing(10), 3);
  EXPECT_EQ(tuner.Decide(0, 5), 3);  // units 2 and 3 unneeded from 0 s
  EXPECT_EQ(tuner.Decide(60 * kSecond, 15), 3);  // unit 2 needed again
  EXPECT_EQ(tuner.Decide(119 * kSecond, 5), 3);
  // Unit 3 has waited 120 s; unit 2's wait restarted at 119 s.
  EXPECT_EQ(tuner.Decide(120 * kSecond, 5), 2);
  EXPECT_EQ(tuner.Decide(238 * kSecond, 0), 2);
  EXPECT_EQ(tuner.Decide(239 * kSecond, 0), 1);
  EXPECT_EQ(tuner.Decide(1000 * kSecond, 0), 1);  // never below min_units
}

TEST(CoarseGrainedTunerTest, UnitsUnneededTogetherGoTogether) {
  auto tuner = *CoarseGrainedTuner::Create(Packing(10), 1);
  EXPECT_EQ(tuner.Decide(0, 50), 5);
  EXPECT_EQ(tuner.Decide(1 * kSecond, 12), 5);  // units 3 to 5 unneeded from 1 s
  EXPECT_EQ(tuner.Decide(121 * kSecond, 12), 2);
}

}  // namespace
}  // namespace maitre::pipeline
