#include "core/model_spec.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace maitre {
namespace {

using nlohmann::json;

absl::StatusOr<TensorSpec> ParseTensorSpec(const json& j, absl::string_view where) {
  if (!j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(where, " must be an object"));
  }
  TensorSpec spec;
  auto name = j.find("name");
  if (name == j.end() || !name->is_string() || name->get<std::string>().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(where, " needs a non-empty \"name\""));
  }
  spec.name = name->get<std::string>();
  auto dtype = j.find("datatype");
  if (dtype == j.end() || !dtype->is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, " '", spec.name, "' needs a \"datatype\" such as \"FP32\""));
  }
  spec.dtype = ParseDataType(dtype->get<std::string>());
  if (spec.dtype == DataType::kInvalid || spec.dtype == DataType::kBytes) {
    return absl::InvalidArgumentError(absl::StrCat(where, " '", spec.name,
                                                   "': unsupported datatype \"",
                                                   dtype->get<std::string>(), "\""));
  }
  auto shape = j.find("shape");
  if (shape == j.end() || !shape->is_array() || shape->empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, " '", spec.name, "' needs a \"shape\" array such as [-1,1,28,28]"));
  }
  if (shape->size() > kMaxRank) {
    return absl::InvalidArgumentError(absl::StrCat(where, " '", spec.name, "' has ",
                                                   shape->size(), " dimensions; at most ",
                                                   kMaxRank, " are accepted"));
  }
  // One row (every -1 read as 1) is bounded, so that nothing sized from the
  // spec (a row of zeros, a profiling batch) can exhaust a worker's memory.
  int64_t row_elements = 1;
  for (const json& d : *shape) {
    if (!d.is_number_integer() || d.get<int64_t>() < -1 || d.get<int64_t>() == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, " '", spec.name, "': shape dimensions must be positive integers or -1"));
    }
    const int64_t dim = d.get<int64_t>();
    if (dim > kMaxRowElements || row_elements * std::max<int64_t>(dim, 1) > kMaxRowElements) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, " '", spec.name, "': one row of shape ", shape->dump(), " is more than ",
          kMaxRowElements, " elements, the most accepted"));
    }
    row_elements *= std::max<int64_t>(dim, 1);
    spec.shape.push_back(dim);
  }
  return spec;
}

json TensorSpecToJson(const TensorSpec& spec) {
  return json{{"name", spec.name},
              {"datatype", std::string(DataTypeName(spec.dtype))},
              {"shape", spec.shape}};
}

}  // namespace

absl::Status TensorSpec::Check(const Tensor& t) const {
  if (t.dtype != dtype) {
    return absl::InvalidArgumentError(absl::StrCat("input '", name, "' must be ",
                                                   DataTypeName(dtype), ", got ",
                                                   DataTypeName(t.dtype)));
  }
  bool match = t.shape.size() == shape.size();
  for (size_t i = 0; match && i < shape.size(); ++i) {
    match = shape[i] == -1 ? t.shape[i] >= 0 : t.shape[i] == shape[i];
  }
  if (!match) {
    return absl::InvalidArgumentError(absl::StrCat("input '", name, "' must have shape ",
                                                   ShapeToString(shape), " (-1 = any), got ",
                                                   ShapeToString(t.shape)));
  }
  return t.Validate();
}

absl::string_view ModelFormatName(ModelFormat format) {
  return format == ModelFormat::kOnnx ? "onnx" : "torchscript";
}

absl::StatusOr<ModelFormat> ParseModelFormat(absl::string_view name) {
  if (name == "torchscript" || name == "pt") return ModelFormat::kTorchScript;
  if (name == "onnx") return ModelFormat::kOnnx;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown model format \"", name, "\"; use \"torchscript\" or \"onnx\""));
}

absl::StatusOr<int64_t> ModelSpec::CheckInputs(const std::vector<Tensor>& given) const {
  if (given.size() != inputs.size()) {
    return absl::InvalidArgumentError(absl::StrCat("the model takes ", inputs.size(),
                                                   " input(s), the request has ",
                                                   given.size()));
  }
  int64_t batch = -1;
  for (const TensorSpec& spec : inputs) {
    const Tensor* match = nullptr;
    for (const Tensor& t : given) {
      if (t.name == spec.name) match = &t;
    }
    // An unnamed tensor is the model's only input: what an offline job
    // reads from an .npz's "inputs" array. The front-ends refuse unnamed
    // inputs, and a wrongly named one is refused here rather than guessed:
    // a client that sends another model's input by mistake gets told.
    if (match == nullptr && inputs.size() == 1 && given[0].name.empty()) match = &given[0];
    if (match == nullptr) {
      std::vector<std::string> names;
      for (const Tensor& t : given) names.push_back(absl::StrCat("'", t.name, "'"));
      return absl::InvalidArgumentError(absl::StrCat("the request has no input named '",
                                                     spec.name, "' (it has ",
                                                     absl::StrJoin(names, ", "), ")"));
    }
    TensorSpec named = spec;
    if (!match->name.empty()) named.name = match->name;
    if (absl::Status s = named.Check(*match); !s.ok()) return s;
    if (match->shape.empty()) {
      return absl::InvalidArgumentError("inputs need a batch dimension");
    }
    if (batch >= 0 && match->shape[0] != batch) {
      return absl::InvalidArgumentError("all inputs must have the same batch size");
    }
    batch = match->shape[0];
  }
  if (batch <= 0) return absl::InvalidArgumentError("the batch dimension must be at least 1");
  return batch;
}

absl::StatusOr<int64_t> ModelSpec::CheckAndOrderInputs(std::vector<Tensor>* given) const {
  absl::StatusOr<int64_t> batch = CheckInputs(*given);
  if (!batch.ok() || given->size() < 2) return batch;
  std::vector<Tensor> ordered;
  ordered.reserve(given->size());
  for (const TensorSpec& spec : inputs) {
    for (Tensor& t : *given) {
      if (t.name == spec.name) ordered.push_back(std::move(t));
    }
  }
  *given = std::move(ordered);
  return batch;
}

absl::StatusOr<ModelSpec> ParseModelSpecJson(absl::string_view text) {
  json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError("model meta must be a JSON object");
  }
  ModelSpec spec;
  if (auto f = j.find("format"); f != j.end()) {
    if (!f->is_string()) return absl::InvalidArgumentError("meta \"format\" must be a string");
    auto format = ParseModelFormat(f->get<std::string>());
    if (!format.ok()) return format.status();
    spec.format = *format;
  }
  for (const char* key : {"inputs", "outputs"}) {
    auto list = j.find(key);
    if (list == j.end() || !list->is_array() || list->empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("meta needs a non-empty \"", key, "\" array"));
    }
    auto& out = std::string(key) == "inputs" ? spec.inputs : spec.outputs;
    for (const json& item : *list) {
      auto t = ParseTensorSpec(item, std::string(key) == "inputs" ? "input" : "output");
      if (!t.ok()) return t.status();
      out.push_back(*std::move(t));
    }
  }
  if (auto a = j.find("accuracy"); a != j.end() && !a->is_null()) {
    if (!a->is_number() || a->get<double>() < 0 || a->get<double>() > 1) {
      return absl::InvalidArgumentError("meta \"accuracy\" must be a fraction in [0,1]");
    }
    spec.declared_accuracy = a->get<double>();
  }
  return spec;
}

std::string ModelSpecToJson(const ModelSpec& spec) {
  json j{{"format", std::string(ModelFormatName(spec.format))},
         {"inputs", json::array()},
         {"outputs", json::array()}};
  for (const auto& t : spec.inputs) j["inputs"].push_back(TensorSpecToJson(t));
  for (const auto& t : spec.outputs) j["outputs"].push_back(TensorSpecToJson(t));
  if (spec.declared_accuracy) j["accuracy"] = *spec.declared_accuracy;
  return j.dump();
}

}  // namespace maitre
