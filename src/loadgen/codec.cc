#include "loadgen/codec.h"

#include <charconv>
#include <cstdio>

#include <simdjson.h>

#include "absl/strings/str_cat.h"
#include "core/json_text.h"
#include "http/request_head.h"

namespace maitre::loadgen {
namespace {

template <typename T>
void AppendNumber(std::string* out, T v) {
  char buf[64];
  auto result = std::to_chars(buf, buf + sizeof buf, v);
  out->append(buf, result.ptr);
}

// The values themselves are written by core's AppendJsonData, the writer the
// server's responses use too; what is the load generator's own is the
// advice when a type has no JSON form.
absl::Status AppendData(std::string* out, const Tensor& t) {
  if (AppendJsonData(out, t)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("input '", t.name, "' is ", DataTypeName(t.dtype),
                   ", which has no JSON form; use --protocol http-binary or grpc"));
}

void AppendParameters(std::string* out, const RequestParameters& p) {
  std::string fields;
  auto add = [&fields](absl::string_view key, double value) {
    if (!fields.empty()) fields.push_back(',');
    AppendJsonString(&fields, key);
    fields.push_back(':');
    AppendNumber(&fields, value);
  };
  if (p.latency_ms) add("latency_ms", *p.latency_ms);
  if (p.min_accuracy) add("min_accuracy", *p.min_accuracy);
  if (p.max_cost) add("max_cost", *p.max_cost);
  if (p.binary_data_output) {
    if (!fields.empty()) fields.push_back(',');
    fields.append("\"binary_data_output\":true");
  }
  if (fields.empty()) return;
  out->append("\"parameters\":{");
  out->append(fields);
  out->append("},");
}

void AppendTensorHeader(std::string* out, const Tensor& t) {
  out->append("{\"name\":");
  AppendJsonString(out, t.name);
  out->append(",\"shape\":[");
  for (size_t d = 0; d < t.shape.size(); ++d) {
    if (d > 0) out->push_back(',');
    AppendNumber(out, t.shape[d]);
  }
  out->append("],\"datatype\":\"");
  out->append(DataTypeName(t.dtype).data(), DataTypeName(t.dtype).size());
  out->push_back('"');
}

absl::Status CheckInputs(const std::vector<Tensor>& inputs) {
  if (inputs.empty()) return absl::InvalidArgumentError("a request needs at least one input");
  for (const Tensor& t : inputs) {
    absl::Status s = t.Validate();
    if (!s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("input '", t.name, "': ", s.message()));
    }
  }
  return absl::OkStatus();
}

// The JSON of a request, the same for both encodings but for each input's
// tail: its "data", or for the binary extension the size of its bytes,
// which the caller appends after the JSON in the inputs' order.
absl::Status AppendRequestJson(std::string* out, const std::vector<Tensor>& inputs,
                               const RequestParameters& parameters, bool binary) {
  out->push_back('{');
  AppendParameters(out, parameters);
  out->append("\"inputs\":[");
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (i > 0) out->push_back(',');
    AppendTensorHeader(out, inputs[i]);
    if (binary) {
      out->append(",\"parameters\":{\"binary_data_size\":");
      AppendNumber(out, inputs[i].data.size());
      out->push_back('}');
    } else {
      out->append(",\"data\":");
      if (absl::Status s = AppendData(out, inputs[i]); !s.ok()) return s;
    }
    out->push_back('}');
  }
  out->append("]}");
  return absl::OkStatus();
}

int64_t ReadInteger(simdjson::dom::object parameters, std::string_view key) {
  simdjson::dom::element e;
  if (parameters[key].get(e) != simdjson::SUCCESS) return -1;
  int64_t i = 0;
  if (e.get(i) == simdjson::SUCCESS) return i;
  uint64_t u = 0;
  if (e.get(u) == simdjson::SUCCESS) return static_cast<int64_t>(u);
  double d = 0;
  if (e.get(d) == simdjson::SUCCESS) return static_cast<int64_t>(d);
  return -1;
}

}  // namespace

absl::StatusOr<std::string> EncodeJsonRequest(const std::vector<Tensor>& inputs,
                                              const RequestParameters& parameters) {
  if (absl::Status s = CheckInputs(inputs); !s.ok()) return s;
  std::string out;
  size_t estimate = 64;
  for (const Tensor& t : inputs) estimate += 64 + 12 * static_cast<size_t>(t.NumElements());
  out.reserve(estimate);
  if (absl::Status s = AppendRequestJson(&out, inputs, parameters, /*binary=*/false); !s.ok()) {
    return s;
  }
  return out;
}

absl::StatusOr<BinaryRequest> EncodeBinaryRequest(const std::vector<Tensor>& inputs,
                                                  const RequestParameters& parameters) {
  if (absl::Status s = CheckInputs(inputs); !s.ok()) return s;
  BinaryRequest request;
  std::string& out = request.body;
  size_t data_bytes = 0;
  for (const Tensor& t : inputs) data_bytes += t.data.size();
  out.reserve(256 + 96 * inputs.size() + data_bytes);
  if (absl::Status s = AppendRequestJson(&out, inputs, parameters, /*binary=*/true); !s.ok()) {
    return s;
  }
  request.json_length = static_cast<int64_t>(out.size());
  for (const Tensor& t : inputs) out.append(t.data);
  return request;
}

// The head is framed by maitre_http's AppendRequestHead, as the blocking
// http::Client frames its requests, so the two clients agree on the wire.
std::string SerializeHttpRequest(absl::string_view method, absl::string_view host,
                                 absl::string_view path, const std::vector<http::Header>& headers,
                                 absl::string_view body) {
  std::string out;
  out.reserve(128 + path.size() + body.size());
  http::AppendRequestHead(&out, method, host, path, body.size(), headers);
  out.append(body.data(), body.size());
  return out;
}

absl::StatusOr<ServerTimings> ParseResponseTimings(absl::string_view body, int64_t json_length) {
  if (json_length >= 0) {
    if (static_cast<size_t>(json_length) > body.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("Inference-Header-Content-Length ", json_length, " exceeds the body (",
                       body.size(), " bytes)"));
    }
    body = body.substr(0, static_cast<size_t>(json_length));
  }
  // One parser per thread: an io thread parses every answer it reads, and a
  // warm parser reuses its buffers.
  thread_local simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (parser.parse(body.data(), body.size()).get(doc) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError("the answer is not valid JSON");
  }
  simdjson::dom::object root;
  if (doc.get(root) != simdjson::SUCCESS) {
    return absl::InvalidArgumentError("the answer is not a JSON object");
  }
  ServerTimings timings;
  std::string_view model_name, model_version;
  if (root["model_name"].get(model_name) == simdjson::SUCCESS) {
    if (root["model_version"].get(model_version) != simdjson::SUCCESS) model_version = {};
    timings.variant = VariantOf(absl::string_view(model_name.data(), model_name.size()),
                                absl::string_view(model_version.data(), model_version.size()));
  }
  simdjson::dom::object parameters;
  if (root["parameters"].get(parameters) != simdjson::SUCCESS) return timings;
  timings.queue_us = ReadInteger(parameters, "queue_us");
  timings.compute_us = ReadInteger(parameters, "compute_us");
  timings.total_us = ReadInteger(parameters, "total_us");
  timings.batch_rows = ReadInteger(parameters, "batch_size");
  return timings;
}

std::string VariantOf(absl::string_view model_name, absl::string_view model_version) {
  if (model_name.empty()) return "";
  return absl::StrCat(model_name, ":", model_version);
}

std::string ErrorMessageOf(absl::string_view body) {
  thread_local simdjson::dom::parser parser;
  simdjson::dom::element doc;
  std::string_view message;
  if (parser.parse(body.data(), body.size()).get(doc) == simdjson::SUCCESS &&
      doc["error"].get(message) == simdjson::SUCCESS) {
    return std::string(message);
  }
  return std::string(body.substr(0, 200));
}

}  // namespace maitre::loadgen
