// Conversions between the Open Inference Protocol's gRPC messages and the
// transport-independent InferRequest / InferResponse.
//
// Thread-safety: pure functions.
#pragma once

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

}  // namespace maitre::controller
