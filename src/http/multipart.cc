#include "http/multipart.h"

#include <algorithm>
#include <functional>
#include <random>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace maitre::http {
namespace {

using Params = std::vector<std::pair<std::string, std::string>>;

bool IsSpace(char c) { return c == ' ' || c == '\t'; }

// Parses a header value of the form
//   token *( ";" name "=" ( token / quoted-string ) )
// as Content-Type and Content-Disposition use it. Parameter names are
// lower-cased; quoted values are unescaped.
absl::Status ParseParams(absl::string_view value, absl::string_view what, std::string* first,
                         Params* params) {
  size_t i = 0;
  const size_t n = value.size();
  auto skip_space = [&] {
    while (i < n && IsSpace(value[i])) ++i;
  };
  size_t semicolon = value.find(';');
  *first = std::string(absl::StripAsciiWhitespace(value.substr(0, semicolon)));
  i = semicolon == absl::string_view::npos ? n : semicolon;
  while (i < n) {
    ++i;  // the ';'
    skip_space();
    if (i == n) break;  // a trailing ';'
    size_t name_end = value.find_first_of("=;", i);
    if (name_end == absl::string_view::npos) name_end = n;
    std::string name =
        absl::AsciiStrToLower(absl::StripAsciiWhitespace(value.substr(i, name_end - i)));
    i = name_end;
    std::string param_value;
    if (i < n && value[i] == '=') {
      ++i;
      skip_space();
      if (i < n && value[i] == '"') {
        ++i;
        bool closed = false;
        while (i < n) {
          char c = value[i];
          if (c == '"') {
            closed = true;
            ++i;
            break;
          }
          if (c == '\\' && i + 1 < n) {
            param_value.push_back(value[i + 1]);
            i += 2;
          } else {
            param_value.push_back(c);
            ++i;
          }
        }
        if (!closed) {
          return absl::InvalidArgumentError(
              absl::StrCat(what, " has an unterminated quoted value for \"", name, "\": ", value));
        }
      } else {
        size_t end = value.find(';', i);
        if (end == absl::string_view::npos) end = n;
        param_value = std::string(absl::StripAsciiWhitespace(value.substr(i, end - i)));
        i = end;
      }
    }
    skip_space();
    if (i < n && value[i] != ';') {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " has unexpected text after parameter \"", name, "\": ", value));
    }
    if (!name.empty()) params->emplace_back(std::move(name), std::move(param_value));
  }
  return absl::OkStatus();
}

const std::string* FindParam(const Params& params, absl::string_view name) {
  for (const auto& [key, value] : params) {
    if (key == name) return &value;
  }
  return nullptr;
}

std::string Describe(size_t index) { return absl::StrCat("multipart part ", index + 1); }

// Parses one part's header block (without its final empty line).
absl::Status ParsePartHeaders(absl::string_view block, size_t index, Part* part) {
  bool has_disposition = false;
  for (absl::string_view line : absl::StrSplit(block, "\r\n")) {
    if (line.empty()) continue;
    size_t colon = line.find(':');
    if (colon == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat(Describe(index), " has a header line without ':': \"", line, "\""));
    }
    absl::string_view name = absl::StripAsciiWhitespace(line.substr(0, colon));
    absl::string_view value = absl::StripAsciiWhitespace(line.substr(colon + 1));
    if (absl::EqualsIgnoreCase(name, "Content-Type")) {
      part->content_type = std::string(value);
    } else if (absl::EqualsIgnoreCase(name, "Content-Disposition")) {
      std::string type;
      Params params;
      absl::Status status = ParseParams(
          value, absl::StrCat(Describe(index), "'s Content-Disposition"), &type, &params);
      if (!status.ok()) return status;
      if (!absl::EqualsIgnoreCase(type, "form-data")) {
        return absl::InvalidArgumentError(absl::StrCat(
            Describe(index), "'s Content-Disposition is \"", type, "\", not form-data"));
      }
      const std::string* field_name = FindParam(params, "name");
      if (field_name == nullptr || field_name->empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat(Describe(index), "'s Content-Disposition has no name"));
      }
      part->name = *field_name;
      if (const std::string* filename = FindParam(params, "filename")) part->filename = *filename;
      has_disposition = true;
    }
  }
  if (!has_disposition) {
    return absl::InvalidArgumentError(
        absl::StrCat(Describe(index), " has no Content-Disposition header"));
  }
  return absl::OkStatus();
}

// Backslash-escapes a value for a quoted-string; CR and LF cannot be
// escaped that way, so they are percent-encoded, as browsers do.
std::string QuoteValue(absl::string_view value) {
  std::string out = "\"";
  for (char c : value) {
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (c == '\r') {
      out.append("%0D");
    } else if (c == '\n') {
      out.append("%0A");
    } else {
      out.push_back(c);
    }
  }
  out.push_back('"');
  return out;
}

std::string RandomBoundary() {
  static constexpr char kAlphabet[] =
      "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_int_distribution<size_t> pick(0, sizeof(kAlphabet) - 2);
  std::string boundary = "maitre-";
  for (int i = 0; i < 32; ++i) boundary.push_back(kAlphabet[pick(rng)]);
  return boundary;
}

}  // namespace

absl::StatusOr<std::vector<Part>> ParseMultipart(absl::string_view content_type_header,
                                                 absl::string_view body) {
  std::string media_type;
  Params params;
  absl::Status status = ParseParams(content_type_header, "Content-Type", &media_type, &params);
  if (!status.ok()) return status;
  if (!absl::EqualsIgnoreCase(media_type, "multipart/form-data")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expected a multipart/form-data body, but Content-Type is \"", content_type_header, "\""));
  }
  const std::string* boundary = FindParam(params, "boundary");
  if (boundary == nullptr || boundary->empty()) {
    return absl::InvalidArgumentError(
        "multipart/form-data Content-Type has no boundary parameter (expected "
        "\"multipart/form-data; boundary=...\")");
  }
  if (boundary->size() > 200) {
    return absl::InvalidArgumentError("multipart boundary is longer than 200 characters");
  }

  // A delimiter is CRLF "--" boundary; the first may start the body.
  const std::string delimiter = absl::StrCat("\r\n--", *boundary);
  const absl::string_view dash_boundary = absl::string_view(delimiter).substr(2);
  const std::boyer_moore_horspool_searcher searcher(delimiter.begin(), delimiter.end());
  auto find_delimiter = [&](size_t from) -> size_t {
    const char* found = std::search(body.data() + from, body.data() + body.size(), searcher);
    return found == body.data() + body.size() ? absl::string_view::npos
                                              : static_cast<size_t>(found - body.data());
  };

  size_t pos;
  if (absl::StartsWith(body, dash_boundary)) {
    pos = dash_boundary.size();
  } else {
    size_t found = find_delimiter(0);
    if (found == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("multipart body does not contain its boundary \"--", *boundary, "\""));
    }
    pos = found + delimiter.size();
  }

  std::vector<Part> parts;
  for (;;) {
    // After a delimiter: "--" closes the body; otherwise optional padding and
    // CRLF start the next part.
    absl::string_view rest = body.substr(pos);
    if (absl::StartsWith(rest, "--")) return parts;
    size_t padding = 0;
    while (padding < rest.size() && IsSpace(rest[padding])) ++padding;
    if (!absl::StartsWith(rest.substr(padding), "\r\n")) {
      return absl::InvalidArgumentError(
          absl::StrCat("multipart body is unterminated or malformed after boundary ",
                       parts.size() + 1, ": expected CRLF or the closing \"--\""));
    }
    pos += padding + 2;

    const size_t index = parts.size();
    size_t headers_end;
    size_t data_start;
    if (absl::StartsWith(body.substr(pos), "\r\n")) {
      headers_end = pos;  // no headers at all
      data_start = pos + 2;
    } else {
      headers_end = body.find("\r\n\r\n", pos);
      if (headers_end == absl::string_view::npos) {
        return absl::InvalidArgumentError(
            absl::StrCat(Describe(index), " has unterminated headers (no empty line)"));
      }
      data_start = headers_end + 4;
    }
    Part part;
    status = ParsePartHeaders(body.substr(pos, headers_end - pos), index, &part);
    if (!status.ok()) return status;

    size_t data_end = find_delimiter(data_start);
    if (data_end == absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("multipart body is unterminated: no boundary after ", Describe(index),
                       " (\"", part.name, "\")"));
    }
    part.data = std::string(body.substr(data_start, data_end - data_start));
    parts.push_back(std::move(part));
    pos = data_end + delimiter.size();
  }
}

std::string EncodeMultipart(const std::vector<Part>& parts, std::string* content_type_out) {
  std::string boundary;
  bool clash = true;
  while (clash) {
    boundary = RandomBoundary();
    clash = false;
    for (const Part& part : parts) {
      if (absl::StrContains(part.data, boundary)) clash = true;
    }
  }
  size_t size = 0;
  for (const Part& part : parts) size += part.data.size() + part.name.size() + 128;
  std::string out;
  out.reserve(size + boundary.size() * (parts.size() + 1) + 8);
  for (const Part& part : parts) {
    absl::StrAppend(&out, "--", boundary,
                    "\r\nContent-Disposition: form-data; name=", QuoteValue(part.name));
    if (!part.filename.empty()) absl::StrAppend(&out, "; filename=", QuoteValue(part.filename));
    out.append("\r\n");
    if (!part.content_type.empty()) {
      std::string type = part.content_type;
      for (char& c : type) {
        if (c == '\r' || c == '\n') c = ' ';
      }
      absl::StrAppend(&out, "Content-Type: ", type, "\r\n");
    }
    absl::StrAppend(&out, "\r\n", part.data, "\r\n");
  }
  absl::StrAppend(&out, "--", boundary, "--\r\n");
  if (content_type_out != nullptr) {
    *content_type_out = absl::StrCat("multipart/form-data; boundary=", boundary);
  }
  return out;
}

const Part* FindPart(const std::vector<Part>& parts, absl::string_view name) {
  for (const Part& part : parts) {
    if (part.name == name) return &part;
  }
  return nullptr;
}

}  // namespace maitre::http
