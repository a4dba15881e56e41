// Builds the selection policy's index from a catalog snapshot: every ready
// variant that has at least one profile, with the worker-type table, keeping
// the previous index's ids stable. Also the latency objective each model's
// instances are judged against (its app's default).
//
// Thread-safety: pure functions.
#pragma once

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "controller/models/catalog.h"
#include "core/worker_type.h"
#include "policy/selection_index.h"

namespace maitre::controller {

absl::StatusOr<policy::SelectionIndex> BuildSelectionIndex(const CatalogSnapshot& catalog,
                                                           const WorkerTypeTable& types,
                                                           const policy::SelectionIndex* previous);

// By model name: the app's default latency_ms, for models whose app has one.
std::map<std::string, double> ModelSloMs(const CatalogSnapshot& catalog);

}  // namespace maitre::controller
