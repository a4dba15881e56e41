#include "metrics/text_format.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

namespace maitre::metrics {

void AppendDouble(double value, std::string* out) {
  if (std::isnan(value)) {
    out->append("NaN");
    return;
  }
  if (std::isinf(value)) {
    out->append(value > 0 ? "+Inf" : "-Inf");
    return;
  }
  if (value == 0) {
    out->append(std::signbit(value) ? "-0" : "0");
    return;
  }
  // Shortest round-trip digits come from to_chars in scientific form,
  // "[-]d[.ddd]e±XX"; the layout is then chosen as Go's 'g' does.
  char buf[64];
  auto result = std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::scientific);
  const char* p = buf;
  const char* end = result.ptr;
  bool negative = false;
  if (*p == '-') {
    negative = true;
    ++p;
  }
  std::string digits;
  while (p < end && *p != 'e') {
    if (*p != '.') digits.push_back(*p);
    ++p;
  }
  // Skip 'e'; strtol reads the sign and the exponent digits.
  int exponent = static_cast<int>(std::strtol(std::string(p + 1, end).c_str(), nullptr, 10));
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();

  if (negative) out->push_back('-');
  // Go: "%e is used if the exponent is less than -4 or greater than or equal
  // to the precision; if precision was the shortest possible, use 6".
  if (exponent < -4 || exponent >= 6) {
    out->push_back(digits[0]);
    if (digits.size() > 1) {
      out->push_back('.');
      out->append(digits, 1, std::string::npos);
    }
    out->push_back('e');
    out->push_back(exponent < 0 ? '-' : '+');
    int magnitude = std::abs(exponent);
    if (magnitude < 10) out->push_back('0');
    out->append(std::to_string(magnitude));
    return;
  }
  // Plain notation: the decimal point falls after `point` digits.
  int point = exponent + 1;
  int n = static_cast<int>(digits.size());
  if (point <= 0) {
    out->append("0.");
    out->append(static_cast<size_t>(-point), '0');
    out->append(digits);
  } else if (point >= n) {
    out->append(digits);
    out->append(static_cast<size_t>(point - n), '0');
  } else {
    out->append(digits, 0, static_cast<size_t>(point));
    out->push_back('.');
    out->append(digits, static_cast<size_t>(point), std::string::npos);
  }
}

std::string FormatDouble(double value) {
  std::string out;
  AppendDouble(value, &out);
  return out;
}

void AppendUint(uint64_t value, std::string* out) {
  char buf[24];
  auto result = std::to_chars(buf, buf + sizeof(buf), value);
  out->append(buf, result.ptr);
}

namespace {

// The exposition format escapes backslash and newline everywhere, and the
// double quote only inside a label value (HELP text is not quoted).
void AppendEscaped(absl::string_view text, bool escape_quote, std::string* out) {
  for (char c : text) {
    if (c == '\\') {
      out->append("\\\\");
    } else if (c == '\n') {
      out->append("\\n");
    } else if (c == '"' && escape_quote) {
      out->append("\\\"");
    } else {
      out->push_back(c);
    }
  }
}

}  // namespace

void AppendEscapedLabelValue(absl::string_view value, std::string* out) {
  AppendEscaped(value, /*escape_quote=*/true, out);
}

void AppendEscapedHelp(absl::string_view help, std::string* out) {
  AppendEscaped(help, /*escape_quote=*/false, out);
}

namespace {

// Length of the well-formed UTF-8 sequence starting at s[i], or 0 if the
// bytes there are not one (RFC 3629: no overlong forms, no surrogates,
// nothing above U+10FFFF).
size_t Utf8SequenceLength(absl::string_view s, size_t i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char b0 = byte(i);
  if (b0 < 0x80) return 1;
  size_t length;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    length = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    length = 3;
    if (b0 == 0xE0) lo = 0xA0;  // overlong
    if (b0 == 0xED) hi = 0x9F;  // UTF-16 surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    length = 4;
    if (b0 == 0xF0) lo = 0x90;  // overlong
    if (b0 == 0xF4) hi = 0x8F;  // above U+10FFFF
  } else {
    return 0;
  }
  if (i + length > s.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (size_t k = 2; k < length; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF) return 0;
  }
  return length;
}

}  // namespace

std::string SanitizeUtf8(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    size_t length = Utf8SequenceLength(text, i);
    if (length == 0) {
      out.append("\xEF\xBF\xBD");  // U+FFFD REPLACEMENT CHARACTER
      ++i;
    } else {
      out.append(text.data() + i, length);
      i += length;
    }
  }
  return out;
}

void AppendSample(absl::string_view name, absl::string_view suffix,
                  const std::vector<std::string>& label_names,
                  const std::vector<std::string>& label_values, absl::string_view extra_name,
                  absl::string_view extra_value, absl::string_view value, std::string* out) {
  out->append(name.data(), name.size());
  out->append(suffix.data(), suffix.size());
  bool any = !label_names.empty() || !extra_name.empty();
  if (any) {
    out->push_back('{');
    bool first = true;
    auto label = [&](absl::string_view label_name, absl::string_view label_value) {
      if (!first) out->push_back(',');
      first = false;
      out->append(label_name.data(), label_name.size());
      out->append("=\"");
      AppendEscapedLabelValue(label_value, out);
      out->push_back('"');
    };
    for (size_t i = 0; i < label_names.size(); ++i) label(label_names[i], label_values[i]);
    if (!extra_name.empty()) label(extra_name, extra_value);
    out->push_back('}');
  }
  out->push_back(' ');
  out->append(value.data(), value.size());
  out->push_back('\n');
}

}  // namespace maitre::metrics
