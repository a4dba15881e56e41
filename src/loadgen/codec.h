// What the load generator puts on the wire and reads back: Open Inference
// Protocol /infer bodies as JSON or with the binary-data extension (a JSON
// header of Inference-Header-Content-Length bytes, then each binary input's
// raw bytes in the order the header lists them), the whole HTTP/1.1 request
// as bytes (built once per input row, so sending costs no formatting), and
// the server's queue/compute/total timings from an answer.
//
// This is the client side only; the server's codec is
// src/controller/infer_codec.h. Both follow the published extension, so
// neither reads the other's code.
//
// Thread-safety: pure functions, safe to call from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/tensor.h"
#include "http/message.h"

namespace maitre::loadgen {

// Request-level parameters. For an app they are the query's requirements;
// binary_data_output asks for every output as raw bytes.
struct RequestParameters {
  std::optional<double> latency_ms;
  std::optional<double> min_accuracy;
  std::optional<double> max_cost;
  bool binary_data_output = false;
};

// {"parameters":{...},"inputs":[{"name","shape","datatype","data":[...]}]}
// with flat row-major data. FP16 and BYTES have no JSON form here:
// InvalidArgument, naming the binary protocols as the way out.
absl::StatusOr<std::string> EncodeJsonRequest(const std::vector<Tensor>& inputs,
                                              const RequestParameters& parameters);

struct BinaryRequest {
  std::string body;          // JSON header followed by the tensors' bytes
  int64_t json_length = 0;   // the Inference-Header-Content-Length value
};

// Every input goes as binary data: its JSON entry has no "data" and carries
// "parameters":{"binary_data_size":N}. Tensors must pass Validate().
absl::StatusOr<BinaryRequest> EncodeBinaryRequest(const std::vector<Tensor>& inputs,
                                                  const RequestParameters& parameters);

// The bytes of one HTTP/1.1 request: request line, Host, Content-Length,
// `headers` (Content-Type among them if wanted) and the body. Keep-alive is
// HTTP/1.1's default, so no Connection header is written.
std::string SerializeHttpRequest(absl::string_view method, absl::string_view host,
                                 absl::string_view path, const std::vector<http::Header>& headers,
                                 absl::string_view body);

// The split an answer reports in its "parameters" (docs/architecture.md, "How a
// query travels": every result carries queue, compute and total), -1 where the
// server did not say, and the variant that answered ("model:version" from the
// answer's model_name and model_version; "" when it names none), and the
// rows of the batch the query ran in. Which
// variant answered is how `maitre bench` measures an app's effective
// accuracy.
struct ServerTimings {
  int64_t queue_us = -1;
  int64_t compute_us = -1;
  int64_t total_us = -1;
  int64_t batch_rows = -1;
  std::string variant;
};

// "model:version", or "" when the model is unnamed.
std::string VariantOf(absl::string_view model_name, absl::string_view model_version);

// Reads the timings and the variant from a successful /infer answer. `json_length` is the
// answer's Inference-Header-Content-Length, or -1 when the whole body is
// JSON. InvalidArgument when the JSON part is not a JSON object (a server
// bug worth counting); missing timings are not an error.
absl::StatusOr<ServerTimings> ParseResponseTimings(absl::string_view body, int64_t json_length);

// The "error" string of a {"error": ...} body, or the body's first 200
// bytes when it is not one; for error examples in the report.
std::string ErrorMessageOf(absl::string_view body);

}  // namespace maitre::loadgen
