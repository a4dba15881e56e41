// Internal to the HTTP server: turns a request Beast has parsed into the
// http::Request its handlers see. The fuzz target over the server's input
// (fuzz/http_request_fuzzer.cc) feeds Beast's parser the same way and calls
// this too, so that it checks what the server does with hostile bytes. It
// brings Beast's headers with it, so only a .cc file that already uses
// Beast may include it; the public headers of maitre_http stay free of Beast.
//
// Thread-safety: a pure function.
#pragma once

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "http/message.h"

namespace maitre::http::internal {

// The server refuses a request whose head (request line and headers) is
// larger than this with 431.
inline constexpr uint32_t kRequestHeaderLimit = 64 << 10;

// The path percent-decoded (without the query), the raw query, every header
// and the body, which is moved out of `message`. *raw_path receives the path
// as it was on the wire, pointing into `message`: Router::Route splits it
// before decoding. An absolute-form target ("http://host/path", as sent
// through proxies) yields the path after the authority. InvalidArgument
// when the path's percent-encoding is malformed (the server answers 400).
inline absl::StatusOr<Request> FromBeastRequest(
    boost::beast::http::request<boost::beast::http::string_body>& message,
    absl::string_view* raw_path) {
  auto sv = [](boost::beast::string_view s) { return absl::string_view(s.data(), s.size()); };
  absl::string_view target = sv(message.target());
  if (!target.empty() && target[0] != '/') {
    size_t scheme = target.find("://");
    if (scheme != absl::string_view::npos) {
      size_t slash = target.find('/', scheme + 3);
      target = slash == absl::string_view::npos ? "/" : target.substr(slash);
    }
  }
  size_t question = target.find('?');
  *raw_path = target.substr(0, question);

  absl::StatusOr<std::string> path = PercentDecode(*raw_path, /*plus_is_space=*/false);
  if (!path.ok()) return path.status();
  Request request;
  request.method = std::string(sv(message.method_string()));
  request.path = *std::move(path);
  if (question != absl::string_view::npos) request.query = std::string(target.substr(question + 1));
  request.headers.reserve(8);
  for (const auto& field : message) {
    request.headers.push_back(
        {std::string(sv(field.name_string())), std::string(sv(field.value()))});
  }
  request.body = std::move(message.body());
  return request;
}

}  // namespace maitre::http::internal
