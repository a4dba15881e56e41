#include "loadgen/inputs.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "http/client.h"
#include "core/batch.h"
#include "core/npz.h"

namespace maitre::loadgen {
namespace {

absl::Status Invalid(absl::string_view a, absl::string_view b = "", absl::string_view c = "") {
  return absl::InvalidArgumentError(absl::StrCat(a, b, c));
}

absl::StatusOr<nlohmann::json> GetJson(http::Client& client, const std::string& path) {
  MAITRE_ASSIGN_OR_RETURN(http::Response response, client.Send("GET", path));
  nlohmann::json body = nlohmann::json::parse(response.body, nullptr, /*allow_exceptions=*/false);
  if (response.status != 200) {
    std::string message = body.is_object() && body.contains("error") && body["error"].is_string()
                              ? body["error"].get<std::string>()
                              : response.body.substr(0, 200);
    absl::Status status =
        response.status == 404 ? absl::NotFoundError(message) : absl::UnavailableError(message);
    return absl::Status(status.code(), absl::StrCat("GET ", path, ": HTTP ", response.status, ": ",
                                                    message));
  }
  if (body.is_discarded() || !body.is_object()) {
    return absl::UnavailableError(absl::StrCat("GET ", path, ": the answer is not a JSON object"));
  }
  return body;
}

}  // namespace

absl::StatusOr<std::vector<TensorSpec>> ParseTensorSpecs(const nlohmann::json& inputs) {
  if (!inputs.is_array() || inputs.empty()) {
    return Invalid("the model's metadata lists no inputs");
  }
  std::vector<TensorSpec> specs;
  for (const nlohmann::json& entry : inputs) {
    if (!entry.is_object() || !entry.contains("name") || !entry["name"].is_string() ||
        !entry.contains("datatype") || !entry["datatype"].is_string() ||
        !entry.contains("shape") || !entry["shape"].is_array()) {
      return Invalid("an input in the model's metadata lacks its name, datatype or shape");
    }
    TensorSpec spec;
    spec.name = entry["name"].get<std::string>();
    spec.dtype = ParseDataType(entry["datatype"].get<std::string>());
    if (spec.dtype == DataType::kInvalid || spec.dtype == DataType::kBytes) {
      return Invalid("input '", spec.name,
                     absl::StrCat("' has datatype ", entry["datatype"].get<std::string>(),
                                  ", which the load generator cannot make up; pass --input"));
    }
    for (const nlohmann::json& d : entry["shape"]) {
      if (!d.is_number_integer()) return Invalid("input '", spec.name, "' has a bad shape");
      spec.shape.push_back(d.get<int64_t>());
    }
    specs.push_back(std::move(spec));
  }
  return specs;
}

absl::StatusOr<std::vector<std::vector<Tensor>>> RowsFromNpz(
    absl::string_view npz_bytes, size_t max_rows, const std::vector<TensorSpec>& specs) {
  MAITRE_ASSIGN_OR_RETURN(auto arrays, ParseNpz(npz_bytes));
  std::vector<Tensor> inputs;
  for (auto& [name, tensor] : arrays) {
    if (name == "labels") continue;
    if (tensor.shape.empty()) {
      return Invalid("array '", name, "' is a scalar; inputs need a leading batch dimension");
    }
    inputs.push_back(std::move(tensor));
  }
  if (inputs.empty()) return Invalid("the .npz holds no input arrays (only \"labels\")");
  const int64_t rows = inputs[0].shape[0];
  for (const Tensor& t : inputs) {
    if (t.shape[0] != rows) {
      return Invalid("arrays '", inputs[0].name,
                     absl::StrCat("' and '", t.name, "' have different numbers of rows (", rows,
                                  " and ", t.shape[0], ")"));
    }
  }
  if (rows == 0) return Invalid("the .npz arrays have no rows");

  // Give the arrays the model's names, in the model's order when they match.
  if (specs.size() == 1 && inputs.size() == 1) {
    inputs[0].name = specs[0].name;
  } else if (!specs.empty()) {
    std::vector<Tensor> ordered;
    for (const TensorSpec& spec : specs) {
      for (Tensor& t : inputs) {
        if (t.name == spec.name) ordered.push_back(std::move(t));
      }
    }
    if (ordered.size() == inputs.size()) inputs = std::move(ordered);
  }

  const size_t count = std::min(static_cast<size_t>(rows), std::max<size_t>(max_rows, 1));
  std::vector<std::vector<Tensor>> out(count);
  for (const Tensor& t : inputs) {
    const size_t row_bytes = t.data.size() / static_cast<size_t>(rows);
    std::vector<int64_t> shape = t.shape;
    shape[0] = 1;
    for (size_t i = 0; i < count; ++i) {
      Tensor row;
      row.name = t.name;
      row.dtype = t.dtype;
      row.shape = shape;
      row.data = t.data.substr(i * row_bytes, row_bytes);
      out[i].push_back(std::move(row));
    }
  }
  return out;
}

absl::StatusOr<TargetInfo> FetchTargetInfo(const std::string& server_url, const Target& target,
                                           Nanos timeout) {
  http::ClientOptions options;
  options.base_url = server_url;
  options.timeout = timeout;
  MAITRE_ASSIGN_OR_RETURN(auto client, http::Client::Create(options));
  TargetInfo info;
  if (!target.app.empty()) {
    MAITRE_ASSIGN_OR_RETURN(nlohmann::json app,
                            GetJson(*client, absl::StrCat("/v2/apps/",
                                                          http::PercentEncode(target.app))));
    const nlohmann::json& defaults = app.contains("defaults") ? app["defaults"] : nlohmann::json();
    if (defaults.is_object() && defaults.contains("latency_ms") &&
        defaults["latency_ms"].is_number()) {
      info.default_latency_ms = defaults["latency_ms"].get<double>();
    }
    if (!app.contains("models") || !app["models"].is_array() || app["models"].empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("app '", target.app, "' has no models registered yet"));
    }
    MAITRE_ASSIGN_OR_RETURN(info.inputs, ParseTensorSpecs(app["models"][0].value(
                                             "inputs", nlohmann::json::array())));
    for (const nlohmann::json& model : app["models"]) {
      if (!model.is_object() || !model.contains("variants") || !model["variants"].is_array()) {
        continue;
      }
      const std::string name = model.value("name", "");
      for (const nlohmann::json& v : model["variants"]) {
        if (v.is_object() && v.contains("variant") && v["variant"].is_string() &&
            v.contains("accuracy") && v["accuracy"].is_number()) {
          info.variant_accuracy[absl::StrCat(name, ":", v["variant"].get<std::string>())] =
              v["accuracy"].get<double>();
        }
      }
    }
    return info;
  }
  MAITRE_ASSIGN_OR_RETURN(
      nlohmann::json model,
      GetJson(*client, absl::StrCat("/v2/models/", http::PercentEncode(target.model))));
  MAITRE_ASSIGN_OR_RETURN(info.inputs,
                          ParseTensorSpecs(model.value("inputs", nlohmann::json::array())));
  return info;
}

absl::StatusOr<std::vector<std::vector<Tensor>>> BatchRequests(
    const std::vector<std::vector<Tensor>>& rows, int batch) {
  if (batch < 1) return Invalid("the batch must be at least 1 row");
  if (rows.empty()) return Invalid("there are no rows to batch");
  std::vector<std::vector<Tensor>> requests;
  requests.reserve(rows.size());
  std::vector<const std::vector<Tensor>*> members(static_cast<size_t>(batch));
  for (size_t i = 0; i < rows.size(); ++i) {
    for (size_t k = 0; k < members.size(); ++k) {
      members[k] = &rows[(i * members.size() + k) % rows.size()];
    }
    MAITRE_ASSIGN_OR_RETURN(std::vector<Tensor> request, ConcatRows(members));
    requests.push_back(std::move(request));
  }
  return requests;
}

}  // namespace maitre::loadgen
