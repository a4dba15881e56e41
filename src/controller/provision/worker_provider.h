// Where the controller's workers come from (docs/architecture.md, "One
// control plane"): the allocator's sink asks a provider for workers of a
// type and gives idle ones back; the provider starts and stops them, and
// counts those asked for that have not joined yet. LocalProvider (worker
// processes on this machine) is the first implementation; process ids and
// core numbers stay inside it, so another provider (a cluster scheduler's)
// can replace it without touching the control layer.
//
// Thread-safety: implementations are thread-safe.
#pragma once

#include <map>
#include <string>

#include "core/worker_type.h"

namespace maitre::controller {

class WorkerProvider {
 public:
  virtual ~WorkerProvider() = default;
  // How many workers of `type` should run.
  virtual void SetDesired(const WorkerType& type, int count) = 0;
  virtual int Desired(const std::string& type) const = 0;
  // Stops the worker behind `worker_id` for good: one fewer of its type is
  // wanted, and it is that worker that goes. False if it is not one of ours.
  virtual bool Retire(const std::string& worker_id) = 0;
  // Workers asked for that have not joined yet, by type.
  virtual std::map<std::string, int> Starting() const = 0;
};

}  // namespace maitre::controller
