// Joining the tensors of several queries into one batch, and splitting a
// batch's outputs back into per-query results. The batcher hands the executor
// one joined input set; rows keep the order of the requests.
//
// Thread-safety: free functions without shared state; safe to call
// concurrently.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/tensor.h"

namespace maitre {

// Concatenates along the first (batch) dimension. Every request must hold the
// same number of tensors, and the k-th tensor of each must agree in name,
// dtype and every dimension after the first; each must be valid
// (Tensor::Validate) and have at least one dimension. The result's k-th
// tensor has the k-th name and the summed batch.
absl::StatusOr<std::vector<Tensor>> ConcatRows(
    const std::vector<const std::vector<Tensor>*>& requests);

// One request's rows repeated `copies` times (>= 1): a batch of that size
// made of one example, as the profiler and a replica's warm-up run.
absl::StatusOr<std::vector<Tensor>> TileRows(const std::vector<Tensor>& request, int copies);

// The inverse of ConcatRows: every output's first dimension must equal the
// sum of rows_per_request (each >= 0); request i receives rows
// [offset_i, offset_i + rows_i) of every output, names and dtypes kept.
absl::StatusOr<std::vector<std::vector<Tensor>>> SplitRows(
    const std::vector<Tensor>& outputs, const std::vector<int64_t>& rows_per_request);

}  // namespace maitre
