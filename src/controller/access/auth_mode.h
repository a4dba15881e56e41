// Whether a server requires API keys (docs/operations.md, "API keys"):
// "on", "off", or "auto", which requires them as soon as a client-facing
// address (HTTP or gRPC) is not loopback. "off" on such an address is
// refused: anyone who can reach the port would be the server's admin.
//
// Thread-safety: a pure function.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace maitre::controller {

// True for "localhost", 127.0.0.0/8 and ::1, with or without ":port" (and
// IPv6 brackets); false for wildcards (0.0.0.0, ::, "") and anything else.
bool IsLoopbackAddress(absl::string_view address);

// Whether keys are required for `mode` with clients listened for on
// `client_addresses`; InvalidArgument for an unknown mode or "off" on a
// non-loopback address.
absl::StatusOr<bool> KeysRequired(absl::string_view mode,
                                  const std::vector<std::string>& client_addresses);

}  // namespace maitre::controller
