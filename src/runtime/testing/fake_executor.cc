#include "runtime/testing/fake_executor.h"

#include <cmath>

namespace maitre::runtime::testing {

FakeExecutor::Compute EchoClassifier(int classes) {
  return [classes](const std::vector<Tensor>& inputs) -> absl::StatusOr<std::vector<Tensor>> {
    if (inputs.size() != 1 || inputs[0].dtype != DataType::kFp32 || inputs[0].shape.size() != 2) {
      return absl::InvalidArgumentError("EchoClassifier takes one FP32 [N, K] input");
    }
    const Tensor& in = inputs[0];
    int64_t n = in.shape[0], k = in.shape[1];
    Tensor out;
    out.name = "logits";
    out.dtype = DataType::kFp32;
    out.shape = {n, classes};
    out.data.assign(static_cast<size_t>(n * classes) * sizeof(float), '\0');
    for (int64_t r = 0; r < n; ++r) {
      long c = std::lround(in.As<float>()[r * k]);
      if (c >= 0 && c < classes) out.MutableAs<float>()[r * classes + c] = 1;
    }
    return std::vector<Tensor>{std::move(out)};
  };
}

}  // namespace maitre::runtime::testing
