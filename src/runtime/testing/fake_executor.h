// A scripted Executor for tests of code above the runtime (evaluation,
// profiling, the worker's batch loop): it answers with a function of its
// inputs and, given a ManualClock, "takes" a chosen time per run by
// advancing that clock, so latency-dependent code is tested without
// wall-clock waits.
//
// Thread-safety: like every Executor, one Run at a time. calls() is atomic.
#pragma once

#include <atomic>
#include <functional>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "core/time.h"
#include "runtime/executor.h"

namespace maitre::runtime::testing {

class FakeExecutor final : public Executor {
 public:
  using Compute = std::function<absl::StatusOr<std::vector<Tensor>>(const std::vector<Tensor>&)>;
  using Latency = std::function<Nanos(int64_t batch)>;

  struct Options {
    Compute compute;                // required
    ManualClock* clock = nullptr;   // advanced by latency(batch) per run when set
    Latency latency;                // optional; 0 when unset
  };

  explicit FakeExecutor(Options options) : options_(std::move(options)) {}

  absl::StatusOr<std::vector<Tensor>> Run(const std::vector<Tensor>& inputs) override {
    calls_.fetch_add(1, std::memory_order_relaxed);
    int64_t batch = inputs.empty() || inputs[0].shape.empty() ? 0 : inputs[0].shape[0];
    batches_.push_back(batch);
    if (options_.clock != nullptr && options_.latency) {
      options_.clock->Advance(options_.latency(batch));
    }
    return options_.compute(inputs);
  }

  int calls() const { return calls_.load(std::memory_order_relaxed); }
  // The leading dimension of the first input of every run so far.
  const std::vector<int64_t>& batches() const { return batches_; }

 private:
  Options options_;
  std::atomic<int> calls_{0};
  std::vector<int64_t> batches_;
};

// A classifier for [N, K] FP32 inputs whose answer is the input itself read
// as class index: row r's logits are one-hot at round(inputs[r][0]), over
// `classes` classes ([N, classes] FP32 "logits").
FakeExecutor::Compute EchoClassifier(int classes);

}  // namespace maitre::runtime::testing
