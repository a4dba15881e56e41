// AppendRequestHead: how Maitre frames an HTTP/1.1 request. Its two
// clients, the blocking http::Client and the load generator's asynchronous
// AsyncHttpClient, differ in everything else (one connection and one request
// at a time, against a pool of connections driven by callbacks) but write
// their requests here, so that they cannot disagree on the wire.
//
// Thread-safety: a pure function.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "http/message.h"

namespace maitre::http {

// Appends to `out` the request line, Host (unless `headers` name one),
// Content-Length: `body_size`, then `headers` without any Content-Length or
// Transfer-Encoding of theirs (the body is always framed by this
// Content-Length), and the blank line. Keep-alive is HTTP/1.1's default, so
// no Connection header is added. `target` is the percent-encoded path and
// query; it and the headers are written as given, so a caller that takes
// them from users checks them first (Client::Send does).
void AppendRequestHead(std::string* out, absl::string_view method, absl::string_view host,
                       absl::string_view target, size_t body_size,
                       const std::vector<Header>& headers);

}  // namespace maitre::http
