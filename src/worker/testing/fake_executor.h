// An executor for tests: output row i is the sum of input row i's values,
// shape [N,1] FP32. It can be held busy until the test releases it, and it
// records the batch sizes it ran.
//
// Thread-safety: thread-safe.
#pragma once

#include <vector>

#include "absl/synchronization/mutex.h"
#include "runtime/executor.h"

namespace maitre::worker::testing {

class FakeExecutor final : public runtime::Executor {
 public:
  absl::StatusOr<std::vector<Tensor>> Run(const std::vector<Tensor>& inputs) override {
    {
      absl::MutexLock lock(&mu_);
      ++running_;
      mu_.Await(absl::Condition(&open_));
      batches_.push_back(inputs[0].shape[0]);
      --running_;
    }
    const Tensor& in = inputs[0];
    int64_t rows = in.shape[0];
    int64_t per_row = rows > 0 ? in.NumElements() / rows : 0;
    Tensor out{"sum", DataType::kFp32, {rows, 1}, std::string(rows * sizeof(float), '\0')};
    for (int64_t r = 0; r < rows; ++r) {
      float sum = 0;
      for (int64_t i = 0; i < per_row; ++i) sum += in.As<float>()[r * per_row + i];
      out.MutableAs<float>()[r] = sum;
    }
    return std::vector<Tensor>{std::move(out)};
  }

  // While closed, Run blocks.
  void Close() {
    absl::MutexLock lock(&mu_);
    open_ = false;
  }
  void Open() {
    absl::MutexLock lock(&mu_);
    open_ = true;
  }
  void AwaitRunning(int n) {
    absl::MutexLock lock(&mu_);
    auto enough = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return running_ >= n; };
    mu_.Await(absl::Condition(&enough));
  }
  std::vector<int64_t> batches() {
    absl::MutexLock lock(&mu_);
    return batches_;
  }

 private:
  absl::Mutex mu_;
  bool open_ ABSL_GUARDED_BY(mu_) = true;
  int running_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<int64_t> batches_ ABSL_GUARDED_BY(mu_);
};

}  // namespace maitre::worker::testing
