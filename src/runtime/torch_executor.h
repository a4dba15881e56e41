// Internal to src/runtime: the TorchScript executor's factory and process
// settings. This header is torch-free on purpose: libtorch's headers cost
// tens of seconds per compile unit, so only torch_executor.cc includes them.
//
// Thread-safety: see executor.h; ConfigureTorchProcess touches process-wide
// torch state and should run before models are loaded.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "runtime/executor.h"

namespace maitre::runtime::internal {

// Loads a TorchScript file (mapped to the CPU) and puts it in eval mode. No
// warm-up; CreateExecutor does that for both runtimes.
absl::StatusOr<std::unique_ptr<Executor>> CreateTorchExecutor(const ExecutorOptions& options);

// at::set_num_threads(threads), inter-op threads 1 (once), quantized engine.
void ConfigureTorchProcess(int threads);

// The quantized engine in use, e.g. "ONEDNN" (for logs and tests).
std::string TorchQuantizedEngineName();

}  // namespace maitre::runtime::internal
