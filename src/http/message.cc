#include "http/message.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"

namespace maitre::http {
namespace {

absl::string_view FindHeader(const std::vector<Header>& headers, absl::string_view name) {
  for (const Header& header : headers) {
    if (absl::EqualsIgnoreCase(header.name, name)) return header.value;
  }
  return {};
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Query strings come from anyone; a stray '%' should not make a parameter
// disappear, so the query decoder keeps undecodable escapes as they are.
std::string LenientQueryDecode(absl::string_view in) {
  absl::StatusOr<std::string> decoded = PercentDecode(in, /*plus_is_space=*/true);
  if (decoded.ok()) return *std::move(decoded);
  std::string out(in);
  for (char& c : out) {
    if (c == '+') c = ' ';
  }
  return out;
}

}  // namespace

absl::string_view Request::GetHeader(absl::string_view name) const {
  return FindHeader(headers, name);
}

std::string Request::QueryParam(absl::string_view key) const {
  for (absl::string_view pair : absl::StrSplit(query, '&')) {
    if (pair.empty()) continue;
    size_t eq = pair.find('=');
    absl::string_view raw_key = pair.substr(0, eq);
    absl::string_view raw_value = eq == absl::string_view::npos ? "" : pair.substr(eq + 1);
    // Most keys need no decoding; compare directly before paying for a copy.
    bool plain_key = raw_key.find_first_of("%+") == absl::string_view::npos;
    if (plain_key ? raw_key == key : LenientQueryDecode(raw_key) == key) {
      return LenientQueryDecode(raw_value);
    }
  }
  return "";
}

Response Response::Json(int status, std::string body) {
  Response response;
  response.status = status;
  response.body = std::move(body);
  return response;
}

Response Response::Text(int status, std::string body) {
  Response response;
  response.status = status;
  response.content_type = "text/plain; charset=utf-8";
  response.body = std::move(body);
  return response;
}

Response Response::Error(int status, absl::string_view message) {
  nlohmann::json json = {{"error", std::string(message)}};
  return Json(status,
              json.dump(-1, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace));
}

absl::string_view Response::GetHeader(absl::string_view name) const {
  return FindHeader(headers, name);
}

absl::StatusOr<std::string> PercentDecode(absl::string_view in, bool plus_is_space) {
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    char c = in[i];
    if (c == '%') {
      int hi = i + 2 < in.size() ? HexValue(in[i + 1]) : -1;
      int lo = i + 2 < in.size() ? HexValue(in[i + 2]) : -1;
      if (hi < 0 || lo < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("malformed percent-encoding at offset ", i, " of \"", in,
                         "\": '%' must be followed by two hex digits"));
      }
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out.push_back(' ');
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string PercentEncode(absl::string_view in) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(in.size());
  for (char c : in) {
    unsigned char u = static_cast<unsigned char>(c);
    bool unreserved = (u >= 'A' && u <= 'Z') || (u >= 'a' && u <= 'z') || (u >= '0' && u <= '9') ||
                      u == '-' || u == '.' || u == '_' || u == '~';
    if (unreserved) {
      out.push_back(c);
    } else {
      out.push_back('%');
      out.push_back(kHex[u >> 4]);
      out.push_back(kHex[u & 15]);
    }
  }
  return out;
}

}  // namespace maitre::http
