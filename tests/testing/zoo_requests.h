// Requests and files built from the zoo's validation set, for the
// end-to-end tests.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "core/valset.h"
#include "nlohmann/json.hpp"

namespace maitre::testing {

// A v2 JSON request holding validation image `row`, with `parameters`
// (none when null).
std::string ImageRequest(const Valset& valset, int64_t row, const nlohmann::json& parameters);

// A v2 JSON request holding validation images [first, first + rows) as one
// input named `input_name`, with `parameters` (none when null).
std::string ImagesRequest(const Valset& valset, int64_t first, int64_t rows,
                          const std::string& input_name, const nlohmann::json& parameters);

// The first `rows` images and labels of `valset`, as a validation-set file
// at `path`; the valset itself is returned through `slice` when not null.
absl::Status WriteValsetSlice(const Valset& valset, int64_t rows, const std::string& path,
                              Valset* slice = nullptr);

}  // namespace maitre::testing
