// Waiting in end-to-end tests without a fixed budget. A busy or slow host
// takes longer to do the same work, so a test that gives up after N seconds
// fails there for no fault of the product. These waits give up only when
// the thing waited on stops moving, or after a limit far beyond any host
// that still works.
#pragma once

#include <functional>
#include <string>

#include "absl/status/status.h"

namespace maitre::testing {

// What a poll saw: whether the wait is over, and how far the work has got
// (any text that changes whenever it moves on, e.g. "12 of 32 profiled").
struct Progress {
  bool done = false;
  std::string where;
};

struct ProgressWaitOptions {
  double poll_every_s = 0.5;
  // Fails when `where` stays the same this long.
  double stalled_after_s = 300;
  // Fails after this long in all, moving or not.
  double at_most_s = 3600;
};

// Polls until `poll` says done. The error says where the work stood, and
// whether it stalled or ran out of the overall limit.
absl::Status WaitOnProgress(const std::function<Progress()>& poll,
                            const ProgressWaitOptions& options = {});

// Polls `done` every 100 ms until it holds or `seconds` pass; for things a
// working server does in well under a second, given a limit hundreds of
// times that.
bool WaitUntil(const std::function<bool()>& done, double seconds);

}  // namespace maitre::testing
