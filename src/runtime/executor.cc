#include "runtime/executor.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "core/zero_row.h"
#include "runtime/opencv_executor.h"
#include "runtime/spec_check.h"
#include "runtime/torch_executor.h"

namespace maitre::runtime {
namespace {

constexpr int kWarmUpRuns = 2;

absl::Status CheckModelFile(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("no model file given");
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(
        absl::StrCat("model file '", path, "' cannot be read: ", std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat("model path '", path, "' is not a file"));
  }
  return absl::OkStatus();
}

// OpenBLAS threads fight torch's (docs/architecture.md, "Processes and
// resources"). OPENBLAS_NUM_THREADS only counts if set before the library
// loads, so the count is also set through OpenBLAS's own call, found at run
// time: the binary does not link OpenBLAS directly, and the symbol is absent
// when another BLAS is installed.
void LimitOpenBlasThreads() {
  using SetThreads = void (*)(int);
  auto* set_threads =
      reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  if (set_threads != nullptr) set_threads(1);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Executor>> CreateExecutor(const ExecutorOptions& options) {
  MAITRE_RETURN_IF_ERROR(internal::CheckSpecUsable(options.spec));
  MAITRE_RETURN_IF_ERROR(CheckModelFile(options.model_path));
  absl::StatusOr<std::unique_ptr<Executor>> executor;
  switch (options.runtime) {
    case Runtime::kTorch:
      executor = internal::CreateTorchExecutor(options);
      break;
    case Runtime::kOpenCv:
      executor = internal::CreateOpenCvExecutor(options);
      break;
    default:
      return absl::InvalidArgumentError("unknown runtime");
  }
  if (!executor.ok()) return executor.status();

  // The warm-up both checks the model against its spec and pays one-time
  // costs before the first real query. Two runs: TorchScript's profiling
  // executor records shapes on the first run (100-200 ms here, with lazy
  // library initialisation) and optimises the graph on the second (2-18 ms);
  // from the third on a CNN call takes its steady ~0.2 ms.
  MAITRE_ASSIGN_OR_RETURN(std::vector<Tensor> zeros, ZeroRow(options.spec.inputs));
  for (int run = 0; run < kWarmUpRuns; ++run) {
    absl::StatusOr<std::vector<Tensor>> outputs = (*executor)->Run(zeros);
    if (!outputs.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("model '", options.model_path, "' (", RuntimeName(options.runtime),
                       ") does not match its spec: a warm-up run at batch 1 failed: ",
                       outputs.status().message()));
    }
  }
  return executor;
}

void ConfigureProcessThreads(int threads) {
  LimitOpenBlasThreads();
  internal::ConfigureTorchProcess(threads);
  internal::ConfigureOpenCvProcess(threads);
}

}  // namespace maitre::runtime
