#include "core/valset.h"

#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "core/npz.h"

namespace maitre {

absl::StatusOr<Valset> ParseValset(absl::string_view npz_bytes) {
  absl::StatusOr<std::map<std::string, Tensor>> arrays = ParseNpz(npz_bytes);
  if (!arrays.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("validation set: ", arrays.status().message()));
  }
  auto inputs = arrays->find("inputs");
  auto labels = arrays->find("labels");
  if (inputs == arrays->end() || labels == arrays->end()) {
    std::string found;
    for (const auto& [name, t] : *arrays) absl::StrAppend(&found, found.empty() ? "" : ", ", name);
    return absl::InvalidArgumentError(absl::StrCat(
        "validation set needs arrays 'inputs' and 'labels' (np.savez(f, inputs=x, labels=y)); "
        "it has: ",
        found));
  }
  Valset v;
  v.inputs = std::move(inputs->second);
  v.labels = std::move(labels->second);
  if (v.inputs.shape.empty()) {
    return absl::InvalidArgumentError(
        "validation set: inputs must have a leading batch dimension, got a scalar");
  }
  if (v.inputs.shape[0] == 0) {
    return absl::InvalidArgumentError("validation set: inputs has no rows");
  }
  if (v.labels.dtype != DataType::kInt64) {
    return absl::InvalidArgumentError(absl::StrCat(
        "validation set: labels must be int64, got ", DataTypeName(v.labels.dtype)));
  }
  if (v.labels.shape.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("validation set: labels must be 1-D, got shape ",
                     ShapeToString(v.labels.shape)));
  }
  if (v.labels.shape[0] != v.inputs.shape[0]) {
    return absl::InvalidArgumentError(
        absl::StrCat("validation set: labels has ", v.labels.shape[0],
                     " entries but inputs has ", v.inputs.shape[0], " rows"));
  }
  return v;
}

absl::Status CheckValsetFits(const Valset& valset, const ModelSpec& spec) {
  if (spec.inputs.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("a validation set can only evaluate a model with one input; this model has ",
                     spec.inputs.size()));
  }
  const TensorSpec& in = spec.inputs[0];
  const Tensor& x = valset.inputs;
  bool fits = x.dtype == in.dtype && x.shape.size() == in.shape.size();
  for (size_t i = 1; fits && i < in.shape.size(); ++i) {
    fits = in.shape[i] == -1 || in.shape[i] == x.shape[i];
  }
  if (!fits) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the validation set's inputs are ", DataTypeName(x.dtype), " ", ShapeToString(x.shape),
        " but the model's input '", in.name, "' takes ", DataTypeName(in.dtype), " ",
        ShapeToString(in.shape), " (-1 = any size)"));
  }
  // A label the model cannot output would be scored as a miss: the
  // accuracy recorded would be wrong, not the model.
  const int64_t classes =
      spec.outputs.empty() || spec.outputs[0].shape.empty() ? -1 : spec.outputs[0].shape.back();
  const int64_t* labels = valset.labels.As<int64_t>();
  for (int64_t i = 0; i < valset.labels.NumElements(); ++i) {
    if (labels[i] < 0 || (classes > 0 && labels[i] >= classes)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the validation set's label ", labels[i], " (row ", i, ") is not a class the model's "
          "output '", spec.outputs[0].name, "' can name",
          classes > 0 ? absl::StrCat(" (0 to ", classes - 1, ")") : " (negative)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Tensor> SliceRows(const Tensor& t, int64_t begin, int64_t end) {
  MAITRE_RETURN_IF_ERROR(t.Validate());
  if (t.shape.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor '", t.name, "' has no batch dimension to slice"));
  }
  if (begin < 0 || begin > end || end > t.shape[0]) {
    return absl::InvalidArgumentError(absl::StrCat("rows [", begin, ", ", end,
                                                   ") are outside tensor '", t.name,
                                                   "' of ", t.shape[0], " rows"));
  }
  size_t row_bytes = t.shape[0] == 0 ? 0 : t.data.size() / static_cast<size_t>(t.shape[0]);
  Tensor out;
  out.name = t.name;
  out.dtype = t.dtype;
  out.shape = t.shape;
  out.shape[0] = end - begin;
  out.data.assign(t.data, static_cast<size_t>(begin) * row_bytes,
                  static_cast<size_t>(end - begin) * row_bytes);
  return out;
}

}  // namespace maitre
