// Executors run one loaded model file on the CPU: `torch` runs TorchScript
// through libtorch, `opencv` runs ONNX through OpenCV DNN. Both take and
// return maitre::Tensor, so nothing above this layer sees a runtime type.
//
// Thread-safety: an Executor is NOT thread-safe: one Run at a time per
// executor (OpenCV's Net::forward is not re-entrant, and both executors reuse
// buffers between calls). Different executors may run concurrently.
// Threading inside a run is process-wide (ConfigureProcessThreads), which is
// one reason a worker process is the unit of hardware (docs/architecture.md,
// "Processes and resources").
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/model_spec.h"
#include "core/tensor.h"
#include "core/variant.h"

namespace maitre::runtime {

struct ExecutorOptions {
  Runtime runtime = Runtime::kTorch;  // kTorch: TorchScript; kOpenCv: ONNX via OpenCV DNN
  std::string model_path;             // a local file
  ModelSpec spec;                     // declared inputs/outputs (names, dtypes, shapes, -1 = any)
  // kTorch only: freeze the module and run torch::jit::optimize_for_inference
  // on it after loading (a few ms). This is how to get the `torch-opt`
  // variant: a module optimised in Python and saved does not load again when
  // it holds convolutions (their MKLDNN constants do not serialise:
  // "required keyword attribute 'value' is undefined"), while the same pass
  // at load time works and runs the zoo CNNs 2-4x faster at batch 8-32.
  bool optimize_for_inference = false;
};

class Executor {
 public:
  virtual ~Executor() = default;

  // `inputs` holds one tensor per spec input, in spec order (names are not
  // consulted), each matching its spec's dtype and shape and all with the
  // same leading batch size >= 1. Returns one tensor per spec output, in
  // spec order, named and typed as in the spec, with the same batch size.
  // The input bytes are read in place, without a copy.
  // Errors: InvalidArgument for inputs that break the spec or outputs that
  // break it; Internal when the model itself fails on valid inputs.
  virtual absl::StatusOr<std::vector<Tensor>> Run(const std::vector<Tensor>& inputs) = 0;
};

// Loads the model file and checks it against the spec with warm-up runs at
// batch 1 on zeros (every -1 dimension is taken as 1): one checked run, and
// one more so that TorchScript has optimised its graph before real queries.
// - NotFound: the file does not exist or cannot be read.
// - InvalidArgument: the spec is unusable; the file is not a model for this
//   runtime (e.g. a text file); or the warm-up fails or returns outputs whose
//   count, shape or dtype conversion disagrees with the spec (the message
//   names the mismatch).
// The torch runtime accepts inputs of any fixed-size dtype torch has (not
// UINT16/32/64); the opencv runtime takes and returns FP32 only.
absl::StatusOr<std::unique_ptr<Executor>> CreateExecutor(const ExecutorOptions& options);

// Sets process-wide threading for every runtime: torch intra-op threads,
// torch inter-op threads (1; settable only once per process and only before
// any parallel work, which is handled here), OpenCV's thread count, OpenBLAS's
// thread count (1, when OpenBLAS is loaded: its threads fight torch's), and
// the torch quantized engine (oneDNN, needed by int8 dynamic-quantized
// models; there is no FBGEMM on these machines). Call once at worker start,
// before loading models; a later call changes the intra-op and OpenCV counts.
void ConfigureProcessThreads(int threads);

}  // namespace maitre::runtime
