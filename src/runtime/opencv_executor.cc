#include "runtime/opencv_executor.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include <opencv2/core.hpp>
#include <opencv2/dnn.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/status_macros.h"
#include "runtime/serial_runs.h"
#include "runtime/spec_check.h"

namespace maitre::runtime::internal {
namespace {

// OpenCV's thread count, as last set by ConfigureOpenCvProcess.
std::atomic<int> opencv_threads{1};

class OpenCvExecutor final : public Executor {
 public:
  OpenCvExecutor(cv::dnn::Net net, ModelSpec spec, std::vector<std::string> input_names,
                 std::vector<std::string> output_names)
      : net_(std::move(net)),
        spec_(std::move(spec)),
        input_names_(std::move(input_names)),
        output_names_(std::move(output_names)) {}

  absl::StatusOr<std::vector<Tensor>> Run(const std::vector<Tensor>& inputs) override {
    MAITRE_ASSIGN_OR_RETURN(int64_t batch, CheckInputsInOrder(spec_, inputs));
    try {
      for (size_t i = 0; i < inputs.size(); ++i) {
        const Tensor& t = inputs[i];
        sizes_.clear();
        for (int64_t d : t.shape) {
          if (d > INT_MAX) {
            return absl::InvalidArgumentError(absl::StrCat(
                "input '", spec_.inputs[i].name, "' has a dimension too large for OpenCV"));
          }
          sizes_.push_back(static_cast<int>(d));
        }
        // A Mat header over the caller's bytes; setInput copies them into
        // the net's own input blob, so they are never written.
        cv::Mat blob(static_cast<int>(sizes_.size()), sizes_.data(), CV_32F,
                     const_cast<char*>(t.data.data()));
        net_.setInput(blob, input_names_[i]);
      }
      Forward(batch);
      if (outs_.size() != spec_.outputs.size()) {
        return absl::InvalidArgumentError(absl::StrCat("the model returned ", outs_.size(),
                                                       " output(s) but the spec declares ",
                                                       spec_.outputs.size()));
      }
      std::vector<Tensor> outputs(outs_.size());
      for (size_t k = 0; k < outs_.size(); ++k) {
        cv::Mat m = outs_[k];
        if (m.type() != CV_32F) m.convertTo(m, CV_32F);
        if (!m.isContinuous()) m = m.clone();
        Tensor& out = outputs[k];
        out.name = spec_.outputs[k].name;
        out.dtype = DataType::kFp32;
        out.shape.assign(m.size.p, m.size.p + m.dims);
        MAITRE_RETURN_IF_ERROR(CheckOutputShape(spec_.outputs[k], out.shape, batch));
        out.data.assign(reinterpret_cast<const char*>(m.data), m.total() * m.elemSize());
      }
      return outputs;
    } catch (const cv::Exception& e) {
      return absl::InternalError(absl::StrCat("opencv: ", SummarizeRuntimeError(e.what())));
    } catch (const std::exception& e) {
      return absl::InternalError(absl::StrCat("opencv: ", SummarizeRuntimeError(e.what())));
    }
  }

 private:
  // Runs the net, serially when the batch is too small for OpenCV's threads
  // to pay off (runtime/serial_runs.h). A parallel_for_ around the call is how:
  // OpenCV runs nested parallel loops inline on the calling thread.
  void Forward(int64_t batch) {
    const int threads = opencv_threads.load(std::memory_order_relaxed);
    // With one thread OpenCV runs inline anyway; nothing to wrap or learn.
    if (threads <= 1 || !serial_.RunSerially(batch, threads)) {
      net_.forward(outs_, output_names_);
      return;
    }
    const auto start = std::chrono::steady_clock::now();
    std::exception_ptr failure;
    cv::parallel_for_(cv::Range(0, 1), [&](const cv::Range&) {
      try {
        net_.forward(outs_, output_names_);
      } catch (...) {
        failure = std::current_exception();
      }
    });
    if (failure) std::rethrow_exception(failure);
    serial_.Record(batch, std::chrono::duration<double, std::micro>(
                              std::chrono::steady_clock::now() - start).count());
  }

  cv::dnn::Net net_;
  const ModelSpec spec_;
  const std::vector<std::string> input_names_;   // "" = the net's first input
  const std::vector<std::string> output_names_;  // OpenCV layer names, spec order
  std::vector<int> sizes_;                       // reused between runs
  std::vector<cv::Mat> outs_;                    // reused between runs
  SerialRowTime serial_{kOpenCvSerialBelowUs};
};

// OpenCV names each ONNX output by the layer that produces it, which is the
// ONNX output name. When the spec's names are all there, they fix the order;
// otherwise, with equal counts, the net's order is taken (a spec may use its
// own names), and a count mismatch is an error.
absl::StatusOr<std::vector<std::string>> MatchOutputNames(const cv::dnn::Net& net,
                                                          const ModelSpec& spec) {
  std::vector<std::string> net_names = net.getUnconnectedOutLayersNames();
  bool all_named = true;
  for (const TensorSpec& s : spec.outputs) {
    all_named = all_named &&
                std::find(net_names.begin(), net_names.end(), s.name) != net_names.end();
  }
  std::vector<std::string> names;
  if (all_named) {
    for (const TensorSpec& s : spec.outputs) names.push_back(s.name);
    return names;
  }
  if (net_names.size() != spec.outputs.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the model has ", net_names.size(), " output(s) (", absl::StrJoin(net_names, ", "),
        ") but the spec declares ", spec.outputs.size()));
  }
  return net_names;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Executor>> CreateOpenCvExecutor(const ExecutorOptions& options) {
  for (const auto* list : {&options.spec.inputs, &options.spec.outputs}) {
    for (const TensorSpec& s : *list) {
      if (s.dtype != DataType::kFp32) {
        return absl::InvalidArgumentError(
            absl::StrCat("the opencv runtime takes and returns FP32 only; tensor '", s.name,
                         "' is declared ", DataTypeName(s.dtype)));
      }
    }
  }
  if (options.optimize_for_inference) {
    return absl::InvalidArgumentError(
        "optimize_for_inference applies to the torch runtime only");
  }
  try {
    cv::dnn::Net net = cv::dnn::readNetFromONNX(options.model_path);
    if (net.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", options.model_path, "' is not an ONNX model OpenCV can read"));
    }
    net.setPreferableBackend(cv::dnn::DNN_BACKEND_OPENCV);
    net.setPreferableTarget(cv::dnn::DNN_TARGET_CPU);
    // A single input is bound by position (""), so the spec may call it
    // anything; several inputs are bound by their spec names.
    std::vector<std::string> input_names;
    for (const TensorSpec& s : options.spec.inputs) {
      input_names.push_back(options.spec.inputs.size() == 1 ? "" : s.name);
    }
    MAITRE_ASSIGN_OR_RETURN(std::vector<std::string> output_names,
                            MatchOutputNames(net, options.spec));
    return std::unique_ptr<Executor>(new OpenCvExecutor(
        std::move(net), options.spec, std::move(input_names), std::move(output_names)));
  } catch (const cv::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", options.model_path, "' is not an ONNX model OpenCV can read (",
                     SummarizeRuntimeError(e.what()), ")"));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", options.model_path, "' is not an ONNX model OpenCV can read (",
                     SummarizeRuntimeError(e.what()), ")"));
  }
}

void ConfigureOpenCvProcess(int threads) {
  // OpenCV treats 1 and 0 alike (run loops inline); >1 starts its pool.
  cv::setNumThreads(std::max(1, threads));
  opencv_threads.store(std::max(1, threads), std::memory_order_relaxed);
}

}  // namespace maitre::runtime::internal
