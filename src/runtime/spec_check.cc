#include "runtime/spec_check.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace maitre::runtime::internal {
namespace {

constexpr size_t kMaxErrorChars = 400;

}  // namespace

absl::StatusOr<int64_t> CheckInputsInOrder(const ModelSpec& spec,
                                           const std::vector<Tensor>& inputs) {
  if (inputs.size() != spec.inputs.size()) {
    return absl::InvalidArgumentError(absl::StrCat("the model takes ", spec.inputs.size(),
                                                   " input(s), got ", inputs.size()));
  }
  int64_t batch = -1;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorSpec& s = spec.inputs[i];
    const Tensor& t = inputs[i];
    if (t.dtype != s.dtype) {
      return absl::InvalidArgumentError(absl::StrCat("input '", s.name, "' must be ",
                                                     DataTypeName(s.dtype), ", got ",
                                                     DataTypeName(t.dtype)));
    }
    bool match = t.shape.size() == s.shape.size() && !t.shape.empty();
    for (size_t d = 0; match && d < s.shape.size(); ++d) {
      match = s.shape[d] == -1 ? t.shape[d] >= 0 : t.shape[d] == s.shape[d];
    }
    if (!match) {
      return absl::InvalidArgumentError(absl::StrCat("input '", s.name, "' must have shape ",
                                                     ShapeToString(s.shape),
                                                     " (-1 = any), got ",
                                                     ShapeToString(t.shape)));
    }
    if (absl::Status st = t.Validate(); !st.ok()) return st;
    if (batch >= 0 && t.shape[0] != batch) {
      return absl::InvalidArgumentError("all inputs must have the same batch size");
    }
    batch = t.shape[0];
  }
  if (batch < 1) return absl::InvalidArgumentError("the batch size must be at least 1");
  return batch;
}

absl::Status CheckOutputShape(const TensorSpec& spec, absl::Span<const int64_t> shape,
                              int64_t batch) {
  bool match = shape.size() == spec.shape.size() && !shape.empty() && shape[0] == batch;
  for (size_t d = 1; match && d < shape.size(); ++d) {
    match = spec.shape[d] == -1 || spec.shape[d] == shape[d];
  }
  if (match) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "model output '", spec.name, "' has shape ",
      ShapeToString(std::vector<int64_t>(shape.begin(), shape.end())), " for a batch of ",
      batch, ", but the spec declares ", ShapeToString(spec.shape), " (-1 = any)"));
}

absl::Status CheckSpecUsable(const ModelSpec& spec) {
  if (spec.inputs.empty() || spec.outputs.empty()) {
    return absl::InvalidArgumentError("the model spec needs at least one input and one output");
  }
  for (const auto* list : {&spec.inputs, &spec.outputs}) {
    for (const TensorSpec& s : *list) {
      if (s.name.empty()) return absl::InvalidArgumentError("every spec tensor needs a name");
      if (DataTypeSize(s.dtype) == 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "spec tensor '", s.name, "' has unsupported datatype ", DataTypeName(s.dtype)));
      }
      if (s.shape.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("spec tensor '", s.name, "' needs a batch dimension"));
      }
      for (int64_t d : s.shape) {
        if (d < -1 || d == 0) {
          return absl::InvalidArgumentError(absl::StrCat(
              "spec tensor '", s.name, "' has shape ", ShapeToString(s.shape),
              "; dimensions must be positive or -1"));
        }
      }
    }
  }
  return absl::OkStatus();
}

std::string SummarizeRuntimeError(absl::string_view message) {
  // TorchScript puts the interpreter traceback first and the Python-style
  // "RuntimeError: <what>" last; other runtimes lead with the message.
  absl::string_view best;
  for (absl::string_view line : absl::StrSplit(message, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    if (best.empty()) best = line;
    if (absl::StrContains(line, "Error: ")) best = line;
  }
  std::string out(best);
  if (out.size() > kMaxErrorChars) {
    out.resize(kMaxErrorChars);
    out += "...";
  }
  return out;
}

}  // namespace maitre::runtime::internal
