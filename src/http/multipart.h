// multipart/form-data (RFC 7578) parsing and encoding, used to upload model
// files (POST /v2/apps/{app}/models/{model}: `model` file, optional `valset`
// file, `meta` JSON).
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace maitre::http {

struct Part {
  std::string name;          // the form field name
  std::string filename;      // empty for a plain field
  std::string content_type;  // as sent; empty when the part had no Content-Type
  std::string data;          // binary-safe
};

// Parses a body given the request's Content-Type header ("multipart/form-data;
// boundary=..."). Malformed input is InvalidArgument with a message saying
// what is wrong: not multipart/form-data, no boundary, no opening boundary,
// a part with unterminated headers or no Content-Disposition/name, or no
// closing boundary. A form with no parts is valid and yields an empty vector.
absl::StatusOr<std::vector<Part>> ParseMultipart(absl::string_view content_type_header,
                                                 absl::string_view body);

// Encodes `parts` with a fresh random boundary that occurs in no part, and
// stores the matching Content-Type header value in *content_type_out (if not
// null). '"' and '\' in names are backslash-escaped, CR and LF become %0D
// and %0A (as browsers do), so names and filenames round-trip through
// ParseMultipart except for CR and LF.
std::string EncodeMultipart(const std::vector<Part>& parts, std::string* content_type_out);

// A field by name, or null. Convenience for handlers.
const Part* FindPart(const std::vector<Part>& parts, absl::string_view name);

}  // namespace maitre::http
