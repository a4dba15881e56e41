// Internal to src/runtime: the ONNX executor on OpenCV DNN.
//
// Thread-safety: see executor.h. cv::dnn::Net::forward is not re-entrant, so
// each executor owns its own Net.
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "runtime/executor.h"

namespace maitre::runtime::internal {

// Reads an ONNX file into an OpenCV DNN net on the CPU backend. No warm-up;
// CreateExecutor does that for both runtimes.
absl::StatusOr<std::unique_ptr<Executor>> CreateOpenCvExecutor(const ExecutorOptions& options);

// cv::setNumThreads, process-wide.
void ConfigureOpenCvProcess(int threads);

}  // namespace maitre::runtime::internal
