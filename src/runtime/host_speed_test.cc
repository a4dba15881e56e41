#include "runtime/host_speed.h"

#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "core/file_util.h"
#include "gtest/gtest.h"
#include "runtime/testing/zoo.h"

namespace maitre::runtime {
namespace {

TEST(HostSpeedProbeTest, SlowdownIsRelativeToTheFastestTimeSeen) {
  HostSpeedProbe probe(SteadyClock::Get());
  EXPECT_EQ(probe.Slowdown(5.0), 1.0) << "nothing measured yet";
  double first = probe.Measure();
  ASSERT_GT(first, 0);
  double fastest = first;
  for (int i = 0; i < 4; ++i) fastest = std::min(fastest, probe.Measure());
  EXPECT_DOUBLE_EQ(probe.Slowdown(fastest), 1.0);
  EXPECT_DOUBLE_EQ(probe.Slowdown(1.5 * fastest), 1.5);
  EXPECT_DOUBLE_EQ(probe.Slowdown(0.5 * fastest), 1.0) << "never below 1";
}

double ReadBaseline(const std::string& path) {
  auto text = ReadFileToString(path);
  double ms = 0;
  if (!text.ok() || !absl::SimpleAtod(absl::StripAsciiWhitespace(*text), &ms)) return -1;
  return ms;
}

// A worker that starts inside a slow stretch must still see it as slow: the
// fastest time outlives the process in the baseline file.
TEST(HostSpeedProbeTest, TheBaselineFileOutlivesTheProbe) {
  testing::ScopedTempDir dir;
  const std::string file = dir.path() + "/host-speed-cpu-1";
  double fastest = 0;
  {
    HostSpeedProbe first(SteadyClock::Get(), file);
    EXPECT_EQ(first.Slowdown(5.0), 1.0) << "no file yet: nothing known";
    fastest = first.Measure();
    EXPECT_DOUBLE_EQ(ReadBaseline(file), fastest) << "the first time is written down";
  }
  // A later probe starts from the file: a time twice the stored one is slow
  // before this probe has measured anything.
  HostSpeedProbe later(SteadyClock::Get(), file);
  EXPECT_DOUBLE_EQ(later.Slowdown(2 * fastest), 2.0);

  // A stored time faster than anything this host does stays the baseline.
  ASSERT_TRUE(WriteFileAtomically(file, "1e-9\n").ok());
  HostSpeedProbe optimistic(SteadyClock::Get(), file);
  EXPECT_GT(optimistic.Slowdown(optimistic.Measure()), 1000);
  EXPECT_DOUBLE_EQ(ReadBaseline(file), 1e-9);

  // A slower stored time is replaced by the first faster measurement; a
  // file that is not a number starts from nothing.
  for (const char* stored : {"1e9\n", "not a number"}) {
    ASSERT_TRUE(WriteFileAtomically(file, stored).ok());
    HostSpeedProbe probe(SteadyClock::Get(), file);
    const double measured = probe.Measure();
    EXPECT_DOUBLE_EQ(probe.Slowdown(measured), 1.0) << stored;
    EXPECT_DOUBLE_EQ(ReadBaseline(file), measured) << stored;
  }
}

}  // namespace
}  // namespace maitre::runtime
