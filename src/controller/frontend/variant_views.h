// Views of an app's variants for people and for other tools: an aligned
// table (one row per variant and worker type: accuracy, load time, p50 at
// batch 1, maximum throughput, memory, price) and the profile CSV
// (docs/api.md, "Files").
//
// Thread-safety: pure functions over an immutable snapshot.
#pragma once

#include <string>

#include "controller/models/catalog.h"
#include "core/worker_type.h"

namespace maitre::controller {

// Every model of `app`, or of every app when `app` is empty.
std::string VariantTable(const CatalogSnapshot& catalog, const std::string& app,
                         const WorkerTypeTable& types);

std::string VariantProfileCsv(const CatalogSnapshot& catalog, const std::string& app);

}  // namespace maitre::controller
