// The `maitre serve` process around a controller: signals, the descriptor
// limit and the drain on SIGTERM (docs/architecture.md, "Shutting down").
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>

#include "controller/serve.h"
#include "core/clock.h"
#include "core/logging.h"

namespace maitre::controller {
namespace {

// Raises the soft descriptor limit to the hard one: each HTTP connection,
// worker channel and registry file takes a descriptor, and the HTTP
// connection cap is half of what this allows.
void RaiseDescriptorLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
  limit.rlim_cur = limit.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
    spdlog::warn("maitre serve: cannot raise the descriptor limit to {}", limit.rlim_max);
  }
}

// After the first SIGTERM or SIGINT: no new requests, and up to the grace
// period for those already received (docs/architecture.md, "Shutting
// down"). Waiting on the signals between checks lets a second one cut the
// drain short.
void Drain(ControllerHandle& controller, const sigset_t& signals, double grace_s) {
  controller.BeginDrain();
  const Clock* clock = SteadyClock::Get();
  const Nanos give_up = clock->Now() + FromSeconds(grace_s);
  for (int left = controller.Unanswered(); left > 0; left = controller.Unanswered()) {
    const Nanos now = clock->Now();
    if (now >= give_up) {
      spdlog::warn(
          "maitre serve: the drain grace of {} s passed with {} request(s) unanswered; "
          "stopping anyway",
          grace_s, left);
      return;
    }
    const Nanos wait = std::min<Nanos>(give_up - now, 10 * kMillisecond);
    const timespec timeout{static_cast<time_t>(wait / kSecond), static_cast<long>(wait % kSecond)};
    if (const int sig = sigtimedwait(&signals, nullptr, &timeout); sig > 0) {
      spdlog::warn("maitre serve: signal {} again, stopping now with {} request(s) unanswered", sig,
                   left);
      return;
    }
  }
  spdlog::info("maitre serve: every request received was answered");
}

}  // namespace

int RunServe(const ServeOptions& options) {
  // Signals are taken synchronously; block them before any thread starts so
  // that every thread inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  RaiseDescriptorLimit();
  auto controller = StartController(options);
  if (!controller.ok()) {
    spdlog::error("maitre serve: {}", controller.status().message());
    return 1;
  }
  int sig = 0;
  sigwait(&signals, &sig);
  spdlog::info("maitre serve: signal {}, draining: no new requests, up to {} s for those in flight",
               sig, options.drain_grace_s);
  Drain(**controller, signals, options.drain_grace_s);
  controller->reset();
  spdlog::info("maitre serve: stopped");
  return 0;
}

}  // namespace maitre::controller
