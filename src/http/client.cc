#include "http/client.h"

#include <array>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <limits>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "core/status_macros.h"
#include "http/beast_response.h"
#include "http/host_port.h"
#include "http/request_head.h"

namespace maitre::http {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;

// Characters that would break the request line or let a value smuggle in
// another header.
bool HasControlOrSpace(absl::string_view s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) <= ' ' || c == 0x7f) return true;
  }
  return false;
}

bool HasCrLf(absl::string_view s) { return s.find_first_of("\r\n") != absl::string_view::npos; }

}  // namespace

using Deadline = std::chrono::steady_clock::time_point;

struct Client::Impl {
  ClientOptions options;
  std::string host;
  std::string port;
  std::string prefix;       // path prefix from base_url, without a trailing '/'
  std::string host_header;  // authority as written in base_url
  std::string origin;       // "http://authority", for error messages

  // Sync Asio calls cannot time out, so each Send runs async operations on
  // this private io_context until they finish or the deadline passes.
  // run_until() waits in epoll with a timeout, so no timer is armed per
  // request.
  asio::io_context ioc{1};
  std::optional<tcp::socket> socket;  // declared after ioc: destroyed first
  std::optional<tcp::resolver::results_type> endpoints;
  beast::flat_buffer buffer;
  std::string head;  // reused across requests
  int64_t connections = 0;

  // Runs the started operations. Returns false if the deadline passed first;
  // the connection is then closed and the operations have been cancelled.
  bool RunUntil(Deadline deadline) {
    ioc.restart();
    ioc.run_until(deadline);
    if (ioc.stopped()) return true;  // it ran out of work: all done
    Disconnect();
    ioc.restart();
    ioc.run();  // let the cancelled operations complete
    return false;
  }

  void Disconnect() {
    if (!socket) return;
    beast::error_code ignored;
    socket->shutdown(tcp::socket::shutdown_both, ignored);
    socket->close(ignored);
    buffer.clear();
  }

  absl::Status Connect(Deadline deadline) {
    Disconnect();
    socket.reset();
    beast::error_code ec;
    if (!endpoints) {
      tcp::resolver resolver(ioc);
      auto results = resolver.resolve(host, port, ec);
      if (ec) {
        return absl::UnavailableError(
            absl::StrCat("cannot resolve ", host, " (from ", origin, "): ", ec.message()));
      }
      endpoints = std::move(results);
    }
    socket.emplace(ioc);
    asio::async_connect(*socket, *endpoints,
                        [&ec](beast::error_code result, const tcp::endpoint&) { ec = result; });
    if (!RunUntil(deadline)) {
      socket.reset();
      return absl::DeadlineExceededError(
          absl::StrCat("cannot connect to ", origin, " within ", ToSeconds(options.timeout), " s"));
    }
    if (ec) {
      socket.reset();
      return absl::UnavailableError(absl::StrCat("cannot connect to ", origin, ": ", ec.message()));
    }
    beast::error_code ignored;
    socket->set_option(tcp::no_delay(true), ignored);
    // Beast reads at most the buffer's spare capacity (at least 512 bytes)
    // per system call, and never grows a buffer the parser drains.
    buffer.clear();
    buffer.reserve(64 << 10);
    ++connections;
    return absl::OkStatus();
  }
};

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Client::~Client() {
  if (impl_) impl_->Disconnect();
}

int64_t Client::connections_opened() const { return impl_->connections; }

absl::StatusOr<std::unique_ptr<Client>> Client::Create(ClientOptions options) {
  absl::string_view url = options.base_url;
  if (absl::StartsWithIgnoreCase(url, "https://")) {
    return absl::InvalidArgumentError(
        absl::StrCat("base_url \"", options.base_url, "\": https is not supported; use http://"));
  }
  if (absl::StartsWithIgnoreCase(url, "http://")) url.remove_prefix(7);
  if (options.timeout <= 0) {
    return absl::InvalidArgumentError("ClientOptions.timeout must be positive");
  }
  auto impl = std::make_unique<Impl>();
  size_t slash = url.find('/');
  absl::string_view authority = url.substr(0, slash);
  absl::string_view prefix = slash == absl::string_view::npos ? "" : url.substr(slash);
  while (absl::ConsumeSuffix(&prefix, "/")) {
  }
  absl::Status split = internal::SplitHostPort(authority, "80", &impl->host, &impl->port);
  if (!split.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("base_url \"", options.base_url, "\": ", split.message()));
  }
  if (impl->host.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("base_url \"", options.base_url, "\" names no host"));
  }
  impl->prefix = std::string(prefix);
  impl->host_header = std::string(authority);
  impl->origin = absl::StrCat("http://", authority);
  impl->options = std::move(options);
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

absl::StatusOr<Response> Client::Send(absl::string_view method, absl::string_view path_and_query,
                                      std::string body, std::vector<Header> headers) {
  Impl& impl = *impl_;
  if (method.empty() || HasControlOrSpace(method)) {
    return absl::InvalidArgumentError(absl::StrCat("bad HTTP method \"", method, "\""));
  }
  if (path_and_query.empty() || path_and_query[0] != '/' || HasControlOrSpace(path_and_query)) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad request path \"", path_and_query,
                     "\": it must start with '/' and be percent-encoded (no spaces)"));
  }

  bool has_content_type = false;
  for (const Header& header : headers) {
    if (header.name.empty() || HasControlOrSpace(header.name) || HasCrLf(header.value)) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad request header \"", header.name, "\" (empty, or contains CR/LF)"));
    }
    has_content_type |= absl::EqualsIgnoreCase(header.name, "Content-Type");
  }
  if (!has_content_type && !body.empty()) {
    // First among the caller's headers: where the head has always had it.
    headers.insert(headers.begin(), Header{"Content-Type", "application/json"});
  }
  std::string& head = impl.head;
  head.clear();
  AppendRequestHead(&head, method, impl.host_header, absl::StrCat(impl.prefix, path_and_query),
                    body.size(), headers);
  const std::array<asio::const_buffer, 2> request = {asio::buffer(head), asio::buffer(body)};

  const Deadline deadline =
      std::chrono::steady_clock::now() + std::chrono::nanoseconds(impl.options.timeout);
  for (int attempt = 0;; ++attempt) {
    const bool fresh = !impl.socket || !impl.socket->is_open();
    if (fresh) MAITRE_RETURN_IF_ERROR(impl.Connect(deadline));
    bhttp::response_parser<bhttp::string_body> parser;
    parser.header_limit(1 << 20);
    parser.body_limit(std::numeric_limits<uint64_t>::max());
    beast::error_code read_ec;
    bool read_done = false;
    tcp::socket& socket = *impl.socket;
    asio::async_write(socket, request, [&](beast::error_code write_ec, size_t) {
      read_ec = write_ec;
      // Even after a failed write, a server that refused the request early
      // (413) may have left its answer to read.
      bhttp::async_read(socket, impl.buffer, parser,
                        [&read_ec, &read_done, write_ec](beast::error_code ec, size_t) {
                          if (!ec || !write_ec) read_ec = ec;
                          read_done = true;
                        });
    });
    const bool in_time = impl.RunUntil(deadline);

    if (in_time && read_done && !read_ec) {
      const bool keep_alive = parser.get().keep_alive();
      Response response = internal::FromBeastResponse(parser.release());
      if (!keep_alive) impl.Disconnect();
      return response;
    }

    impl.Disconnect();
    if (!in_time) {
      return absl::DeadlineExceededError(absl::StrCat(method, " ", impl.origin, impl.prefix,
                                                      path_and_query, ": no response within ",
                                                      ToSeconds(impl.options.timeout), " s"));
    }
    if (!fresh && attempt == 0 && !parser.got_some()) {
      continue;  // a stale keep-alive connection: try once more on a new one
    }
    return absl::UnavailableError(absl::StrCat(method, " ", impl.origin, impl.prefix,
                                               path_and_query, " failed: ", read_ec.message()));
  }
}

}  // namespace maitre::http
