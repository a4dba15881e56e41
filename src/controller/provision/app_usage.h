// What each app has used of the cluster since the server started, to split
// the cluster's cost among apps (docs/api.md, "The cluster"): the
// compute seconds of its answered queries, each query's share of its batch,
// and its queries charged by the request (sent to the burst pool), by the
// worker type that charged them.
//
// Thread-safety: thread-safe. The Add calls are on the data path: one short
// mutex section each.
#pragma once

#include <cstdint>
#include <map>
#include <functional>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace maitre::controller {

struct AppUsed {
  double compute_s = 0;  // seconds of worker compute, each query's batch share
  std::map<std::string, int64_t> requests_by_type;  // charged by the request

  int64_t requests() const;
};

class AppUsage {
 public:
  // One answered query of `app`: a batch of `batch_size` queries computed
  // for `compute_us`, of which this query is one (a batch size below 1
  // counts as 1).
  void AddCompute(absl::string_view app, int64_t compute_us, int batch_size);
  // One query of `app` charged by the request by a worker of `type`.
  void AddRequest(absl::string_view app, absl::string_view type);
  // Every app seen so far, by name.
  std::map<std::string, AppUsed> Snapshot() const;

 private:
  AppUsed& UsedBy(absl::string_view app) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::map<std::string, AppUsed, std::less<>> used_ ABSL_GUARDED_BY(mu_);
};

}  // namespace maitre::controller
