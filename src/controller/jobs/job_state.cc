#include "controller/jobs/job_state.h"

#include "absl/strings/str_cat.h"

namespace maitre::jobs {
namespace {

constexpr JobState kAllStates[] = {JobState::kQueued,    JobState::kRunning, JobState::kPaused,
                                   JobState::kSucceeded, JobState::kFailed,  JobState::kCancelled};

}  // namespace

absl::string_view JobStateName(JobState state) {
  switch (state) {
    case JobState::kQueued:
      return "queued";
    case JobState::kRunning:
      return "running";
    case JobState::kPaused:
      return "paused";
    case JobState::kSucceeded:
      return "succeeded";
    case JobState::kFailed:
      return "failed";
    case JobState::kCancelled:
      return "cancelled";
  }
  return "unknown";
}

absl::StatusOr<JobState> ParseJobState(absl::string_view name) {
  for (JobState s : kAllStates) {
    if (JobStateName(s) == name) return s;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown job state \"", name, "\""));
}

bool IsTerminal(JobState state) {
  return state == JobState::kSucceeded || state == JobState::kFailed ||
         state == JobState::kCancelled;
}

bool CanTransition(JobState from, JobState to) {
  if (from == to || IsTerminal(from)) return false;
  switch (to) {
    case JobState::kQueued:
      return false;  // nothing goes back into the queue
    case JobState::kRunning:
      return from == JobState::kQueued || from == JobState::kPaused;
    case JobState::kPaused:
      return from == JobState::kQueued || from == JobState::kRunning;
    case JobState::kSucceeded:
      return from == JobState::kRunning || from == JobState::kPaused;
    case JobState::kFailed:
    case JobState::kCancelled:
      return true;  // from any live state
  }
  return false;
}

}  // namespace maitre::jobs
