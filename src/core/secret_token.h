// Secrets that prove who is calling inside a cluster (docs/operations.md,
// "Security"): the join token workers present to their controller, the
// session each joined worker is given, and the call token a worker accepts
// its controller's calls with. Each travels in gRPC metadata as
// "authorization: Bearer <token>".
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace maitre {

inline constexpr char kAuthorizationHeader[] = "authorization";

// `bytes` bytes from the kernel's random source, as lowercase hex.
std::string RandomToken(size_t bytes = 32);

// Compares in time that depends on the lengths only, so that a caller
// cannot learn a token a byte at a time from how long a refusal takes.
bool TokensMatch(absl::string_view presented, absl::string_view expected);

// "Bearer <token>", and back ("" when `value` is not a bearer credential).
std::string BearerValue(absl::string_view token);
absl::string_view BearerToken(absl::string_view value);

// Reads a token from a file (whitespace around it ignored). The file must
// be readable by its owner only: a token others can read is no secret.
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

// Writes `secret` and a newline to a new file `path`, mode 0600;
// AlreadyExists when the file exists (it is never overwritten).
absl::Status CreateSecretFile(const std::string& path, absl::string_view secret);

// The token in `path`, made (mode 0600) when the file does not exist yet.
absl::StatusOr<std::string> ReadOrCreateTokenFile(const std::string& path);

}  // namespace maitre
