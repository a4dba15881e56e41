#include "fuzz/infer_round_trip.h"

#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>

#include "core/data_type_visit.h"
#include "fuzz/fuzz_check.h"
#include "loadgen/codec.h"

namespace maitre::fuzz {
namespace {

using controller::InferRequest;
using controller::ParseInferRequest;

template <typename T>
T Element(const Tensor& t, int64_t i) {
  T v;
  std::memcpy(&v, t.data.data() + i * sizeof(T), sizeof(T));
  return v;
}

// Whether JSON carries `t` exactly: a type with a JSON form, every float
// finite (JSON has no NaN or infinity) and every BOOL byte 0 or 1 (JSON's
// true and false; the binary forms may send any byte).
bool HasExactJsonForm(const Tensor& t) {
  return VisitDataType(
      t.dtype,
      [&](auto tag) {
        using T = typename decltype(tag)::type;
        for (int64_t i = 0; i < t.NumElements(); ++i) {
          if constexpr (std::is_same_v<T, bool>) {
            if (Element<uint8_t>(t, i) > 1) return false;
          } else if constexpr (std::is_floating_point_v<T>) {
            if (!std::isfinite(Element<T>(t, i))) return false;
          }
        }
        return true;
      },
      [] { return false; });
}

// The binary forms carry bytes, which must come back unchanged (NaNs
// included). Through JSON floats compare by value, so that -0 read back
// from JSON's "-0" as +0 still counts as the same number.
bool SameValues(const Tensor& a, const Tensor& b, bool through_json) {
  if (through_json && (a.dtype == DataType::kFp32 || a.dtype == DataType::kFp64)) {
    if (a.data.size() != b.data.size()) return false;
    for (int64_t i = 0; i < a.NumElements(); ++i) {
      bool same = a.dtype == DataType::kFp32 ? Element<float>(a, i) == Element<float>(b, i)
                                             : Element<double>(a, i) == Element<double>(b, i);
      if (!same) return false;
    }
    return true;
  }
  return a.data == b.data;
}

void CheckSameRequest(const InferRequest& sent, const InferRequest& read, bool through_json) {
  const char* how = through_json ? "JSON round trip" : "binary round trip";
  FUZZ_CHECK(read.inputs.size() == sent.inputs.size(), "%s: %zu inputs read back as %zu", how,
             sent.inputs.size(), read.inputs.size());
  for (size_t i = 0; i < sent.inputs.size(); ++i) {
    const Tensor& a = sent.inputs[i];
    const Tensor& b = read.inputs[i];
    FUZZ_CHECK(a.name == b.name && a.dtype == b.dtype && a.shape == b.shape,
               "%s: input %zu '%s' %s%s read back as '%s' %s%s", how, i, a.name.c_str(),
               std::string(DataTypeName(a.dtype)).c_str(), ShapeToString(a.shape).c_str(),
               b.name.c_str(), std::string(DataTypeName(b.dtype)).c_str(),
               ShapeToString(b.shape).c_str());
    FUZZ_CHECK(SameValues(a, b, through_json), "%s: input '%s' changed its values", how,
               a.name.c_str());
  }
  FUZZ_CHECK(read.requirements.latency_ms == sent.requirements.latency_ms &&
                 read.requirements.min_accuracy == sent.requirements.min_accuracy &&
                 read.requirements.max_cost == sent.requirements.max_cost,
             "%s: the requirements changed", how);
  FUZZ_CHECK(read.binary_outputs == sent.binary_outputs, "%s: binary_data_output changed", how);
}

}  // namespace

void CheckAcceptedRequest(const InferRequest& request) {
  FUZZ_CHECK(!request.inputs.empty(), "a request was accepted without inputs");
  for (const Tensor& t : request.inputs) {
    absl::Status valid = t.Validate();
    FUZZ_CHECK(valid.ok(), "accepted input '%s' is not a valid tensor: %s", t.name.c_str(),
               valid.ToString().c_str());
  }

  loadgen::RequestParameters parameters;
  parameters.latency_ms = request.requirements.latency_ms;
  parameters.min_accuracy = request.requirements.min_accuracy;
  parameters.max_cost = request.requirements.max_cost;
  parameters.binary_data_output = request.binary_outputs;

  absl::StatusOr<loadgen::BinaryRequest> binary =
      loadgen::EncodeBinaryRequest(request.inputs, parameters);
  FUZZ_CHECK(binary.ok(), "the binary encoder refused an accepted request: %s",
             binary.status().ToString().c_str());
  absl::StatusOr<InferRequest> from_binary = ParseInferRequest(binary->body, binary->json_length);
  FUZZ_CHECK(from_binary.ok(), "the server refused its own request re-encoded as binary: %s",
             from_binary.status().ToString().c_str());
  CheckSameRequest(request, *from_binary, /*through_json=*/false);

  for (const Tensor& t : request.inputs) {
    if (!HasExactJsonForm(t)) return;
  }
  absl::StatusOr<std::string> json = loadgen::EncodeJsonRequest(request.inputs, parameters);
  FUZZ_CHECK(json.ok(), "the JSON encoder refused an accepted request: %s",
             json.status().ToString().c_str());
  absl::StatusOr<InferRequest> from_json = ParseInferRequest(*json, -1);
  FUZZ_CHECK(from_json.ok(), "the server refused its own request re-encoded as JSON: %s",
             from_json.status().ToString().c_str());
  CheckSameRequest(request, *from_json, /*through_json=*/true);
}

}  // namespace maitre::fuzz
