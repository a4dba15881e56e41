// Fuzz target: a multipart/form-data upload (ParseMultipart in
// src/http/multipart.h), as POST /v2/apps/{app}/models/{model} receives it.
//
// Input: the Content-Type header's value, a newline, then the body.
// Besides not crashing, every form the parser accepts must survive
// EncodeMultipart and parse back to the same parts, wherever the encoder
// promises that (names, filenames and content types without CR or LF).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "http/multipart.h"

namespace {

bool HasCrOrLf(const std::string& s) { return s.find_first_of("\r\n") != std::string::npos; }

void CheckRoundTrip(const std::vector<maitre::http::Part>& parts) {
  for (const maitre::http::Part& part : parts) {
    if (HasCrOrLf(part.name) || HasCrOrLf(part.filename) || HasCrOrLf(part.content_type)) return;
  }
  std::string content_type;
  std::string body = maitre::http::EncodeMultipart(parts, &content_type);
  absl::StatusOr<std::vector<maitre::http::Part>> again =
      maitre::http::ParseMultipart(content_type, body);
  FUZZ_CHECK(again.ok(), "an encoded form does not parse: %s", again.status().ToString().c_str());
  FUZZ_CHECK(again->size() == parts.size(), "%zu parts read back as %zu", parts.size(),
             again->size());
  for (size_t i = 0; i < parts.size(); ++i) {
    const maitre::http::Part& a = parts[i];
    const maitre::http::Part& b = (*again)[i];
    FUZZ_CHECK(a.name == b.name, "part %zu: name \"%s\" read back as \"%s\"", i, a.name.c_str(),
               b.name.c_str());
    FUZZ_CHECK(a.filename == b.filename, "part %zu: filename \"%s\" read back as \"%s\"", i,
               a.filename.c_str(), b.filename.c_str());
    FUZZ_CHECK(a.content_type == b.content_type, "part %zu: type \"%s\" read back as \"%s\"", i,
               a.content_type.c_str(), b.content_type.c_str());
    FUZZ_CHECK(a.data == b.data, "part %zu: %zu data bytes read back as %zu different ones", i,
               a.data.size(), b.data.size());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view input(reinterpret_cast<const char*>(data), size);
  size_t newline = input.find('\n');
  if (newline == absl::string_view::npos) return 0;
  absl::StatusOr<std::vector<maitre::http::Part>> parts =
      maitre::http::ParseMultipart(input.substr(0, newline), input.substr(newline + 1));
  if (!parts.ok()) {
    maitre::fuzz::CheckClientError(parts.status());
    return 0;
  }
  for (const maitre::http::Part& part : *parts) {
    FUZZ_CHECK(!part.name.empty(), "a part was accepted without a name");
  }
  CheckRoundTrip(*parts);
  return 0;
}
