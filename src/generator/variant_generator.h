// The variant generator's optimiser steps (INFaaS's Variant-Generator;
// docs/architecture.md, "Ideas from the papers"): from a registered TorchScript
// model they make the files of the variants that need an optimiser run:
//   - `torch-int8`: dynamic int8 quantisation of the Linear layers for the
//     oneDNN engine (the CPU counterpart of INFaaS's TensorRT step), each
//     row of a batch quantised on its own scale;
//   - `opencv`: an ONNX export, when no ONNX file was registered.
// The other TorchScript variants need no step: `torch` is the registered
// file and `torch-opt` is that same file loaded with
// ExecutorOptions::optimize_for_inference.
//
// Each step is a Python script run with torch in a child process (libtorch's
// C++ API has neither the dynamic quantiser nor the ONNX exporter). The
// scripts are compiled into the binary (src/generator/scripts/*.py), written
// into a fresh scratch directory per call and removed with it afterwards.
// A step takes a few seconds, most of it importing torch.
//
// Errors shared by every step:
//   - InvalidArgument: the input is not a TorchScript model, or the model
//     does not run on zeros shaped like its spec or returns other outputs;
//   - FailedPrecondition: the step cannot run here (python or torch or the
//     oneDNN engine missing), or it does not apply to this model; the
//     controller logs the message and skips the variant, never fakes it;
//   - DeadlineExceeded: the step ran past GeneratorOptions::timeout and was
//     killed;
//   - Internal: the optimiser failed or its result did not verify, or python
//     crashed.
// Every message names the step and ends with the last lines python wrote.
//
// Thread-safety: the functions are thread-safe; concurrent calls each use
// their own scratch directory and child process. Each call blocks its thread
// until the child exits.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/model_spec.h"
#include "core/sandbox.h"
#include "core/time.h"

namespace maitre::generator {

struct GeneratorOptions {
  // A Python 3 interpreter that can import torch (Debian's python3-torch;
  // the `python3` on a pyenv PATH cannot: docs/architecture.md, "Processes
  // and resources"). A name without '/' is looked up on PATH.
  std::string python = "/usr/bin/python3";
  // Scratch space, created if missing. Each call works in a new
  // subdirectory of it and removes that subdirectory before returning.
  // Empty: $TMPDIR, else /tmp.
  std::string work_dir;
  // Per step. Past it the child's whole process group is killed.
  Nanos timeout = 300 * kSecond;
  // The child loads and runs the uploaded model, so it is confined
  // (core/sandbox.h): it may read the system, write its scratch directory,
  // and nothing else; started as root, it runs as `sandbox_user`.
  SandboxMode sandbox = SandboxMode::kBestEffort;
  std::string sandbox_user = "nobody";
};

// Dynamically quantises the Linear layers of the TorchScript model whose
// file content is `torchscript` to int8 (per-channel weight scales, oneDNN
// engine; each row of the layers' input quantised on its own scale, so that
// a row's answer does not depend on the rows batched with it:
// docs/architecture.md, "A row's answer never depends on its batch") and
// returns the content of the quantised TorchScript file. It is run by the
// torch executor (which selects oneDNN) like any TorchScript model with the
// same spec. Before returning, the step has loaded the saved file again and
// checked its outputs against `spec` on zeros at batch 1 (and 2 when the
// batch is dynamic), and, for a dynamic batch of floating-point inputs, that
// a row's outputs do not change beside rows of +-1e30.
// A model without Linear layers gives FailedPrecondition ("nothing to
// quantise"): its int8 variant would only be the float model again.
// Accuracy is not checked here; the caller measures it by running the result.
absl::StatusOr<std::string> QuantizeInt8(absl::string_view torchscript, const ModelSpec& spec,
                                         const GeneratorOptions& options);

// Exports the TorchScript model whose file content is `torchscript` to ONNX
// (opset 11) with the spec's input and output names and every -1 dimension
// of the spec dynamic, and returns the file's content: the `opencv` variant's
// file for OpenCV 4.6 DNN. OpenCV DNN runs FP32 only, so a spec with another
// datatype gives FailedPrecondition. The step checks the result with
// onnx.checker when python3-onnx is installed; it does not run it through
// OpenCV (load it with CreateExecutor(kOpenCv) to be sure).
absl::StatusOr<std::string> ExportOnnx(absl::string_view torchscript, const ModelSpec& spec,
                                       const GeneratorOptions& options);

// OK when the steps can run here: `options.python` starts, imports torch,
// and torch has the oneDNN quantized engine, dynamic TorchScript
// quantisation and the ONNX exporter. Otherwise FailedPrecondition (or
// DeadlineExceeded / Internal as above) saying what is missing. Costs one
// python start with a torch import (~1-3 s); callers check once and keep
// the answer.
absl::Status CheckOptimizerAvailable(const GeneratorOptions& options);

}  // namespace maitre::generator
