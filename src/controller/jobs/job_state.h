// The lifecycle of an offline job (docs/architecture.md, "Lifecycles"): an
// explicit enum and the transitions it allows. The job runner is the only
// writer of job states and checks every change here first.
//
//   queued ──started──────────────► running
//   queued ──head of the queue, ────► paused
//            online load high
//   running ──online load high────► paused
//   paused ──calm again───────────► running
//   running | paused ──all rows done────────────► succeeded
//            (a chunk sent before a pause may be the last one)
//   queued | running | paused ──cancel──────────► cancelled
//   queued | running | paused ──permanent error─► failed
//
// succeeded, failed and cancelled are terminal. A controller restart is not
// a transition: a job keeps the state it had and the runner takes it up
// again (a running job resumes after its last durable chunk).
//
// Thread-safety: pure functions over values; safe from any thread.
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace maitre::jobs {

enum class JobState {
  kQueued,     // accepted and stored; waiting for the jobs ahead of it
  kRunning,    // its chunks are being sent through the serving path
  kPaused,     // throttled: online load is high (it holds its place in line)
  kSucceeded,  // every row has a durable result; outputs are complete
  kFailed,     // stopped by an error that retrying cannot fix (see `error`)
  kCancelled,  // stopped by a client
};

// "queued", "running", "paused", "succeeded", "failed", "cancelled".
absl::string_view JobStateName(JobState state);
// The inverse of JobStateName; InvalidArgument for anything else.
absl::StatusOr<JobState> ParseJobState(absl::string_view name);

bool IsTerminal(JobState state);
// Whether the lifecycle above allows `from` -> `to` (a state to itself is
// not a transition and is refused).
bool CanTransition(JobState from, JobState to);

}  // namespace maitre::jobs
