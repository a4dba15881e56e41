#include "core/cores.h"

#include <sched.h>

#include <thread>

#include "gtest/gtest.h"

namespace maitre {
namespace {

TEST(CoresTest, PinningNarrowsWhatTheThreadMayUseAndNotOthers) {
  const std::vector<int> all = AllowedCores();
  ASSERT_FALSE(all.empty());
  std::thread([&] {
    ASSERT_TRUE(PinCallingThread({all.back()}).ok());
    EXPECT_EQ(AllowedCores(), std::vector<int>{all.back()});
    EXPECT_EQ(sched_getcpu(), all.back());
    // A thread started now inherits the pinning.
    std::thread([&] { EXPECT_EQ(AllowedCores(), std::vector<int>{all.back()}); }).join();
  }).join();
  EXPECT_EQ(AllowedCores(), all) << "only the pinned thread changed";
}

TEST(CoresTest, BadCoresAreRefusedAndAnEmptyListChangesNothing) {
  const std::vector<int> all = AllowedCores();
  EXPECT_EQ(PinCallingThread({-1}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PinCallingThread({CPU_SETSIZE}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(PinCallingThread({}).ok());
  EXPECT_EQ(AllowedCores(), all);
}

}  // namespace
}  // namespace maitre
