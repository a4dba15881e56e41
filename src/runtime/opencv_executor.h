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

// With several threads, OpenCV DNN splits every layer across them however
// small the work, and waking a pool thread costs more than it saves: on two
// cores here, batch 1 of the zoo's logreg took 9.8 us in parallel against
// 2.5 us serially, the MLP 17.5 against 6.3, the CNN 89 against 75, and
// which of the two a process got depended on whether the other core happened
// to be busy (a busy core never woke the pool thread in time), so profiles of
// the same variant came out 2.6x apart. Past ~100 us of work the threads pay:
// the wide CNN's batch 64 takes 7.2 ms on two threads against 13.6 ms on one.
// So a batch whose serial time would be under kSerialBelowUs runs serially;
// `serial_row_us` is the fastest serial time per row seen so far (0 = not
// known yet: the executor's first runs are serial and measure it).
inline constexpr double kSerialBelowUs = 100;
bool RunsSerially(int64_t batch, double serial_row_us, int threads);

}  // namespace maitre::runtime::internal
