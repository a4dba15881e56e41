// Fuzz target: the bytes a client sends the HTTP server. They go through
// what the server's connections do with them (src/http/server.cc): Beast's
// request parser with the server's header limit, FromBeastRequest
// (src/http/beast_request.h: target splitting, path percent-decoding,
// headers), then the Router (src/http/router.h) with routes shaped like the
// front-end's, whose handlers read path parameters, query parameters and
// headers. Requests follow one another on the connection while each keeps
// it alive, as the server reads them.
//
// Every request must be answered exactly once, with 200 from a handler or
// the router's own 400, 404 or 405 (the latter with an Allow header).
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "fuzz/fuzz_check.h"
#include "http/beast_request.h"
#include "http/router.h"

namespace {

namespace bhttp = boost::beast::http;
using maitre::http::PathParams;
using maitre::http::Request;
using maitre::http::Responder;
using maitre::http::Response;
using maitre::http::Router;

// Small against the server's 64 MiB default: the fuzzer's inputs are
// smaller still, and a Content-Length past it takes the same path.
constexpr uint64_t kBodyLimit = 1 << 20;

// Answers with what a front-end handler would read from the request, so
// that all of it is computed.
void Echo(Request&& request, const PathParams& params, Responder respond) {
  std::string body;
  for (const auto& [name, value] : params) absl::StrAppend(&body, name, "=", value, "\n");
  for (const char* key : {"wait", "format", "app"}) {
    absl::StrAppend(&body, key, "=", request.QueryParam(key), "\n");
  }
  for (const char* header : {"Content-Type", "Inference-Header-Content-Length", "Host"}) {
    absl::StrAppend(&body, header, ": ", request.GetHeader(header), "\n");
  }
  absl::StrAppend(&body, request.body.size(), " body bytes\n");
  std::move(respond)(Response::Text(200, std::move(body)));
}

const Router& FrontEndRoutes() {
  static const Router* router = [] {
    auto* r = new Router;
    for (const char* path :
         {"/v2", "/v2/health/live", "/v2/health/ready", "/v2/apps", "/v2/apps/{app}",
          "/v2/models/{model}", "/v2/models/{model}/versions/{version}/ready", "/v2/jobs/{id}",
          "/metrics", "/v2/files/{path...}"}) {
      r->Add("GET", path, Echo);
    }
    for (const char* path :
         {"/v2/apps/{app}/infer", "/v2/apps/{app}/models/{model}", "/v2/models/{model}/infer",
          "/v2/repository/index", "/v2/models/{model}/versions/{version}/infer", "/v2/jobs"}) {
      r->Add("POST", path, Echo);
    }
    r->Add("PUT", "/v2/apps/{app}", Echo);
    FUZZ_CHECK(r->status().ok(), "%s", r->status().ToString().c_str());
    return r;
  }();
  return *router;
}

// Offers `bytes` to the parser as a connection that then closes would.
// Returns how many bytes the request took.
size_t Feed(bhttp::request_parser<bhttp::string_body>& parser, absl::string_view bytes,
            boost::beast::error_code& ec) {
  size_t used = 0;
  while (!parser.is_done()) {
    size_t n = parser.put(boost::asio::const_buffer(bytes.data() + used, bytes.size() - used), ec);
    used += n;
    if (ec == bhttp::error::need_more || (!ec && n == 0)) {
      // All there is has been offered: the peer closed.
      ec = {};
      parser.put_eof(ec);
      break;
    }
    if (ec) break;
  }
  return used;
}

void Answer(Request&& request, absl::string_view raw_path) {
  int answers = 0;
  Response answer;
  FrontEndRoutes().Route(std::move(request), Responder::FromCallback([&](Response response) {
                           ++answers;
                           answer = std::move(response);
                         }),
                         raw_path);
  FUZZ_CHECK(answers == 1, "the request was answered %d times", answers);
  const int s = answer.status;
  FUZZ_CHECK(s == 200 || s == 400 || s == 404 || s == 405, "answered %d: %s", s,
             answer.body.c_str());
  FUZZ_CHECK(s != 405 || !answer.GetHeader("Allow").empty(), "a 405 without Allow");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view rest(reinterpret_cast<const char*>(data), size);
  while (!rest.empty()) {
    bhttp::request_parser<bhttp::string_body> parser;
    parser.header_limit(maitre::http::internal::kRequestHeaderLimit);
    parser.body_limit(kBodyLimit);
    parser.eager(true);
    boost::beast::error_code ec;
    size_t used = Feed(parser, rest, ec);
    // The server answers a parse error from the error code alone (400, 413
    // or 431) and closes the connection.
    if (ec || !parser.is_done()) return 0;
    FUZZ_CHECK(used > 0 && used <= rest.size(), "the parser took %zu of %zu bytes", used,
               rest.size());

    auto& message = parser.get();
    const bool keep_alive = message.keep_alive();
    absl::string_view raw_path;
    absl::StatusOr<Request> request = maitre::http::internal::FromBeastRequest(message, &raw_path);
    if (request.ok()) {
      Answer(*std::move(request), raw_path);
    } else {
      maitre::fuzz::CheckClientError(request.status());
    }
    if (!keep_alive) return 0;
    rest.remove_prefix(used);
  }
  return 0;
}
