// Internal to maitre_http: splits "host:port" as used by ServerOptions and
// ClientOptions. Thread-safe (a pure function).
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace maitre::http::internal {

// "127.0.0.1:8000" -> ("127.0.0.1", "8000"); "[::1]:80" -> ("::1", "80");
// ":8000" -> ("", "8000"). The port must be a number in [0, 65535]; when
// `default_port` is non-empty the ":port" part may be left out.
absl::Status SplitHostPort(absl::string_view address, absl::string_view default_port,
                           std::string* host, std::string* port);

}  // namespace maitre::http::internal
