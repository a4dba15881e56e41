// Where the controller's workers come from (docs/architecture.md, "One
// control plane"): the allocator's sink asks a provider for workers of a
// type and gives idle ones back; the provider starts and stops them, counts
// those asked for that have not joined yet, and tells its listeners what
// happens to each. LocalProvider (worker processes on this machine) is the
// first implementation; process ids and core numbers stay inside it, so
// another provider (a cluster scheduler's) can replace it without touching
// the control layer.
//
// Thread-safety: implementations are thread-safe.
#pragma once

#include <functional>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "core/time.h"
#include "core/worker_type.h"

namespace maitre::controller {

// Something that happened to one worker a provider started.
struct WorkerEvent {
  enum class Kind {
    kStarted,  // asked for and launching; it joins with `launch_token`
    kReady,    // it joined the cluster as `worker_id`
    kLost,     // it ended without being asked to (`detail` says how)
    kRetired,  // it ended because it was retired or no longer wanted
    // A spot interruption notice: the worker is taken back at `stops_at`.
    // A replacement of its type is already asked for; the cluster must
    // send it nothing new and let what it holds finish by then
    // (docs/operations.md, "Spot interruptions"). It ends as kLost.
    kInterrupted,
  };
  Kind kind = Kind::kStarted;
  std::string type;
  std::string launch_token;
  std::string worker_id;  // once it joined
  Nanos at = 0;
  std::string detail;
  Nanos stops_at = 0;  // kInterrupted only
};

class WorkerProvider {
 public:
  virtual ~WorkerProvider() = default;
  // Adds a listener for every event from now on. Listeners are called on a
  // thread of the provider's, without its locks held, in the order the
  // events happened to each worker.
  virtual void OnEvent(std::function<void(const WorkerEvent&)> listener) = 0;
  // How many workers of `type` should run.
  virtual void SetDesired(const WorkerType& type, int count) = 0;
  virtual int Desired(const std::string& type) const = 0;
  // Stops the worker behind `worker_id` for good: one fewer of its type is
  // wanted, and it is that worker that goes. False if it is not one of ours.
  virtual bool Retire(const std::string& worker_id) = 0;
  // Workers asked for that have not joined yet, by type.
  virtual std::map<std::string, int> Starting() const = 0;
  // An interruption notice for the spot worker behind `worker_id`: it stops
  // `lead` from now, and listeners hear kInterrupted at once. A cloud's
  // provider calls this when its notice arrives; the local provider lets
  // an operator inject one. NotFound if it is not one of ours (or has not
  // joined), FailedPrecondition if it is on-demand or already interrupted.
  virtual absl::Status Interrupt(const std::string& worker_id, Nanos lead) = 0;
};

}  // namespace maitre::controller
