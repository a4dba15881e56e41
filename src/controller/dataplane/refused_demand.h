// Demand the controller turned away before it reached any worker: queries
// that selection answered "unavailable" (no instance could take them in
// time, or none was ready). Workers never see these queries, so their
// arrival rates, and with them the model autoscaler's offered load, would
// stop at what the loaded instances already accept, and nothing would scale
// up. The dispatcher counts them here per app; the scaling loop takes the
// counts every model round and hands them to the allocator, which spreads
// them over the instances serving the app (control/refused_share.h).
//
// Thread-safety: thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace maitre::controller {

class RefusedDemand {
 public:
  // `rows` of a query for `app` were refused.
  void Add(const std::string& app, int64_t rows);
  // Rows refused per app since the last call; resets the counts.
  std::map<std::string, int64_t> Take();

 private:
  absl::Mutex mu_;
  std::map<std::string, int64_t> rows_ ABSL_GUARDED_BY(mu_);
};

}  // namespace maitre::controller
