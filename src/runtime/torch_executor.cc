// The only compile unit that includes libtorch headers (see torch_executor.h).
#include "runtime/torch_executor.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <omp.h>
#include <torch/script.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "runtime/serial_runs.h"
#include "runtime/spec_check.h"

namespace maitre::runtime::internal {
namespace {

// The intra-op threads ConfigureTorchProcess set for the process.
std::atomic<int> torch_threads{1};

// Maps a Maitre dtype to torch's; nullopt for those torch 1.13 lacks.
std::optional<c10::ScalarType> TorchType(DataType type) {
  switch (type) {
    case DataType::kBool: return c10::ScalarType::Bool;
    case DataType::kUint8: return c10::ScalarType::Byte;
    case DataType::kInt8: return c10::ScalarType::Char;
    case DataType::kInt16: return c10::ScalarType::Short;
    case DataType::kInt32: return c10::ScalarType::Int;
    case DataType::kInt64: return c10::ScalarType::Long;
    case DataType::kFp16: return c10::ScalarType::Half;
    case DataType::kFp32: return c10::ScalarType::Float;
    case DataType::kFp64: return c10::ScalarType::Double;
    default: return std::nullopt;
  }
}

// Collects the tensors a TorchScript forward returned: a tensor, or a
// tuple/list of tensors, in order.
absl::Status CollectOutputs(const c10::IValue& result, std::vector<at::Tensor>* out) {
  auto add = [&](const c10::IValue& v) -> absl::Status {
    if (!v.isTensor()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the model returned a ", v.tagKind(), " where a tensor was expected"));
    }
    out->push_back(v.toTensor());
    return absl::OkStatus();
  };
  if (result.isTensor()) return add(result);
  if (result.isTuple()) {
    for (const c10::IValue& v : result.toTupleRef().elements()) {
      if (absl::Status s = add(v); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  if (result.isList()) {
    for (const c10::IValue& v : result.toListRef()) {
      if (absl::Status s = add(v); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "the model returned a ", result.tagKind(), "; expected a tensor or a tuple/list of them"));
}

class TorchExecutor final : public Executor {
 public:
  TorchExecutor(torch::jit::Module module, ModelSpec spec,
                std::vector<c10::ScalarType> input_types,
                std::vector<c10::ScalarType> output_types)
      : module_(std::move(module)),
        spec_(std::move(spec)),
        input_types_(std::move(input_types)),
        output_types_(std::move(output_types)) {}

  absl::StatusOr<std::vector<Tensor>> Run(const std::vector<Tensor>& inputs) override {
    MAITRE_ASSIGN_OR_RETURN(int64_t batch, CheckInputsInOrder(spec_, inputs));
    try {
      // InferenceMode skips autograd bookkeeping and version counters. For
      // the zoo MLP at batch 1 it measured the same as NoGradGuard within
      // noise (~1 µs of ~105); it is the one meant for serving.
      c10::InferenceMode inference_mode;
      std::vector<c10::IValue> args;
      args.reserve(inputs.size());
      for (size_t i = 0; i < inputs.size(); ++i) {
        // from_blob wraps the caller's bytes without copying; it wants a
        // non-const pointer. Only a model that wrote to its input in place
        // would change the caller's bytes; none of ours do (the test checks),
        // and guarding against it would cost a copy on every call.
        args.emplace_back(torch::from_blob(const_cast<char*>(inputs[i].data.data()),
                                           inputs[i].shape,
                                           at::TensorOptions().dtype(input_types_[i])));
      }
      // Small batches run on this thread alone (runtime/serial_runs.h).
      // torch's parallel loops are OpenMP regions, which take their size
      // from the calling thread's own setting, so this touches no other
      // executor.
      const int threads = torch_threads.load(std::memory_order_relaxed);
      const bool serial = threads > 1 && serial_.RunSerially(batch, threads);
      if (threads > 1) omp_set_num_threads(serial ? 1 : threads);
      const auto start = serial ? std::chrono::steady_clock::now()
                                : std::chrono::steady_clock::time_point();
      c10::IValue result = module_.forward(std::move(args));
      if (serial) {
        serial_.Record(batch, std::chrono::duration<double, std::micro>(
                                  std::chrono::steady_clock::now() - start).count());
      }
      std::vector<at::Tensor> produced;
      MAITRE_RETURN_IF_ERROR(CollectOutputs(result, &produced));
      if (produced.size() != spec_.outputs.size()) {
        return absl::InvalidArgumentError(absl::StrCat("the model returned ", produced.size(),
                                                       " output(s) but the spec declares ",
                                                       spec_.outputs.size()));
      }
      std::vector<Tensor> outputs(produced.size());
      for (size_t k = 0; k < produced.size(); ++k) {
        const TensorSpec& spec = spec_.outputs[k];
        at::Tensor t = produced[k];
        MAITRE_RETURN_IF_ERROR(CheckOutputShape(spec, t.sizes(), batch));
        if (t.scalar_type() != output_types_[k]) t = t.to(output_types_[k]);
        t = t.contiguous();
        Tensor& out = outputs[k];
        out.name = spec.name;
        out.dtype = spec.dtype;
        out.shape = t.sizes().vec();
        out.data.assign(static_cast<const char*>(t.data_ptr()), t.nbytes());
      }
      return outputs;
    } catch (const c10::Error& e) {
      return absl::InternalError(
          absl::StrCat("torch: ", SummarizeRuntimeError(e.what_without_backtrace())));
    } catch (const std::exception& e) {
      return absl::InternalError(absl::StrCat("torch: ", SummarizeRuntimeError(e.what())));
    }
  }

 private:
  torch::jit::Module module_;
  const ModelSpec spec_;
  const std::vector<c10::ScalarType> input_types_;
  const std::vector<c10::ScalarType> output_types_;
  SerialRowTime serial_{kTorchSerialBelowUs};
};

absl::StatusOr<std::vector<c10::ScalarType>> TorchTypes(const std::vector<TensorSpec>& specs) {
  std::vector<c10::ScalarType> types;
  for (const TensorSpec& s : specs) {
    std::optional<c10::ScalarType> t = TorchType(s.dtype);
    if (!t) {
      return absl::InvalidArgumentError(absl::StrCat("the torch runtime has no ",
                                                     DataTypeName(s.dtype), " type (tensor '",
                                                     s.name, "')"));
    }
    types.push_back(*t);
  }
  return types;
}

// Freezes (inlining parameters as constants) and applies the inference
// passes: conv/linear to MKLDNN, folding of batch norm and constants.
absl::StatusOr<torch::jit::Module> Optimize(torch::jit::Module& module,
                                            const std::string& path) {
  try {
    return torch::jit::optimize_for_inference(module);
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimize_for_inference failed on '", path,
                     "': ", SummarizeRuntimeError(e.what_without_backtrace())));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(
        "optimize_for_inference failed on '", path, "': ", SummarizeRuntimeError(e.what())));
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<Executor>> CreateTorchExecutor(const ExecutorOptions& options) {
  MAITRE_ASSIGN_OR_RETURN(std::vector<c10::ScalarType> input_types,
                          TorchTypes(options.spec.inputs));
  MAITRE_ASSIGN_OR_RETURN(std::vector<c10::ScalarType> output_types,
                          TorchTypes(options.spec.outputs));
  try {
    // Mapped to the CPU so that a model saved from a GPU still loads.
    torch::jit::Module module = torch::jit::load(options.model_path, c10::Device(c10::kCPU));
    module.eval();
    if (options.optimize_for_inference) {
      absl::StatusOr<torch::jit::Module> optimized = Optimize(module, options.model_path);
      if (!optimized.ok()) return optimized.status();
      module = *std::move(optimized);
    }
    return std::unique_ptr<Executor>(new TorchExecutor(
        std::move(module), options.spec, std::move(input_types), std::move(output_types)));
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", options.model_path, "' is not a TorchScript model (",
                     SummarizeRuntimeError(e.what_without_backtrace()), ")"));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("'", options.model_path,
                                                   "' is not a TorchScript model (",
                                                   SummarizeRuntimeError(e.what()), ")"));
  }
}

void ConfigureTorchProcess(int threads) {
  at::set_num_threads(std::max(1, threads));
  torch_threads.store(std::max(1, threads), std::memory_order_relaxed);
  // Inter-op threads can be set once per process and only before the pool
  // starts; a second call (or one after parallel work) throws, which is
  // harmless here because the first call already set it.
  static std::once_flag interop_once;
  std::call_once(interop_once, [] {
    try {
      at::set_num_interop_threads(1);
    } catch (const c10::Error&) {
    }
  });
  // Dynamic-quantized (int8) models repack their weights for the engine in
  // use when they load. This build has no FBGEMM; oneDNN is the x86 engine
  // (QNNPACK, the other one, targets ARM and is slower here).
  try {
    const auto& engines = at::globalContext().supportedQEngines();
    if (std::find(engines.begin(), engines.end(), at::QEngine::ONEDNN) != engines.end()) {
      at::globalContext().setQEngine(at::QEngine::ONEDNN);
    }
  } catch (const c10::Error&) {
  }
}

std::string TorchQuantizedEngineName() {
  return c10::toString(at::globalContext().qEngine());
}

}  // namespace maitre::runtime::internal
