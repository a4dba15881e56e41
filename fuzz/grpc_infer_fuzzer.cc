// Fuzz target: a gRPC ModelInfer request. gRPC hands the server a parsed
// inference.ModelInferRequest; the input is its protobuf bytes, and
// whatever protobuf parses goes to FromModelInferRequest
// (src/controller/frontend/grpc_codec.h).
//
// A request the gRPC codec accepts must be one the HTTP codec accepts too,
// with the same tensors and requirements (both serve one protocol): it is
// re-encoded by the load generator and parsed by ParseInferRequest.
#include <google/protobuf/stubs/logging.h>

#include <cstddef>
#include <cstdint>

#include "controller/frontend/grpc_codec.h"
#include "fuzz/fuzz_check.h"
#include "fuzz/infer_round_trip.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Protobuf logs every string field that is not UTF-8; gRPC refuses those
  // messages before the codec sees them, and the log would drown the run.
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  inference::ModelInferRequest message;
  if (!message.ParseFromArray(data, static_cast<int>(size))) return 0;
  absl::StatusOr<maitre::controller::InferRequest> request =
      maitre::controller::FromModelInferRequest(message);
  if (!request.ok()) {
    maitre::fuzz::CheckClientError(request.status());
    return 0;
  }
  maitre::fuzz::CheckAcceptedRequest(*request);
  return 0;
}
