// Conversions between the Open Inference Protocol's gRPC messages and the
// transport-independent InferRequest / InferResponse.
//
// Thread-safety: pure functions.
#pragma once

#include <chrono>
#include <optional>

#include "absl/status/statusor.h"
#include "controller/frontend/infer_codec.h"
#include "inference.pb.h"

namespace maitre::controller {

// Reads typed contents or raw_input_contents, checks every size against
// shape × datatype and every typed value against its datatype's range, and
// reads the model-less parameters (maitre_app, and latency_ms, min_accuracy,
// max_cost through SetRequirement, in the ranges the HTTP codec accepts).
// InvalidArgument names the fault.
absl::StatusOr<InferRequest> FromModelInferRequest(const inference::ModelInferRequest& request);

// Writes outputs as raw_output_contents (the form standard clients read)
// and the choice and timings as response parameters.
void ToModelInferResponse(InferResponse&& response, inference::ModelInferResponse* out);

// A call's deadline as gRPC gives it (the client's timeout, counted from
// when gRPC read the call's headers, so it includes any wait before the
// handler), moved onto the dispatcher's clock: `received` read that clock
// when `now` read the system clock. nullopt when the client set none
// (gRPC's infinite deadline).
std::optional<Nanos> ClientDeadline(std::chrono::system_clock::time_point deadline,
                                    std::chrono::system_clock::time_point now, Nanos received);

}  // namespace maitre::controller
