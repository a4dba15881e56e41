// Small work runs on the calling thread alone, in both executors.
//
// With several threads, torch and OpenCV DNN split every layer across them
// however small the work, and waking a pool thread costs more than it saves.
// How long a small batch took on threads depended on whether the other core
// happened to be busy, so profiles of the same variant came out up to 2.6x
// apart. Around 160-400 us of work it is a draw; past that the threads pay,
// torch's later than OpenCV's. So a batch whose serial time would be under the
// executor's threshold runs serially: 200 us for OpenCV, 500 for torch. The
// executor_bench figures behind the thresholds are in docs/architecture.md
// ("Design decisions", small batches on one thread).
//
// Thread-safety: SerialRowTime is used by one executor, which runs one batch
// at a time.
#pragma once

#include <cstdint>

namespace maitre::runtime::internal {

inline constexpr double kOpenCvSerialBelowUs = 200;
inline constexpr double kTorchSerialBelowUs = 500;

// Whether `batch` rows run serially out of `threads`, given the fastest
// serial time per row seen so far (0 = not known yet: run serially and
// measure it) and the executor's threshold.
bool RunsSerially(int64_t batch, double serial_row_us, int threads, double below_us);

// Learns a model's serial time per row from its serial runs.
class SerialRowTime {
 public:
  explicit SerialRowTime(double below_us) : below_us_(below_us) {}

  bool RunSerially(int64_t batch, int threads) const {
    // The first runs of a model are cold (allocation, graph optimisation),
    // and a single slow one would otherwise settle it in parallel for good.
    return RunsSerially(batch, runs_ < kLearningRuns ? 0 : row_us_, threads, below_us_);
  }
  // A serial run of `batch` rows took `us`; keeps the fastest per row, as
  // later runs only add the host's noise to it.
  void Record(int64_t batch, double us);

 private:
  static constexpr int kLearningRuns = 4;
  const double below_us_;
  double row_us_ = 0;
  int runs_ = 0;
};

}  // namespace maitre::runtime::internal
