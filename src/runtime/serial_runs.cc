#include "runtime/serial_runs.h"

namespace maitre::runtime::internal {

bool RunsSerially(int64_t batch, double serial_row_us, int threads, double below_us) {
  if (threads <= 1) return true;
  if (serial_row_us <= 0) return true;  // the first runs learn the row time
  return static_cast<double>(batch) * serial_row_us < below_us;
}

void SerialRowTime::Record(int64_t batch, double us) {
  if (batch <= 0) return;
  const double row_us = us / static_cast<double>(batch);
  if (runs_ == 0 || row_us < row_us_) row_us_ = row_us;
  ++runs_;
}

}  // namespace maitre::runtime::internal
