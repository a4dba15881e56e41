#include "controller/jobs/job_state.h"

#include <gtest/gtest.h>

namespace maitre::jobs {
namespace {

constexpr JobState kAll[] = {JobState::kQueued,    JobState::kRunning, JobState::kPaused,
                             JobState::kSucceeded, JobState::kFailed,  JobState::kCancelled};

TEST(JobStateTest, NamesRoundTrip) {
  for (JobState s : kAll) {
    auto parsed = ParseJobState(JobStateName(s));
    ASSERT_TRUE(parsed.ok()) << JobStateName(s);
    EXPECT_EQ(*parsed, s);
  }
  EXPECT_EQ(JobStateName(JobState::kPaused), "paused");
  EXPECT_EQ(ParseJobState("done").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(JobStateTest, TerminalStates) {
  EXPECT_FALSE(IsTerminal(JobState::kQueued));
  EXPECT_FALSE(IsTerminal(JobState::kRunning));
  EXPECT_FALSE(IsTerminal(JobState::kPaused));
  EXPECT_TRUE(IsTerminal(JobState::kSucceeded));
  EXPECT_TRUE(IsTerminal(JobState::kFailed));
  EXPECT_TRUE(IsTerminal(JobState::kCancelled));
}

// The whole transition table, written out as the header's diagram says.
TEST(JobStateTest, EveryTransitionIsAsDocumented) {
  using S = JobState;
  struct Row {
    S from;
    S to;
    bool allowed;
  };
  const Row table[] = {
      {S::kQueued, S::kRunning, true},    {S::kQueued, S::kPaused, true},
      {S::kQueued, S::kSucceeded, false}, {S::kQueued, S::kFailed, true},
      {S::kQueued, S::kCancelled, true},  {S::kRunning, S::kQueued, false},
      {S::kRunning, S::kPaused, true},    {S::kRunning, S::kSucceeded, true},
      {S::kRunning, S::kFailed, true},    {S::kRunning, S::kCancelled, true},
      {S::kPaused, S::kQueued, false},    {S::kPaused, S::kRunning, true},
      {S::kPaused, S::kSucceeded, true},  {S::kPaused, S::kFailed, true},
      {S::kPaused, S::kCancelled, true},
  };
  int checked = 0;
  for (const Row& row : table) {
    EXPECT_EQ(CanTransition(row.from, row.to), row.allowed)
        << JobStateName(row.from) << " -> " << JobStateName(row.to);
    ++checked;
  }
  // Nothing leaves a terminal state, and no state moves to itself.
  for (S from : kAll) {
    EXPECT_FALSE(CanTransition(from, from)) << JobStateName(from);
    if (!IsTerminal(from)) continue;
    for (S to : kAll) EXPECT_FALSE(CanTransition(from, to)) << JobStateName(from);
  }
  EXPECT_EQ(checked, 15);
}

}  // namespace
}  // namespace maitre::jobs
