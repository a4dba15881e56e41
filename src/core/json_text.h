// Writing JSON text by hand on hot paths (request and response bodies),
// where building a DOM would cost more than the work itself.
//
// Thread-safety: pure functions.
#pragma once

#include <string>

#include "absl/strings/string_view.h"

namespace maitre {

// Appends `s` as a quoted JSON string, escaping quotes, backslashes and
// control characters (names are user-chosen).
void AppendJsonString(std::string* out, absl::string_view s);

}  // namespace maitre
