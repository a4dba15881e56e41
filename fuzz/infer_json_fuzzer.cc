// Fuzz target: the body of an Open Inference Protocol /infer request sent as
// plain JSON (no Inference-Header-Content-Length), as the HTTP front-end
// hands it to ParseInferRequest (src/controller/frontend/infer_codec.h).
#include <cstddef>
#include <cstdint>

#include "controller/frontend/infer_codec.h"
#include "fuzz/fuzz_check.h"
#include "fuzz/infer_round_trip.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view body(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<maitre::controller::InferRequest> request =
      maitre::controller::ParseInferRequest(body, /*json_length=*/-1);
  if (!request.ok()) {
    maitre::fuzz::CheckClientError(request.status());
    return 0;
  }
  maitre::fuzz::CheckAcceptedRequest(*request);
  return 0;
}
