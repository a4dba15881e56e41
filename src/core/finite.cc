#include "core/finite.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"

namespace maitre {
namespace {

// The index of the first element of `data` that is NaN or infinite, or -1.
template <typename T>
int64_t FirstNonFinite(const std::string& data, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    T v;  // copied: the bytes may be unaligned
    std::memcpy(&v, data.data() + i * sizeof v, sizeof v);
    if (!std::isfinite(v)) return i;
  }
  return -1;
}

// IEEE half precision: all exponent bits set is an infinity (mantissa 0) or
// a NaN.
int64_t FirstNonFiniteHalf(const std::string& data, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    uint16_t bits;
    std::memcpy(&bits, data.data() + i * sizeof bits, sizeof bits);
    if ((bits & 0x7C00) == 0x7C00) return i;
  }
  return -1;
}

std::string NonFiniteName(DataType dtype, const std::string& data, int64_t i) {
  double v = 0;
  if (dtype == DataType::kFp16) {
    uint16_t bits;
    std::memcpy(&bits, data.data() + i * sizeof bits, sizeof bits);
    if ((bits & 0x03FF) != 0) return "NaN";
    return (bits & 0x8000) != 0 ? "-Inf" : "+Inf";
  }
  if (dtype == DataType::kFp32) {
    float f;
    std::memcpy(&f, data.data() + i * sizeof f, sizeof f);
    v = f;
  } else {
    std::memcpy(&v, data.data() + i * sizeof v, sizeof v);
  }
  if (std::isnan(v)) return "NaN";
  return v < 0 ? "-Inf" : "+Inf";
}

}  // namespace

absl::Status CheckFinite(const Tensor& t) {
  // Reads no further than the bytes there are, whatever the shape says.
  const size_t size = DataTypeSize(t.dtype);
  const int64_t n =
      size == 0 ? 0 : std::min(t.NumElements(), static_cast<int64_t>(t.data.size() / size));
  int64_t bad = -1;
  switch (t.dtype) {
    case DataType::kFp16:
      bad = FirstNonFiniteHalf(t.data, n);
      break;
    case DataType::kFp32:
      bad = FirstNonFinite<float>(t.data, n);
      break;
    case DataType::kFp64:
      bad = FirstNonFinite<double>(t.data, n);
      break;
    default:
      return absl::OkStatus();
  }
  if (bad < 0) return absl::OkStatus();
  const int64_t row_elements =
      t.shape.empty() || t.shape[0] <= 0 ? n : t.NumElements() / t.shape[0];
  return absl::InvalidArgumentError(
      absl::StrCat("element ", bad % row_elements, " of row ", bad / row_elements, " is ",
                   NonFiniteName(t.dtype, t.data, bad), "; inputs must be finite numbers"));
}

}  // namespace maitre
