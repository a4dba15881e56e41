// `maitre serve --burst-pool SPEC` (docs/operations.md, "The burst pool"):
// "on" for the defaults, or comma-separated key=value pairs overriding them:
//   warm=1 max=2 concurrency=32 busy_at=4 keep_warm_s=600 cores=1
//   memory_mb=4096 price_per_request=4.31e-7 price_per_hour=0
// The pool's worker type is named "burst" and bought on the "burst" market.
//
// Thread-safety: pure functions.
#pragma once

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "controller/dataplane/burst_pool.h"

namespace maitre::controller {

// The pool's sizes, timing and type from SPEC; InvalidArgument naming the
// bad pair (an unknown key, a value that is not a number, or out of range).
// Options the spec does not cover (clock, control queue, cost meter,
// connect) are left at their defaults.
absl::StatusOr<BurstPool::Options> ParseBurstPoolSpec(absl::string_view spec);

}  // namespace maitre::controller
