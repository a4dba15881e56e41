// The validation set a developer registers with a model (docs/api.md, "Files"):
// an uncompressed .npz holding `inputs` (the model's input dtype and shape with
// a leading batch dimension) and `labels` (int64, one per row).
//
// Thread-safety: Valset is a value type; the functions have no shared state.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/model_spec.h"
#include "core/tensor.h"

namespace maitre {

struct Valset {
  Tensor inputs;  // [N, ...]
  Tensor labels;  // INT64 [N]

  int64_t size() const { return inputs.shape.empty() ? 0 : inputs.shape[0]; }
};

// Parses and validates a validation set: both arrays present, inputs with a
// batch dimension and at least one row, labels INT64 and 1-D with one entry
// per input row. Other arrays in the file are ignored. Errors are
// InvalidArgument and name what is wrong.
absl::StatusOr<Valset> ParseValset(absl::string_view npz_bytes);

// OK when the model's single input accepts the valset's inputs (same dtype,
// same rank, and every non-batch dimension equal where the spec fixes it)
// and every label is a class its first output can name: at least 0, and
// below the output's last dimension where the spec fixes it.
// A model with several inputs cannot be evaluated on a valset.
absl::Status CheckValsetFits(const Valset& valset, const ModelSpec& spec);

// Rows [begin, end) of `t` as a new tensor with the same name and dtype.
absl::StatusOr<Tensor> SliceRows(const Tensor& t, int64_t begin, int64_t end);

}  // namespace maitre
