// Writing JSON text by hand on hot paths (request and response bodies),
// where building a DOM would cost more than the work itself.
//
// Thread-safety: pure functions.
#pragma once

#include <string>

#include "absl/strings/string_view.h"
#include "core/tensor.h"

namespace maitre {

// Appends `s` as a quoted JSON string, escaping quotes, backslashes and
// control characters (names are user-chosen).
void AppendJsonString(std::string* out, absl::string_view s);

// Appends the elements of `t` as one flat JSON array, as the Open Inference
// Protocol's "data" holds them: numbers in their shortest exact form, BOOL as
// true/false, and a non-finite float as null (JSON has no NaN or infinity).
// The controller's responses, the load generator's requests and the CLI's
// `infer` all write through here, so the two sides of the protocol cannot
// drift apart.
// Returns false, appending nothing, for a datatype with no JSON form (FP16,
// BYTES, INVALID); the caller decides what that means for it. `t` must be
// valid (Tensor::Validate).
bool AppendJsonData(std::string* out, const Tensor& t);

}  // namespace maitre
