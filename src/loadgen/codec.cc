#include "loadgen/codec.h"

#include <charconv>
#include <cstdio>
#include <cstring>

#include <simdjson.h>

#include "absl/strings/str_cat.h"
#include "core/json_text.h"

namespace maitre::loadgen {
namespace {

template <typename T>
void AppendNumber(std::string* out, T v) {
  char buf[64];
  auto result = std::to_chars(buf, buf + sizeof buf, v);
  out->append(buf, result.ptr);
}

// Reads element i of a tensor's bytes; memcpy because the bytes of a string
// carry no alignment promise for wider types.
template <typename T>
T Element(const Tensor& t, int64_t i) {
  T v;
  std::memcpy(&v, t.data.data() + i * sizeof(T), sizeof(T));
  return v;
}

template <typename T>
void AppendElements(std::string* out, const Tensor& t) {
  const int64_t n = t.NumElements();
  for (int64_t i = 0; i < n; ++i) {
    if (i > 0) out->push_back(',');
    AppendNumber(out, Element<T>(t, i));
  }
}

absl::Status AppendData(std::string* out, const Tensor& t) {
  out->push_back('[');
  switch (t.dtype) {
    case DataType::kBool: {
      const int64_t n = t.NumElements();
      for (int64_t i = 0; i < n; ++i) {
        if (i > 0) out->push_back(',');
        out->append(t.data[i] != 0 ? "true" : "false");
      }
      break;
    }
    case DataType::kUint8:
      AppendElements<uint8_t>(out, t);
      break;
    case DataType::kUint16:
      AppendElements<uint16_t>(out, t);
      break;
    case DataType::kUint32:
      AppendElements<uint32_t>(out, t);
      break;
    case DataType::kUint64:
      AppendElements<uint64_t>(out, t);
      break;
    case DataType::kInt8:
      AppendElements<int8_t>(out, t);
      break;
    case DataType::kInt16:
      AppendElements<int16_t>(out, t);
      break;
    case DataType::kInt32:
      AppendElements<int32_t>(out, t);
      break;
    case DataType::kInt64:
      AppendElements<int64_t>(out, t);
      break;
    case DataType::kFp32:
      AppendElements<float>(out, t);
      break;
    case DataType::kFp64:
      AppendElements<double>(out, t);
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "input '", t.name, "' is ", DataTypeName(t.dtype),
          ", which has no JSON form; use --protocol http-binary or grpc"));
  }
  out->push_back(']');
  return absl::OkStatus();
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

int64_t ReadMicros(simdjson::dom::object parameters, std::string_view key) {
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
  out.push_back('{');
  AppendParameters(&out, parameters);
  out.append("\"inputs\":[");
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (i > 0) out.push_back(',');
    AppendTensorHeader(&out, inputs[i]);
    out.append(",\"data\":");
    if (absl::Status s = AppendData(&out, inputs[i]); !s.ok()) return s;
    out.push_back('}');
  }
  out.append("]}");
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
  out.push_back('{');
  AppendParameters(&out, parameters);
  out.append("\"inputs\":[");
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (i > 0) out.push_back(',');
    AppendTensorHeader(&out, inputs[i]);
    out.append(",\"parameters\":{\"binary_data_size\":");
    AppendNumber(&out, inputs[i].data.size());
    out.append("}}");
  }
  out.append("]}");
  request.json_length = static_cast<int64_t>(out.size());
  for (const Tensor& t : inputs) out.append(t.data);
  return request;
}

std::string SerializeHttpRequest(absl::string_view method, absl::string_view host,
                                 absl::string_view path, const std::vector<http::Header>& headers,
                                 absl::string_view body) {
  std::string out;
  out.reserve(128 + path.size() + body.size());
  absl::StrAppend(&out, method, " ", path, " HTTP/1.1\r\nHost: ", host,
                  "\r\nContent-Length: ", body.size(), "\r\n");
  for (const http::Header& h : headers) absl::StrAppend(&out, h.name, ": ", h.value, "\r\n");
  out.append("\r\n");
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
  simdjson::dom::object parameters;
  if (root["parameters"].get(parameters) != simdjson::SUCCESS) return timings;
  timings.queue_us = ReadMicros(parameters, "queue_us");
  timings.compute_us = ReadMicros(parameters, "compute_us");
  timings.total_us = ReadMicros(parameters, "total_us");
  return timings;
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
