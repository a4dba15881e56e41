#include "policy/prediction/peak_tracker.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace maitre::policy {
namespace {

using ::testing::DoubleEq;
using ::testing::ElementsAre;

TEST(UnitPeakTrackerTest, EachUnitsBusiestWindowMean) {
  // Units of 10 s, windows of 5 s, a reading every second from t = 100 s.
  UnitPeakTracker tracker({10 * kSecond, 5, 5 * kSecond});
  const double unit0[] = {1, 1, 1, 1, 1, 4, 4, 4, 2, 2};  // windows 1 and 3.2
  const double unit1[] = {6, 6, 6, 6, 6, 0, 0, 0, 0, 0};  // windows 6 and 0
  Nanos t = 100 * kSecond;
  auto feed = [&](const double(&rates)[10]) {
    for (double q : rates) {
      tracker.Add(t, q);
      t += kSecond;
    }
  };
  feed(unit0);
  EXPECT_TRUE(tracker.peaks().empty());
  EXPECT_THAT(tracker.current_peak(), DoubleEq(3.2));
  feed(unit1);
  tracker.Add(t, 2);  // opens unit 2
  EXPECT_THAT(tracker.peaks(), ElementsAre(DoubleEq(3.2), DoubleEq(6)));
  EXPECT_THAT(tracker.current_peak(), DoubleEq(2));
  EXPECT_EQ(tracker.current_unit_start(), 120 * kSecond);
}

TEST(UnitPeakTrackerTest, UnitsWithoutReadingsPeakAtZeroAndOldReadingsAreIgnored) {
  UnitPeakTracker tracker({10 * kSecond, 5, 5 * kSecond});
  tracker.Add(0, 5);
  tracker.Add(31 * kSecond, 1);  // units 1 and 2 saw nothing
  tracker.Add(20 * kSecond, 99);  // from the past
  EXPECT_THAT(tracker.peaks(), ElementsAre(5, 0, 0));
  EXPECT_THAT(tracker.current_peak(), DoubleEq(1));
}

TEST(UnitPeakTrackerTest, NegativeRatesCountAsZero) {
  UnitPeakTracker tracker({10 * kSecond, 5, 5 * kSecond});
  EXPECT_FALSE(tracker.started());
  tracker.Add(0, -3);
  EXPECT_TRUE(tracker.started());
  EXPECT_THAT(tracker.current_peak(), DoubleEq(0));
}

}  // namespace
}  // namespace maitre::policy
