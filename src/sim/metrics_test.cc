#include "sim/metrics.h"

#include <gtest/gtest.h>

namespace maitre::sim {
namespace {

TEST(LatencyHistogramTest, PercentilesWithinBucketError) {
  LatencyHistogram h;
  EXPECT_EQ(h.Percentile(50), 0);
  for (Nanos v = 1; v <= 100000; ++v) h.Record(v * kMicrosecond);  // 1 µs .. 100 ms
  EXPECT_EQ(h.count(), 100000);
  EXPECT_EQ(h.max(), 100 * kMillisecond);
  for (double p : {1.0, 50.0, 90.0, 99.0, 99.9}) {
    double expected = p / 100 * 100000 * kMicrosecond;
    EXPECT_NEAR(static_cast<double>(h.Percentile(p)), expected, expected * 0.016) << p;
  }
  EXPECT_EQ(h.Percentile(100), 100 * kMillisecond);
}

TEST(LatencyHistogramTest, SmallAndHugeValues) {
  LatencyHistogram h;
  h.Record(0);
  h.Record(5);
  h.Record(-3);  // clamped to 0
  h.Record(INT64_MAX / 2);
  EXPECT_EQ(h.count(), 4);
  EXPECT_EQ(h.Percentile(50), 0);
  EXPECT_EQ(h.Percentile(75), 5);
  EXPECT_EQ(h.Percentile(100), INT64_MAX / 2);
}

TEST(CountersTest, ViolationsAndResolved) {
  Counters c;
  c.completed = 10;
  c.late = 3;
  c.dropped = 2;
  c.rejected = 1;
  EXPECT_EQ(c.violations(), 6);
  EXPECT_EQ(c.resolved(), 13);
}

}  // namespace
}  // namespace maitre::sim
