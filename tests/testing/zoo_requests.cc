#include "testing/zoo_requests.h"

#include "core/file_util.h"
#include "core/npz.h"

namespace maitre::testing {

std::string ImageRequest(const Valset& valset, int64_t row, const nlohmann::json& parameters) {
  return ImagesRequest(valset, row, 1, "input", parameters);
}

std::string ImagesRequest(const Valset& valset, int64_t first, int64_t rows,
                          const std::string& input_name, const nlohmann::json& parameters) {
  Tensor images = *SliceRows(valset.inputs, first, first + rows);
  nlohmann::json j{
      {"inputs",
       {{{"name", input_name}, {"datatype", "FP32"}, {"shape", {rows, 1, 28, 28}}}}}};
  nlohmann::json data = nlohmann::json::array();
  for (int64_t i = 0; i < images.NumElements(); ++i) data.push_back(images.As<float>()[i]);
  j["inputs"][0]["data"] = std::move(data);
  if (!parameters.is_null()) j["parameters"] = parameters;
  return j.dump();
}

absl::Status WriteValsetSlice(const Valset& valset, int64_t rows, const std::string& path,
                              Valset* slice) {
  auto inputs = SliceRows(valset.inputs, 0, rows);
  if (!inputs.ok()) return inputs.status();
  auto labels = SliceRows(valset.labels, 0, rows);
  if (!labels.ok()) return labels.status();
  if (slice != nullptr) {
    slice->inputs = *inputs;
    slice->labels = *labels;
  }
  inputs->name = "inputs";
  labels->name = "labels";
  return WriteFileAtomically(path, WriteNpz({*inputs, *labels}));
}

}  // namespace maitre::testing
