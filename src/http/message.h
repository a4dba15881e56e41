// HTTP request and response values shared by maitre_http's server, client
// and router, plus the percent-encoding helpers they use.
//
// Thread-safety: plain values with no internal synchronisation; a const
// object may be read from many threads at once.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/time.h"

namespace maitre::http {

struct Header {
  std::string name;
  std::string value;
};

struct Request {
  std::string method;  // "GET", "POST", ... exactly as sent (methods are case-sensitive)
  std::string path;    // percent-decoded path, without the query
  std::string query;   // raw query string after '?', may be empty
  std::vector<Header> headers;
  std::string body;  // binary-safe
  // When the request's first bytes reached the server's socket (the
  // kernel's receive stamp; when it gave none, when the server read the
  // head), on its ServerOptions::clock (0: not received by a Server). The
  // wait in the socket, reading the body and waiting for the handler all
  // count from here (docs/architecture.md, "How a query travels").
  Nanos arrived = 0;

  // Value of the first header called `name` (compared case-insensitively);
  // "" if there is none.
  absl::string_view GetHeader(absl::string_view name) const;

  // Decoded value of the first `key=value` pair in the query whose decoded
  // key equals `key` ('+' reads as a space, as in HTML forms); "" if absent.
  std::string QueryParam(absl::string_view key) const;
};

struct Response {
  int status = 200;
  // Sent as the Content-Type header unless empty.
  std::string content_type = "application/json";
  // Extra headers. The server writes Content-Length and Connection itself and
  // ignores those names here, except that "Connection: close" makes it close
  // the connection after this response. Headers containing CR or LF are
  // dropped (they would let a value inject headers).
  std::vector<Header> headers;
  std::string body;  // binary-safe

  static Response Json(int status, std::string body);
  // text/plain; charset=utf-8
  static Response Text(int status, std::string body);
  // {"error": "<message>"} with proper JSON escaping (invalid UTF-8 in
  // `message` becomes U+FFFD rather than failing).
  static Response Error(int status, absl::string_view message);

  // Same lookup as Request::GetHeader, over `headers` (the client fills
  // `headers` with every response header except Content-Type).
  absl::string_view GetHeader(absl::string_view name) const;
};

// Decodes %XX escapes (and '+' as a space when `plus_is_space`). A '%' not
// followed by two hex digits is InvalidArgument.
absl::StatusOr<std::string> PercentDecode(absl::string_view in, bool plus_is_space);

// Escapes every byte except the RFC 3986 unreserved ones (A-Z a-z 0-9 - . _ ~),
// so the result is safe as one path segment or one query key or value.
std::string PercentEncode(absl::string_view in);

}  // namespace maitre::http
