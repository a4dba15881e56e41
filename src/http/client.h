// Client: a blocking HTTP/1.1 client over one keep-alive connection, for
// the CLI, the load tool and tests.
//
// It connects on first use and reuses the connection; if the server closed
// it (a "Connection: close" answer, or an idle timeout), the next Send()
// reconnects. A request that fails on a reused connection before any byte of
// the answer arrived is retried once on a fresh connection, because the
// server most likely closed the idle connection before reading it (the same
// rule browsers apply).
//
// Thread-safety: not thread-safe; one request at a time. Use one Client per
// thread for concurrency.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/time.h"
#include "http/message.h"

namespace maitre::http {

struct ClientOptions {
  // "http://host:port", optionally with a path prefix ("http://h:80/api")
  // that is put before every path. "https" is not supported.
  std::string base_url = "http://127.0.0.1:8000";
  // Bounds one whole Send(): connecting, writing the request and reading
  // the response.
  Nanos timeout = 30 * kSecond;
};

class Client {
 public:
  // Checks the URL; does not connect yet.
  static absl::StatusOr<std::unique_ptr<Client>> Create(ClientOptions options);

  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Sends one request and waits for the response. `path_and_query` starts
  // with '/' and must already be percent-encoded where needed (see
  // PercentEncode). Content-Length and Host are set here; Content-Type is
  // application/json when `body` is non-empty and `headers` name none.
  // A non-2xx status is NOT an error; only transport failures are
  // (Unavailable: cannot connect or the connection broke; DeadlineExceeded:
  // the timeout passed; InvalidArgument: a malformed path or header).
  // The response's `headers` hold every header except Content-Type, which
  // goes to `content_type`.
  absl::StatusOr<Response> Send(absl::string_view method, absl::string_view path_and_query,
                                std::string body = "", std::vector<Header> headers = {});

  // How many TCP connections this client has opened (for tests and the load
  // tool: keep-alive working means this stays at 1).
  int64_t connections_opened() const;

 private:
  struct Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace maitre::http
