#include "controller/registry/validation.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"

namespace maitre::registry {
namespace {

constexpr size_t kMaxNameLength = 128;

}  // namespace

absl::Status ValidateName(absl::string_view what, absl::string_view name) {
  if (name.empty()) return absl::InvalidArgumentError(absl::StrCat(what, " must not be empty"));
  if (name.size() > kMaxNameLength) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " is ", name.size(), " characters; the limit is ", kMaxNameLength));
  }
  for (char c : name) {
    bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " \"", name, "\" may only use letters, digits, '.', '_' and '-'"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateFraction(absl::string_view what, double value) {
  if (std::isfinite(value) && value >= 0 && value <= 1) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(what, " must be a fraction in [0,1], got ", value));
}

absl::Status ValidateRequirements(const Requirements& r) {
  if (r.latency_ms && !(std::isfinite(*r.latency_ms) && *r.latency_ms > 0)) {
    return absl::InvalidArgumentError("default latency_ms must be a positive number");
  }
  if (r.min_accuracy)
    MAITRE_RETURN_IF_ERROR(ValidateFraction("default min_accuracy", *r.min_accuracy));
  if (r.max_cost && !(std::isfinite(*r.max_cost) && *r.max_cost >= 0)) {
    return absl::InvalidArgumentError("default max_cost must be a non-negative number");
  }
  return absl::OkStatus();
}

}  // namespace maitre::registry
