#include "testing/wait.h"

#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"

namespace maitre::testing {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

void SleepSeconds(double s) {
  std::this_thread::sleep_for(std::chrono::microseconds(static_cast<int64_t>(s * 1e6)));
}

}  // namespace

absl::Status WaitOnProgress(const std::function<Progress()>& poll,
                            const ProgressWaitOptions& options) {
  const Clock::time_point start = Clock::now();
  Clock::time_point moved = start;
  Progress last = poll();
  while (!last.done) {
    if (SecondsSince(moved) >= options.stalled_after_s) {
      return absl::DeadlineExceededError(absl::StrCat(
          "no progress for ", options.stalled_after_s, " s; it stood at: ", last.where));
    }
    if (SecondsSince(start) >= options.at_most_s) {
      return absl::DeadlineExceededError(absl::StrCat(
          "not done after ", options.at_most_s, " s, though moving; it stood at: ", last.where));
    }
    SleepSeconds(options.poll_every_s);
    Progress now = poll();
    if (now.where != last.where) moved = Clock::now();
    last = std::move(now);
  }
  return absl::OkStatus();
}

bool WaitUntil(const std::function<bool()>& done, double seconds) {
  const Clock::time_point start = Clock::now();
  while (SecondsSince(start) < seconds) {
    if (done()) return true;
    SleepSeconds(0.1);
  }
  return done();
}

}  // namespace maitre::testing
