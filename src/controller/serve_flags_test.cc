// serve's mark flags: what each value becomes, and that a bad one is refused
// by the allocator's validation with a message that names it.
#include "controller/serve_flags.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "control/mark_allocator.h"

namespace maitre::controller {
namespace {

using ::testing::HasSubstr;

TEST(MarkOfTest, TheUnitAndCoolDownFlagsSetTheAllocatorsWindowsAndCoolDown) {
  ServeOptions options;
  options.mark_unit_s = 10;
  options.mark_cool_down_s = 15;
  options.mark_launch_s = 5;
  const control::MarkOptions mark = MarkOf(options);
  EXPECT_EQ(mark.windows.unit, 10 * kSecond);
  EXPECT_EQ(mark.windows.sample, 5 * kSecond);  // MArk's P_s, unchanged
  EXPECT_EQ(mark.cool_down, 15 * kSecond);
  EXPECT_EQ(mark.default_launch_time, 5 * kSecond);
  EXPECT_TRUE(control::ValidateMarkOptions(mark).ok());
}

TEST(MarkOfTest, TheDefaultsAreMArksMinute) {
  const control::MarkOptions mark = MarkOf(ServeOptions{});
  EXPECT_EQ(mark.windows.unit, 60 * kSecond);
  EXPECT_EQ(mark.cool_down, 60 * kSecond);
  EXPECT_TRUE(control::ValidateMarkOptions(mark).ok());
}

TEST(MarkOfTest, AUnitThatIsNotWholeSampleWindowsOrOutOfRangeIsRefused) {
  for (double unit_s : {7.5, 2.0, 0.0, -10.0, 1e9}) {
    ServeOptions options;
    options.mark_unit_s = unit_s;
    absl::Status refused = control::ValidateMarkOptions(MarkOf(options));
    EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << unit_s;
    EXPECT_THAT(refused.message(), HasSubstr("prediction unit")) << unit_s;
  }
  ServeOptions options;
  options.mark_cool_down_s = -1;
  absl::Status refused = control::ValidateMarkOptions(MarkOf(options));
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.message(), HasSubstr("cool_down"));
}

}  // namespace
}  // namespace maitre::controller
