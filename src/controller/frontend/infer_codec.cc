#include "controller/frontend/infer_codec.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <cmath>
#include <limits>
#include <optional>
#include <type_traits>

#include <simdjson.h>

#include "absl/strings/str_cat.h"
#include "core/data_type_visit.h"
#include "core/finite.h"
#include "core/json_text.h"

namespace maitre::controller {
namespace {

using simdjson::dom::array;
using simdjson::dom::element;
using simdjson::dom::element_type;
using simdjson::dom::object;

// simdjson speaks std::string_view; Debian's absl has its own string_view.
absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

absl::Status Invalid(absl::string_view a, absl::string_view b = "", absl::string_view c = "") {
  return absl::InvalidArgumentError(absl::StrCat(a, b, c));
}

// Where decoded values go: a tensor's bytes, written in place. Its owner
// sizes them up front for the values the shape claims, so that a value is
// one store rather than a call into std::string; a body holding more
// values than it claimed grows them as it goes (and is refused by the
// count check afterwards). Finish() trims them to what was written.
class ValueSink {
 public:
  explicit ValueSink(std::string* out) : out_(out) {}
  template <typename T>
  void Put(T v) {
    if (used_ + sizeof v > out_->size()) out_->resize(std::max(2 * out_->size(), used_ + sizeof v));
    std::memcpy(out_->data() + used_, &v, sizeof v);
    used_ += sizeof v;
  }
  void Finish() { out_->resize(used_); }

 private:
  std::string* out_;
  size_t used_ = 0;
};

// Writes the values of a (possibly nested) JSON array as raw bytes of T,
// counting them in `count`. The element type is chosen once per
// tensor (DecodeData), not once per value: a row of an image is hundreds
// of values, and this loop is a good part of the HTTP front-end's work.
// `float_bound`: for a floating T, the magnitude from which a decimal no
// longer rounds to a finite T.
template <typename T>
absl::Status AppendValues(element e, DataType dtype, double float_bound, const std::string& name,
                          ValueSink& out, int64_t* count) {
  if (e.type() == element_type::ARRAY) {
    for (element child : array(e)) {
      absl::Status s = AppendValues<T>(child, dtype, float_bound, name, out, count);
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }
  ++*count;
  // Floats take any JSON number, BOOL only true/false, integers an integer
  // within the type's range.
  if constexpr (std::is_same_v<T, bool>) {
    if (!e.is_bool()) return Invalid("input '", name, "': BOOL data must hold true/false");
    out.Put<uint8_t>(e.get_bool().value_unsafe() ? 1 : 0);
  } else if constexpr (std::is_floating_point_v<T>) {
    double v = 0;
    switch (e.type()) {
      case element_type::DOUBLE:
        v = e.get_double().value_unsafe();
        break;
      case element_type::INT64:
        v = static_cast<double>(e.get_int64().value_unsafe());
        break;
      case element_type::UINT64:
        v = static_cast<double>(e.get_uint64().value_unsafe());
        break;
      default:
        return Invalid("input '", name, "': data must hold numbers");
    }
    if (!(std::fabs(v) < float_bound)) {
      return Invalid("input '", name,
                     absl::StrCat("': a value is out of range for ", DataTypeName(dtype)));
    }
    constexpr double kLargest = std::numeric_limits<T>::max();
    const T f = static_cast<T>(std::clamp(v, -kLargest, kLargest));
    out.Put(f);
  } else {
    int64_t i = 0;
    uint64_t u = 0;
    const bool is_signed = e.is_int64();
    if (is_signed) {
      i = e.get_int64().value_unsafe();
    } else if (e.is_uint64()) {
      u = e.get_uint64().value_unsafe();
    } else {
      return Invalid("input '", name,
                     absl::StrCat("': ", DataTypeName(dtype), " data must hold integers"));
    }
    constexpr int64_t lo = static_cast<int64_t>(std::numeric_limits<T>::min());
    constexpr uint64_t hi = static_cast<uint64_t>(std::numeric_limits<T>::max());
    const bool fits =
        is_signed ? (i >= lo && (i < 0 || static_cast<uint64_t>(i) <= hi)) : u <= hi;
    if (!fits) {
      return Invalid("input '", name,
                     absl::StrCat("': a value is out of range for ", DataTypeName(dtype)));
    }
    const T v = is_signed ? static_cast<T>(i) : static_cast<T>(u);
    out.Put(v);
  }
  return absl::OkStatus();
}

// Whether a (possibly nested) JSON array holds any value at all.
bool HoldsAValue(element e) {
  if (e.type() != element_type::ARRAY) return true;
  for (element child : array(e)) {
    if (HoldsAValue(child)) return true;
  }
  return false;
}

// Decodes a tensor's JSON "data" into `out` (sized up front for the values
// the shape claims; see ValueSink), counting the values in `count`.
absl::Status DecodeData(element e, DataType dtype, const std::string& name, std::string* out,
                        int64_t* count) {
  return VisitDataType(
      dtype,
      [&](auto tag) -> absl::Status {
        using T = typename decltype(tag)::type;
        double float_bound = 0;
        if constexpr (std::is_floating_point_v<T>) {
          // 1e39 would become FP32's infinity, which no model can answer. A
          // decimal rounds to the nearest T, so one short of halfway past
          // the largest still becomes the largest: 3.40282347e+38, FLT_MAX
          // printed to the nine digits that identify it, lies above it.
          constexpr T kLargest = std::numeric_limits<T>::max();
          float_bound = static_cast<double>(kLargest) +
                        (static_cast<double>(kLargest) -
                         static_cast<double>(std::nextafter(kLargest, T{0}))) / 2;
        }
        ValueSink sink(out);
        absl::Status s = AppendValues<T>(e, dtype, float_bound, name, sink, count);
        sink.Finish();
        return s;
      },
      [&] {
        // Nothing to convert is no error here: the tensor's own checks
        // name what is wrong with an empty one of this type.
        if (!HoldsAValue(e)) return absl::OkStatus();
        return Invalid("input '", name,
                       absl::StrCat("': ", DataTypeName(dtype),
                                    " cannot be sent as JSON; send it as binary data"));
      });
}

// Parses one input. For a binary input, sets *binary_size and leaves the
// tensor's data empty for the caller to fill from the body's tail.
// `json_size` is the length of the JSON text the input came from.
absl::StatusOr<Tensor> ParseInput(element e, size_t index, size_t json_size, int64_t* binary_size) {
  *binary_size = -1;
  std::string where = absl::StrCat("inputs[", index, "]");
  if (e.type() != element_type::OBJECT) return Invalid(where, " must be an object");
  object o = e;
  Tensor t;
  std::string_view name;
  if (o["name"].get(name) != simdjson::SUCCESS || name.empty()) {
    return Invalid(where, " needs a \"name\" string");
  }
  t.name = std::string(name);
  std::string_view dtype;
  if (o["datatype"].get(dtype) != simdjson::SUCCESS) {
    return Invalid("input '", t.name, "' needs a \"datatype\" string such as \"FP32\"");
  }
  t.dtype = ParseDataType(Sv(dtype));
  if (t.dtype == DataType::kInvalid) {
    return Invalid("input '", t.name, absl::StrCat("': unknown datatype \"", Sv(dtype), "\""));
  }
  array shape;
  if (o["shape"].get(shape) != simdjson::SUCCESS) {
    return Invalid("input '", t.name, "' needs a \"shape\" array");
  }
  for (element d : shape) {
    int64_t v = 0;
    if (d.get(v) != simdjson::SUCCESS || v < 0) {
      return Invalid("input '", t.name, "': shape entries must be non-negative integers");
    }
    t.shape.push_back(v);
  }
  int64_t expected = t.NumElements();
  // The binary-data extension: the bytes follow the JSON header.
  if (auto params = o["parameters"]; params.error() == simdjson::SUCCESS) {
    if (auto declared = params["binary_data_size"]; declared.error() == simdjson::SUCCESS) {
      int64_t size = -1;
      if (declared.get(size) != simdjson::SUCCESS || size < 0) {
        return Invalid("input '", t.name, "': binary_data_size must be a non-negative integer");
      }
      // Two sources for one tensor: which one the client meant is a guess.
      if (element ignored; o["data"].get(ignored) == simdjson::SUCCESS) {
        return Invalid("input '", t.name, "' has both \"data\" and binary_data_size; send one");
      }
      *binary_size = size;
      return t;
    }
  }
  element data;
  if (o["data"].get(data) != simdjson::SUCCESS) {
    return Invalid("input '", t.name, "' needs \"data\" (or binary_data_size)");
  }
  // Room for the values up front (DecodeData writes them in place and trims
  // the rest), but only as many as the JSON text can
  // hold (each takes two bytes at least, a digit and a separator): the
  // shape is the client's claim, and a few bytes claiming [2147483647]
  // must not cost gigabytes before the count check refuses them.
  size_t elem = DataTypeSize(t.dtype);
  const int64_t most = static_cast<int64_t>(json_size / 2 + 1);
  if (elem > 0 && expected > 0) {
    t.data.resize(static_cast<size_t>(std::min(expected, most)) * elem);
  }
  int64_t count = 0;
  absl::Status s = DecodeData(data, t.dtype, t.name, &t.data, &count);
  if (!s.ok()) return s;
  if (count != expected) {
    return Invalid("input '", t.name,
                   absl::StrCat("': shape ", ShapeToString(t.shape), " needs ", expected,
                                " values but data has ", count));
  }
  // An empty "data" holds no value to refuse, so a datatype with no fixed
  // size (BYTES) would pass the checks above.
  if (absl::Status valid = t.Validate(); !valid.ok()) return valid;
  if (absl::Status finite = CheckFinite(t); !finite.ok()) {
    return Invalid("input '", t.name, absl::StrCat("': ", finite.message()));
  }
  return t;
}

absl::Status ParseParameters(element e, InferRequest* request) {
  if (e.type() != element_type::OBJECT) return Invalid("\"parameters\" must be an object");
  object o = e;
  for (auto [key, value] : o) {
    if (IsRequirementParameter(Sv(key))) {
      double v = 0;
      if (value.get(v) != simdjson::SUCCESS) {
        int64_t iv = 0;
        if (value.get(iv) != simdjson::SUCCESS) {
          return Invalid("parameter \"", Sv(key), "\" must be a number");
        }
        v = static_cast<double>(iv);
      }
      if (absl::Status s = SetRequirement(Sv(key), v, &request->requirements); !s.ok()) return s;
    } else if (key == "maitre_app") {
      std::string_view app;
      if (value.get(app) != simdjson::SUCCESS) {
        return Invalid("parameter \"maitre_app\" must be a string");
      }
      request->app = std::string(app);
    } else if (key == "binary_data_output") {
      bool b = false;
      if (value.get(b) != simdjson::SUCCESS) {
        return Invalid("parameter \"binary_data_output\" must be true or false");
      }
      request->binary_outputs = b;
    }
    // Other parameters are carried by the protocol for other servers'
    // extensions; ignoring them keeps standard clients working.
  }
  return absl::OkStatus();
}

template <typename T>
void AppendInteger(std::string* out, T v) {
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out->append(buf, r.ptr);
}

// An output's "data": core's AppendJsonData, which the load generator's
// requests use too. A type with no JSON form (FP16) still answers with one
// null per element, so the array keeps the length its shape promises.
void AppendTensorData(std::string* out, const Tensor& t) {
  if (AppendJsonData(out, t)) return;
  const int64_t n = t.NumElements();
  out->push_back('[');
  for (int64_t i = 0; i < n; ++i) out->append(i > 0 ? ",null" : "null");
  out->push_back(']');
}

// The requirements a request's parameters may set, and the values Maitre
// accepts for each.
struct RequirementParameter {
  absl::string_view key;
  double lo;
  double hi;
  std::optional<double> Requirements::*field;
};
constexpr RequirementParameter kRequirementParameters[] = {
    {"latency_ms", 0.001, 3.6e6, &Requirements::latency_ms},
    {"min_accuracy", 0, 1, &Requirements::min_accuracy},
    {"max_cost", 0, 1e9, &Requirements::max_cost},
};

}  // namespace

bool IsRequirementParameter(absl::string_view key) {
  for (const RequirementParameter& p : kRequirementParameters) {
    if (p.key == key) return true;
  }
  return false;
}

absl::Status SetRequirement(absl::string_view key, double value, Requirements* requirements) {
  for (const RequirementParameter& p : kRequirementParameters) {
    if (p.key != key) continue;
    if (!(value >= p.lo && value <= p.hi)) {  // NaN too
      return Invalid("parameter \"", key, absl::StrCat("\" must be between ", p.lo, " and ", p.hi));
    }
    requirements->*p.field = value;
    return absl::OkStatus();
  }
  return Invalid("parameter \"", key, "\" is not a requirement");
}

absl::StatusOr<InferRequest> ParseInferRequest(absl::string_view body, int64_t json_length) {
  absl::string_view json_part = body;
  if (json_length >= 0) {
    if (json_length > static_cast<int64_t>(body.size())) {
      return Invalid(absl::StrCat("Inference-Header-Content-Length is ", json_length,
                                  " but the body has only ", body.size(), " bytes"));
    }
    json_part = body.substr(0, static_cast<size_t>(json_length));
  }
  // One parser per thread keeps its buffers warm across requests.
  thread_local simdjson::dom::parser parser;
  simdjson::padded_string padded(json_part.data(), json_part.size());
  element doc;
  if (auto error = parser.parse(padded).get(doc); error != simdjson::SUCCESS) {
    return Invalid("the request body is not valid JSON (", simdjson::error_message(error), ")");
  }
  if (doc.type() != element_type::OBJECT) return Invalid("the request body must be a JSON object");
  object root = doc;
  InferRequest request;
  std::string_view id;
  if (auto e = root["id"]; e.error() == simdjson::SUCCESS) {
    if (e.get(id) != simdjson::SUCCESS) return Invalid("\"id\" must be a string");
    request.id = std::string(id);
  }
  if (auto e = root["parameters"]; e.error() == simdjson::SUCCESS) {
    absl::Status s = ParseParameters(e.value_unsafe(), &request);
    if (!s.ok()) return s;
  }
  array inputs;
  if (root["inputs"].get(inputs) != simdjson::SUCCESS) {
    return Invalid("the request needs an \"inputs\" array");
  }
  size_t index = 0;
  size_t offset = json_part.size();
  for (element e : inputs) {
    int64_t binary_size = -1;
    auto t = ParseInput(e, index++, json_part.size(), &binary_size);
    if (!t.ok()) return t.status();
    if (binary_size >= 0) {
      if (json_length < 0) {
        return Invalid("input '", t->name,
                       "' has binary_data_size but the request has no "
                       "Inference-Header-Content-Length header");
      }
      if (static_cast<uint64_t>(binary_size) > body.size() - offset) {
        return Invalid("input '", t->name,
                       absl::StrCat("': binary_data_size ", binary_size, " runs past the end of "
                                    "the body (", body.size() - offset, " bytes left)"));
      }
      t->data.assign(body.data() + offset, static_cast<size_t>(binary_size));
      offset += static_cast<size_t>(binary_size);
      // The declared size must match shape × datatype, as the JSON path checks
      // the value count.
      if (absl::Status s = t->Validate(); !s.ok()) return s;
      if (absl::Status s = CheckFinite(*t); !s.ok()) {
        return Invalid("input '", t->name, absl::StrCat("': ", s.message()));
      }
    }
    request.inputs.push_back(*std::move(t));
  }
  if (request.inputs.empty()) return Invalid("\"inputs\" must not be empty");
  if (offset != body.size()) {
    return Invalid(absl::StrCat("the body has ", body.size() - offset,
                                " bytes after the last binary input"));
  }
  if (auto e = root["outputs"]; e.error() == simdjson::SUCCESS) {
    array outputs;
    if (e.get(outputs) != simdjson::SUCCESS) return Invalid("\"outputs\" must be an array");
    for (element o : outputs) {
      std::string_view name;
      if (o["name"].get(name) != simdjson::SUCCESS) {
        return Invalid("each entry of \"outputs\" needs a \"name\"");
      }
      RequestedOutput out;
      out.name = std::string(name);
      if (auto p = o["parameters"]; p.error() == simdjson::SUCCESS) {
        bool binary = false;
        if (p["binary_data"].get(binary) == simdjson::SUCCESS) out.binary = binary;
      }
      request.outputs.push_back(std::move(out));
    }
  }
  return request;
}

EncodedResponse WriteInferResponse(const InferResponse& response,
                                   const std::vector<RequestedOutput>& requested,
                                   bool all_binary) {
  auto binary = [&](const std::string& name) {
    for (const RequestedOutput& r : requested) {
      if (r.name == name) return r.binary || all_binary;
    }
    return all_binary;
  };
  std::string out;
  size_t estimate = 256;
  for (const Tensor& t : response.outputs) estimate += 16 * static_cast<size_t>(t.NumElements());
  out.reserve(estimate);
  out.append("{\"model_name\":");
  AppendJsonString(&out, response.model_name);
  out.append(",\"model_version\":");
  AppendJsonString(&out, response.model_version);
  out.append(",\"id\":");
  AppendJsonString(&out, response.id);
  const InferTimings& timing = response.timings;
  out.append(",\"parameters\":{\"worker\":");
  AppendJsonString(&out, timing.worker);
  out.append(",\"worker_type\":");
  AppendJsonString(&out, timing.worker_type);
  out.append(",\"queue_us\":");
  AppendInteger(&out, timing.queue_us);
  out.append(",\"compute_us\":");
  AppendInteger(&out, timing.compute_us);
  out.append(",\"total_us\":");
  AppendInteger(&out, timing.total_us);
  out.append(",\"batch_size\":");
  AppendInteger(&out, timing.batch_size);
  out.append("},\"outputs\":[");
  std::vector<const Tensor*> tail;
  for (size_t i = 0; i < response.outputs.size(); ++i) {
    const Tensor& t = response.outputs[i];
    if (i > 0) out.push_back(',');
    out.append("{\"name\":");
    AppendJsonString(&out, t.name);
    out.append(",\"datatype\":\"");
    out.append(DataTypeName(t.dtype).data(), DataTypeName(t.dtype).size());
    out.append("\",\"shape\":[");
    for (size_t d = 0; d < t.shape.size(); ++d) {
      if (d > 0) out.push_back(',');
      AppendInteger(&out, t.shape[d]);
    }
    if (binary(t.name)) {
      out.append("],\"parameters\":{\"binary_data_size\":");
      AppendInteger(&out, t.data.size());
      out.append("}}");
      tail.push_back(&t);
    } else {
      out.append("],\"data\":");
      AppendTensorData(&out, t);
      out.push_back('}');
    }
  }
  out.append("]}");
  EncodedResponse encoded;
  if (!tail.empty()) {
    encoded.json_length = static_cast<int64_t>(out.size());
    for (const Tensor* t : tail) out.append(t->data);
  }
  encoded.body = std::move(out);
  return encoded;
}

}  // namespace maitre::controller
