// What a model takes and returns. Shapes use -1 for a dimension of any size;
// the first dimension of every input and output is the batch dimension.
//
// Thread-safety: value types; not synchronised.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/tensor.h"

namespace maitre {

// What a registration may declare: the most dimensions a tensor has, and
// the most elements in one row of it (every -1 read as 1): 2^26, 256 MiB of
// FP32, far above any model this serves, and far below a worker's memory.
inline constexpr size_t kMaxRank = 8;
inline constexpr int64_t kMaxRowElements = int64_t{1} << 26;

struct TensorSpec {
  std::string name;
  DataType dtype = DataType::kInvalid;
  std::vector<int64_t> shape;  // -1 = any size; shape[0] is the batch

  // OK when `t` has this spec's dtype and a shape that matches dimension by
  // dimension (-1 matches anything). The message names what differs.
  absl::Status Check(const Tensor& t) const;
};

enum class ModelFormat { kTorchScript, kOnnx };
absl::string_view ModelFormatName(ModelFormat format);  // "torchscript" | "onnx"
absl::StatusOr<ModelFormat> ParseModelFormat(absl::string_view name);

struct ModelSpec {
  ModelFormat format = ModelFormat::kTorchScript;
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
  // Top-1 accuracy the developer declares, used when no validation set is
  // given (the variants are then marked "declared").
  std::optional<double> declared_accuracy;

  // Checks a whole request: one tensor per declared input, by name (an
  // unnamed tensor is accepted as the only input of a model that has one),
  // every shape matching, and the same batch size in all inputs. Returns the
  // batch size.
  absl::StatusOr<int64_t> CheckInputs(const std::vector<Tensor>& inputs) const;

  // CheckInputs, then puts `inputs` in the spec's order: executors take
  // their inputs by position.
  absl::StatusOr<int64_t> CheckAndOrderInputs(std::vector<Tensor>* inputs) const;
};

// The registration `meta` JSON:
//   {"format": "torchscript"|"onnx",
//    "inputs":  [{"name": "input",  "datatype": "FP32", "shape": [-1,1,28,28]}],
//    "outputs": [{"name": "logits", "datatype": "FP32", "shape": [-1,10]}],
//    "accuracy": 0.91}                                   (optional)
absl::StatusOr<ModelSpec> ParseModelSpecJson(absl::string_view json);
std::string ModelSpecToJson(const ModelSpec& spec);

}  // namespace maitre
