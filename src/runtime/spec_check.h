// Internal to src/runtime: the spec checks both executors share, kept apart
// so that neither executor's runtime headers leak into the other.
//
// Thread-safety: free functions without shared state.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/model_spec.h"
#include "core/tensor.h"

namespace maitre::runtime::internal {

// Checks Run's inputs positionally against spec.inputs: count, dtype, shape
// (-1 = any), byte size and one shared batch size >= 1, which it returns.
absl::StatusOr<int64_t> CheckInputsInOrder(const ModelSpec& spec,
                                           const std::vector<Tensor>& inputs);

// Checks one produced output's shape: same rank as the spec, dimension 0
// equal to `batch`, other dimensions equal where the spec fixes them.
absl::Status CheckOutputShape(const TensorSpec& spec, absl::Span<const int64_t> shape,
                              int64_t batch);

// Checks that a spec can drive an executor: at least one input and one
// output, named, with fixed-size dtypes and a batch dimension.
absl::Status CheckSpecUsable(const ModelSpec& spec);

// Runtime error texts run to pages (TorchScript tracebacks, C++ backtraces).
// Keeps the line that says what went wrong, capped to a readable length.
std::string SummarizeRuntimeError(absl::string_view message);

}  // namespace maitre::runtime::internal
