#include "core/json_text.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <type_traits>

#include "core/data_type_visit.h"

namespace maitre {

void AppendJsonString(std::string* out, absl::string_view s) {
  out->push_back('"');
  for (char c : s) {
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned char>(c));
          out->append(buf);
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}

namespace {

// Element i of a tensor's bytes; memcpy because the bytes of a string carry
// no alignment promise for wider types.
template <typename T>
T Element(const Tensor& t, int64_t i) {
  T v;
  std::memcpy(&v, t.data.data() + i * sizeof(T), sizeof(T));
  return v;
}

template <typename T>
void AppendValue(std::string* out, T v) {
  char buf[64];
  if constexpr (std::is_floating_point_v<T>) {
    if (!std::isfinite(v)) {
      out->append("null");
      return;
    }
    // The shortest form of a large float can be digits alone, with no point
    // or exponent ("18446744073709551616" for 2^64): readers that hold JSON
    // integers in 64 bits (simdjson, the server's own) refuse such a number,
    // so beyond int64's range a float is written with an exponent.
    if (std::fabs(v) >= 0x1p63) {
      auto result = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
      out->append(buf, result.ptr);
      return;
    }
  }
  auto result = std::to_chars(buf, buf + sizeof buf, v);
  out->append(buf, result.ptr);
}

}  // namespace

bool AppendJsonData(std::string* out, const Tensor& t) {
  return VisitDataType(
      t.dtype,
      [&](auto tag) {
        using T = typename decltype(tag)::type;
        const int64_t n = t.NumElements();
        out->push_back('[');
        for (int64_t i = 0; i < n; ++i) {
          if (i > 0) out->push_back(',');
          if constexpr (std::is_same_v<T, bool>) {
            out->append(Element<uint8_t>(t, i) != 0 ? "true" : "false");
          } else {
            AppendValue(out, Element<T>(t, i));
          }
        }
        out->push_back(']');
        return true;
      },
      [] { return false; });
}

}  // namespace maitre
