// How many queries of each app were answered, and how many of them within
// their objective: the measured service level the mark allocator's SLO
// monitor reads (docs/policies.md, "Provisioning ahead of demand (MArk)").
// The dispatcher counts every query it finishes; the scaling loop takes the
// counts every model round.
//
// Thread-safety: thread-safe.
#pragma once

#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "control/observation.h"

namespace maitre::controller {

class ServiceLevel {
 public:
  // One query of `app` resolved; `within` when answered within its objective.
  void Add(const std::string& app, bool within);
  // The counts per app since the last call; resets them.
  std::map<std::string, control::ServiceCount> Take();

 private:
  absl::Mutex mu_;
  std::map<std::string, control::ServiceCount> counts_ ABSL_GUARDED_BY(mu_);
};

}  // namespace maitre::controller
