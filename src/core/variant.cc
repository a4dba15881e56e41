#include "core/variant.h"

namespace maitre {

absl::string_view RuntimeName(Runtime runtime) {
  return runtime == Runtime::kOpenCv ? "opencv" : "torch";
}

absl::string_view AccuracySourceName(AccuracySource source) {
  switch (source) {
    case AccuracySource::kMeasured:
      return "measured";
    case AccuracySource::kDeclared:
      return "declared";
    case AccuracySource::kUnknown:
      break;
  }
  return "unknown";
}

std::optional<VariantKey> VariantKey::Parse(absl::string_view text) {
  size_t colon = text.rfind(':');
  if (colon == absl::string_view::npos || colon == 0 || colon + 1 == text.size()) {
    return std::nullopt;
  }
  return VariantKey{std::string(text.substr(0, colon)), std::string(text.substr(colon + 1))};
}

}  // namespace maitre
