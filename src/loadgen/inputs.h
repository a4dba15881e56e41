// The tensors `maitre bench` sends: rows of an .npz file (docs/api.md, "Files":
// every array except "labels", split along the batch dimension), or one row of
// zeros shaped like the model's inputs, and the target's metadata that
// shapes them (GET /v2/models/{model}, or the first model of
// GET /v2/apps/{app}).
//
// Thread-safety: free functions without shared state.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/model_spec.h"
#include "core/tensor.h"
#include "core/time.h"
#include "core/zero_row.h"
#include "loadgen/transport.h"
#include "nlohmann/json.hpp"

namespace maitre::loadgen {

// Reads [{"name", "datatype", "shape"}, ...] as the metadata endpoints
// write it.
absl::StatusOr<std::vector<TensorSpec>> ParseTensorSpecs(const nlohmann::json& inputs);

// One request's inputs, all zeros, come from core's ZeroRow (zero_row.h).

// Splits the arrays of an .npz (held in memory) into rows of batch 1, at
// most `max_rows` of them (from the start of the file). Every array but
// "labels" is an input, and all must have the same number of rows. When
// `specs` is not empty the inputs take the model's names: by matching name,
// or, when both sides have exactly one input, the model's one name (a
// validation set's array is called "inputs" whatever the model calls it).
absl::StatusOr<std::vector<std::vector<Tensor>>> RowsFromNpz(
    absl::string_view npz_bytes, size_t max_rows, const std::vector<TensorSpec>& specs);

// Groups single-row requests into requests of `batch` rows each: request i
// holds rows i·batch, i·batch+1, ... taken cyclically, so there are as many
// requests as rows and every row is sent equally often. batch >= 1.
absl::StatusOr<std::vector<std::vector<Tensor>>> BatchRequests(
    const std::vector<std::vector<Tensor>>& rows, int batch);

struct TargetInfo {
  std::vector<TensorSpec> inputs;
  // An app's default latency objective, used as the SLO when none is given.
  std::optional<double> default_latency_ms;
  // An app's variants, "model:variant" -> accuracy, so that the answers'
  // variants give the effective accuracy.
  std::map<std::string, double> variant_accuracy;
};

// Asks the server (a base URL such as http://127.0.0.1:8000) about the
// target, over one blocking request.
absl::StatusOr<TargetInfo> FetchTargetInfo(const std::string& server_url, const Target& target,
                                           Nanos timeout);

}  // namespace maitre::loadgen
