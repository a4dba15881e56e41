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
// the same variant came out 2.6x apart. Around 160 us of work it is a draw
// with a wide spread (the wide CNN's batch 1: 146-210 us on two threads,
// 158 us on one, and its cpu-2 profiles 0.109-0.166 ms from run to run);
// past ~250 us the threads pay (the CNN's batch 4: 182-250 us against
// 250-311; the wide CNN's batch 64: 7.2 ms against 13.6 ms).
// So a batch whose serial time would be under kSerialBelowUs runs serially;
// `serial_row_us` is the fastest serial time per row seen so far (0 = not
// known yet: the executor's first runs are serial and measure it).
inline constexpr double kSerialBelowUs = 200;
bool RunsSerially(int64_t batch, double serial_row_us, int threads);

}  // namespace maitre::runtime::internal
