// AsyncHttpClient: an asynchronous HTTP/1.1 client (Boost.Beast over Asio)
// for the open-loop load generator, where many requests are in flight at
// once and sending must never wait on an answer.
//
// Requests arrive fully serialised (see SerializeHttpRequest), so a send is
// one write of bytes built ahead of time. The client keeps a pool of
// keep-alive connections per io thread and grows it as needed: a request
// takes an idle connection, or opens a new one while fewer than
// max_connections are open, or else waits its turn in a FIFO queue. One
// connection carries one request at a time, because Maitre's server answers
// a connection's requests strictly in order (pipelining would queue a fast
// request behind a slow one and hide the server's concurrency).
//
// Each io thread owns its pool outright (requests are spread round-robin),
// so the hot path takes no lock.
//
// Thread-safety: Send() and connections_opened() may be called from any
// thread, including from inside a completion callback. Shutdown() (and the
// destructor) must not be called from a callback.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/clock.h"
#include "core/time.h"
#include "http/message.h"

namespace maitre::loadgen {

struct AsyncHttpClientOptions {
  // "host:port" of the server (a URL's authority, without "http://").
  std::string address = "127.0.0.1:8000";
  // Each io thread has its own connections. One is plenty below ~20k
  // requests/s of small bodies.
  int io_threads = 1;
  // Open connections across all io threads, at most. Past it, requests
  // queue on the client (and their wait shows as client lag).
  int max_connections = 1024;
  // From the moment the request is written until its answer is read.
  Nanos timeout = 30 * kSecond;
  // Stamps sent_at and done_at; null means SteadyClock.
  const Clock* clock = nullptr;
};

struct AsyncHttpResult {
  // OK when an HTTP answer arrived (whatever its status); Unavailable when
  // the connection could not be made or broke; DeadlineExceeded on timeout.
  absl::Status transport;
  http::Response response;  // valid when transport is OK
  Nanos sent_at = 0;        // when the request's first byte was handed to the socket
  Nanos done_at = 0;        // when the answer was read in full, or the failure seen
};

// Called exactly once per request, on an io thread, unless the client is
// shut down first. It should be quick: it delays other answers on the same
// io thread.
using AsyncHttpCallback = std::function<void(AsyncHttpResult)>;

class AsyncHttpClient {
 public:
  // Resolves the address and starts the io threads; connects lazily.
  static absl::StatusOr<std::unique_ptr<AsyncHttpClient>> Create(AsyncHttpClientOptions options);

  ~AsyncHttpClient();  // calls Shutdown()
  AsyncHttpClient(const AsyncHttpClient&) = delete;
  AsyncHttpClient& operator=(const AsyncHttpClient&) = delete;

  // Queues one request and returns at once. `wire` holds the whole request
  // (head and body) and is shared, never copied: the same bytes may be in
  // flight on many connections.
  void Send(std::shared_ptr<const std::string> wire, AsyncHttpCallback done);

  // Closes every connection and joins the io threads. Requests still in
  // flight or queued are abandoned: their callbacks are destroyed without
  // being called. Idempotent.
  void Shutdown();

  // TCP connections opened so far (keep-alive working: it stops growing once
  // the pool covers the load).
  int64_t connections_opened() const;

 private:
  struct Impl;
  explicit AsyncHttpClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace maitre::loadgen
