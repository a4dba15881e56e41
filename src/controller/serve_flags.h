// What `maitre serve`'s command-line values mean for the controller it
// starts: the data directory, the worker binary, the worker counts, the
// spot types' price traces and the mark allocator's options. Each names the
// flag in its error, so that a bad value fails the start with a clear
// message.
//
// Thread-safety: plain functions.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "control/allocator.h"
#include "controller/serve.h"
#include "core/time.h"
#include "core/worker_type.h"

namespace maitre::controller {

// The mark allocator's options; out-of-range values become ones that
// control::ValidateMarkOptions refuses.
control::MarkOptions MarkOf(const ServeOptions& options);

// $MAITRE_DATA_DIR, else ~/.local/share/maitre.
std::string DefaultDataDir();

// This process's own executable, which local workers run.
std::string SelfExecutable();

// --workers / --max-workers: "type:count,..." over known types.
absl::StatusOr<std::vector<std::pair<std::string, int>>> ParseWorkerCounts(
    absl::string_view spec, const WorkerTypeTable& types);

// --price-traces TYPE=FILE,...: each named spot type's price follows its
// trace from `origin` (docs/operations.md, "Spot prices").
absl::StatusOr<WorkerTypeTable> WithPriceTraces(absl::string_view spec,
                                                const WorkerTypeTable& types, Nanos origin);

}  // namespace maitre::controller
