// ZeroRow: one row of zeros shaped like a model's inputs. The executor's
// load check, the worker's warm-up and quick profiles and the load generator
// without an input file all run a model on it, and used to build it each in
// their own way.
//
// Thread-safety: a pure function.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "core/model_spec.h"
#include "core/tensor.h"

namespace maitre {

// One tensor of zeros for each spec, in the specs' order: every -1
// (any-size) dimension becomes 1, so the batch is 1, and a fixed dimension
// is kept; an empty shape becomes [1], since a row needs a batch dimension.
// InvalidArgument for no specs, or a spec with no fixed-size datatype or an
// absurd size.
absl::StatusOr<std::vector<Tensor>> ZeroRow(const std::vector<TensorSpec>& specs);

}  // namespace maitre
