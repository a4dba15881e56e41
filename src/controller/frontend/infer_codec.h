// The Open Inference Protocol's JSON bodies for /infer: parsing requests into
// tensors and writing responses. Parsing is on every query's path, so it uses
// simdjson (about 10x faster than a DOM library on a 784-float image).
//
// Thread-safety: functions are thread-safe; each call uses its own parser.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/tensor.h"
#include "core/time.h"
#include "core/variant.h"

namespace maitre::controller {

struct RequestedOutput {
  std::string name;
  bool binary = false;  // the binary-data extension: return raw bytes
};

// A parsed /infer request, independent of transport (HTTP JSON, HTTP binary,
// gRPC all produce one).
struct InferRequest {
  std::string id;
  std::vector<Tensor> inputs;
  std::vector<RequestedOutput> outputs;  // requested outputs; empty = all
  Requirements requirements;  // from parameters latency_ms / min_accuracy / max_cost
  std::string app;            // parameters maitre_app (gRPC model-less queries)
  bool binary_outputs = false;  // parameters.binary_data_output: every output binary
  // An offline job's chunk: the app's default latency objective does not
  // apply (only what the job itself asked for).
  bool offline = false;
  // The client's own deadline, on the dispatcher's clock, when the transport
  // carries one (gRPC's): the query's deadline is the earlier of it and the
  // one its objective sets, so no worker computes an answer the client no
  // longer waits for.
  std::optional<Nanos> client_deadline;
};

// What a query's answer carries besides its tensors (docs/api.md, "Open
// Inference Protocol core").
struct InferTimings {
  std::string worker;
  std::string worker_type;
  int64_t queue_us = 0;    // waiting at the worker
  int64_t compute_us = 0;  // the batch's executor time
  int64_t total_us = 0;    // from the front-end receiving it to the answer
  int32_t batch_size = 0;
};

struct InferResponse {
  std::string model_name;
  std::string model_version;  // the variant that served
  std::string id;
  std::vector<Tensor> outputs;
  InferTimings timings;
};

// Parses a request body. `json_length` is the Inference-Header-Content-Length
// of the binary-data extension (the JSON header's size, raw tensor bytes
// following it), or -1 for a plain JSON body. Errors are InvalidArgument
// with a sentence that names the field at fault.
absl::StatusOr<InferRequest> ParseInferRequest(absl::string_view body, int64_t json_length);

// Whether a request parameter named `key` sets one of the query's
// Requirements: latency_ms, min_accuracy or max_cost.
bool IsRequirementParameter(absl::string_view key);

// Sets the requirement `key` names to `value`, which must lie in the range
// Maitre accepts for it (docs/api.md): latency_ms 0.001 to 3.6e6 (an hour),
// min_accuracy 0 to 1, max_cost 0 to 1e9; otherwise InvalidArgument naming
// the parameter and its range. The HTTP and gRPC codecs both read
// requirements through here, so that they accept the same queries.
absl::Status SetRequirement(absl::string_view key, double value, Requirements* requirements);

struct EncodedResponse {
  std::string body;
  int64_t json_length = -1;  // set when binary outputs follow the JSON
};

// Writes a response body: JSON data for each output, or raw bytes after the
// JSON header for outputs the request asked to receive as binary.
EncodedResponse WriteInferResponse(const InferResponse& response,
                                   const std::vector<RequestedOutput>& requested,
                                   bool all_binary);

}  // namespace maitre::controller
