// Logging goes through spdlog. Debian's absl has its own string_view type
// (not an alias of std::string_view), which fmt cannot print by itself; this
// header teaches it, so Status messages can be logged directly.
#pragma once

#include <spdlog/spdlog.h>

#include "absl/strings/string_view.h"

template <>
struct fmt::formatter<absl::string_view> : fmt::formatter<fmt::string_view> {
  template <typename FormatContext>
  auto format(absl::string_view s, FormatContext& ctx) const {
    return fmt::formatter<fmt::string_view>::format(fmt::string_view(s.data(), s.size()), ctx);
  }
};
