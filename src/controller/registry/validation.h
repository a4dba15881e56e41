// Checks the registry's stores apply to records before writing them, shared
// by the Registry (apps, models, variants, profiles) and the JobStore (offline
// jobs), so that a name or a requirement means the same in both.
//
// Thread-safety: pure functions; safe from any thread.
#pragma once

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/variant.h"

namespace maitre::registry {

// Names of apps, models, variants, worker types and jobs: 1 to 128
// characters from [A-Za-z0-9._-]. They appear in URL paths
// (/v2/models/{name}) and variant ids ("model:variant"), so ':' and '/' are
// excluded. `what` names the field in the error ("app name").
absl::Status ValidateName(absl::string_view what, absl::string_view name);

// InvalidArgument unless `value` is a finite number in [0, 1]; `what` names
// it in the error.
absl::Status ValidateFraction(absl::string_view what, double value);

// Default or per-job requirements: a positive latency objective, an accuracy
// floor that is a fraction and a non-negative cost ceiling, each when set.
absl::Status ValidateRequirements(const Requirements& requirements);

}  // namespace maitre::registry
