// The worker's connection to its controller (maitre.worker.v1.Membership):
// joining, the periodic monitoring report that is the source of truth for
// instance states, and fetching model files.
//
// Thread-safety: thread-safe.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "core/clock.h"
#include "maitre/worker.grpc.pb.h"
#include "worker/instance_manager.h"

namespace maitre::worker {

struct Registration {
  std::string worker_id;
  Nanos report_interval = 500 * kMillisecond;
  int cores = 1;
  int64_t memory_mb = 0;
  std::string batching_policy;
};

class ControllerLink final : public BlobSource {
 public:
  struct Options {
    std::string controller;    // host:port of the controller's gRPC endpoint
    std::string worker_type;
    std::string launch_token;  // set by the controller's local provider
    // The cluster's join token, presented when registering; the session
    // token the controller answers with is presented after that.
    std::string join_token;
    // What the controller's calls to this worker must carry.
    std::string call_token;
    const Clock* clock = SteadyClock::Get();
  };
  explicit ControllerLink(Options options);

  // Registers this worker, reachable at `address`, retrying until it
  // succeeds, `timeout` passes, or *stop is set.
  absl::StatusOr<Registration> Register(const std::string& address, Nanos timeout,
                                        const StopSignal* stop);

  // Sends one report. Returns NotFound when the controller no longer knows
  // this worker (it restarted) so the caller registers again.
  absl::Status Report(InstanceManager& manager, double cpu_utilisation, double memory_mb);

  absl::Status Fetch(const std::string& hash, const std::string& path) override;

 private:
  // The worker's id, and a context carrying its session token.
  std::string Authenticate(grpc::ClientContext* context, Nanos timeout);

  // How long a fetch waits for the registration under way to be answered.
  static constexpr absl::Duration kRegistrationWait = absl::Seconds(60);

  const Options options_;
  std::unique_ptr<v1::Membership::Stub> stub_;
  absl::Mutex mu_;
  std::string worker_id_ ABSL_GUARDED_BY(mu_);
  std::string session_token_ ABSL_GUARDED_BY(mu_);
};

}  // namespace maitre::worker
