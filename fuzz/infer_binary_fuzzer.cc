// Fuzz target: an /infer request in the Open Inference Protocol's binary
// data extension, a JSON header followed by raw tensor bytes
// (ParseInferRequest in src/controller/frontend/infer_codec.h).
//
// Input: the Inference-Header-Content-Length value as text, a newline, then
// the body. The value is read as the HTTP front-end reads the header
// (absl::SimpleAtoi, refused when negative), so inputs whose first line the
// front-end would answer 400 before parsing are skipped.
#include <cstddef>
#include <cstdint>

#include "absl/strings/numbers.h"
#include "controller/frontend/infer_codec.h"
#include "fuzz/fuzz_check.h"
#include "fuzz/infer_round_trip.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view input(reinterpret_cast<const char*>(data), size);
  size_t newline = input.find('\n');
  if (newline == absl::string_view::npos) return 0;
  int64_t json_length = -1;
  if (!absl::SimpleAtoi(input.substr(0, newline), &json_length) || json_length < 0) return 0;
  absl::string_view body = input.substr(newline + 1);

  absl::StatusOr<maitre::controller::InferRequest> request =
      maitre::controller::ParseInferRequest(body, json_length);
  if (!request.ok()) {
    maitre::fuzz::CheckClientError(request.status());
    return 0;
  }
  maitre::fuzz::CheckAcceptedRequest(*request);
  return 0;
}
