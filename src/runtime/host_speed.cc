#include "runtime/host_speed.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "core/file_util.h"

namespace maitre::runtime {
namespace {

// About a millisecond of work a core does at its own pace whatever else
// the process holds: a dependent floating-point chain (latency-bound, so it
// tracks the clock rate) and sums over 2 MB (bound by the caches and memory,
// so it tracks a neighbour competing for them, as a model's weights do).
// The volatile sink keeps the compiler from removing either.
void ReferenceKernel() {
  static const std::vector<float> data = [] {
    std::vector<float> d(512 * 1024);
    for (size_t i = 0; i < d.size(); ++i) d[i] = static_cast<float>(i % 97) * 0.01f;
    return d;
  }();
  double chain = 1.0;
  for (int i = 0; i < 100000; ++i) chain = chain * 1.0000001 + 1e-9;
  float sum = 0;
  for (int pass = 0; pass < 2; ++pass) {
    for (float v : data) sum += v * 1.0001f;
  }
  static volatile double sink;
  sink = chain + sum;
}

}  // namespace

HostSpeedProbe::HostSpeedProbe(const Clock* clock, std::string baseline_file)
    : clock_(clock), baseline_file_(std::move(baseline_file)) {
  if (baseline_file_.empty()) return;
  absl::StatusOr<std::string> text = ReadFileToString(baseline_file_);
  double ms = 0;
  if (text.ok() && absl::SimpleAtod(absl::StripAsciiWhitespace(*text), &ms) && ms > 0) {
    fastest_ms_ = ms;
  }
}

double HostSpeedProbe::Measure() {
  double best = 0;
  for (int run = 0; run < 3; ++run) {
    const Nanos start = clock_->Now();
    ReferenceKernel();
    const double ms = ToMillis(clock_->Now() - start);
    best = run == 0 ? ms : std::min(best, ms);
  }
  if (fastest_ms_ <= 0 || best < fastest_ms_) {
    fastest_ms_ = best;
    // Best effort: if the file cannot be written, this process still
    // keeps its own baseline.
    if (!baseline_file_.empty()) {
      (void)WriteFileAtomically(baseline_file_, absl::StrFormat("%.17g\n", best));
    }
  }
  return best;
}

double HostSpeedProbe::Slowdown(double ms) const {
  return fastest_ms_ > 0 ? std::max(1.0, ms / fastest_ms_) : 1.0;
}

}  // namespace maitre::runtime
