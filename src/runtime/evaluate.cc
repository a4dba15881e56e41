#include "runtime/evaluate.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace maitre::runtime {

absl::StatusOr<Accuracy> EvaluateTop1(Executor& executor, const Valset& valset, int batch_size) {
  if (batch_size < 1) return absl::InvalidArgumentError("batch_size must be at least 1");
  const int64_t n = valset.size();
  if (n < 1 || valset.labels.dtype != DataType::kInt64 || valset.labels.shape.size() != 1 ||
      valset.labels.shape[0] != n || !valset.labels.Validate().ok()) {
    return absl::InvalidArgumentError(
        "the validation set needs at least one row and one int64 label per row");
  }
  const int64_t* labels = valset.labels.As<int64_t>();
  int64_t correct = 0;
  std::vector<Tensor> batch(1);
  for (int64_t begin = 0; begin < n; begin += batch_size) {
    int64_t end = std::min<int64_t>(n, begin + batch_size);
    MAITRE_ASSIGN_OR_RETURN(batch[0], SliceRows(valset.inputs, begin, end));
    absl::StatusOr<std::vector<Tensor>> outputs = executor.Run(batch);
    if (!outputs.ok()) {
      return absl::Status(outputs.status().code(),
                          absl::StrCat("evaluating rows [", begin, ", ", end,
                                       "): ", outputs.status().message()));
    }
    const Tensor& scores = outputs->at(0);
    const int64_t rows = end - begin;
    if (scores.dtype != DataType::kFp32 || scores.shape.empty() || scores.shape[0] != rows ||
        scores.NumElements() < rows || scores.NumElements() % rows != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the model's first output is ", DataTypeName(scores.dtype), " ",
          ShapeToString(scores.shape), "; top-1 needs FP32 scores with one row per example"));
    }
    const int64_t classes = scores.NumElements() / rows;
    const float* s = scores.As<float>();
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = s + r * classes;
      int64_t best = std::max_element(row, row + classes) - row;
      if (best == labels[begin + r]) ++correct;
    }
  }
  Accuracy accuracy;
  accuracy.examples = n;
  accuracy.top1 = static_cast<double>(correct) / static_cast<double>(n);
  return accuracy;
}

}  // namespace maitre::runtime
