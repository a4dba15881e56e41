// Server: an asynchronous HTTP/1.1 server (Boost.Beast over Asio) that hands
// each request to a Router.
//
// No thread is held per request: a few io threads multiplex every
// connection, and a handler may keep its Responder and answer later from any
// thread. Each connection serves its requests strictly in order (the next
// request is read only after the previous response is written), with
// HTTP/1.1 keep-alive. Malformed requests get 400 and the connection is
// closed; bodies over max_body_bytes get 413 (refused from Content-Length,
// before the body is read); handlers that throw get 500.
//
// What one peer can hold is bounded (docs/operations.md, "Connection
// limits"): at most max_connections are open (one more is answered 503 and
// closed at once), a request's header must arrive within header_timeout, and
// a connection that makes no progress is closed after idle_timeout. Every
// descriptor the server opens is close-on-exec, so no child process (a
// worker, a variant generator) inherits the listening socket or a client's
// connection.
//
// Thread-safety: Start(), Stop() and port() may be called from any thread,
// but not from inside a handler (Stop() joins the io threads).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/clock.h"
#include "core/time.h"
#include "http/router.h"

namespace maitre::http {

namespace internal {
struct ServerCore;  // defined in server.cc; keeps Beast/Asio out of this header
}  // namespace internal

struct ServerOptions {
  std::string address =
      "127.0.0.1:8000";              // host:port ("[::1]:8000" for IPv6); port 0 picks a free port
  int threads = 1;                   // io threads
  size_t max_body_bytes = 64 << 20;  // larger bodies -> 413, connection closed
  // A connection that makes no read or write progress while waiting on its
  // peer (an idle keep-alive connection, a stalled upload or download) is
  // closed after idle_timeout (checked by the connection's timer, so up to
  // half a header_timeout or idle_timeout, whichever is shorter, later).
  // Time a request spends in its handler does not count.
  Nanos idle_timeout = 60 * kSecond;
  // A request's header must be complete this long after the connection was
  // accepted (its first request) or after the header's first byte arrived
  // (a later request on a kept-alive connection), or the connection is
  // closed: a peer that trickles a header, or connects and sends nothing,
  // holds its descriptor no longer. Checked by the same timer.
  Nanos header_timeout = 10 * kSecond;
  // Connections open at once, at most. One accepted beyond it is answered
  // 503 and closed at once, so idle or half-open connections cannot use up
  // the process's descriptors. Create() lowers it to half the descriptor
  // limit (RLIMIT_NOFILE), keeping the rest for everything else.
  int max_connections = 4096;
  // Stamps each request's Request::arrived.
  const Clock* clock = SteadyClock::Get();
};

class Server {
 public:
  // Binds and listens (an error if the address is taken or cannot be
  // resolved, or if `router` recorded a bad route). Serves nothing until
  // Start().
  static absl::StatusOr<std::unique_ptr<Server>> Create(ServerOptions options, Router router);

  ~Server();  // calls Stop()
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Returns immediately; io threads run in the background. Idempotent; does
  // nothing after Stop().
  void Start();

  // Stops taking new work, for a graceful shutdown (docs/architecture.md,
  // "Shutting down"): the listener closes, so new connections are refused;
  // connections idle between requests are closed; a request that arrives
  // from now on is answered 503 and its connection closed; every other
  // connection closes once the answer it is waiting for is written. Returns
  // at once: open_connections() falling to 0 says the requests received
  // before it are all answered. Stop() afterwards closes what is left.
  // Idempotent; does nothing before Start() or after Stop().
  void BeginDrain();

  // Stops accepting, closes every connection, and joins the io threads.
  // Requests still waiting for their handler are abandoned: a later answer
  // is dropped. Idempotent.
  void Stop();

  // The bound port (useful with port 0).
  int port() const { return port_; }
  // Connections accepted and not yet closed.
  int open_connections() const;
  // The connection cap in force (ServerOptions::max_connections, or half the
  // descriptor limit if that is lower).
  int max_connections() const;

 private:
  Server(std::shared_ptr<internal::ServerCore> core, int port);

  // Shared with every connection, since a Responder may outlive the Server.
  std::shared_ptr<internal::ServerCore> core_;
  int port_;
  // Serialises Start() and Stop() with each other.
  absl::Mutex lifecycle_mu_;
  bool started_ ABSL_GUARDED_BY(lifecycle_mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(lifecycle_mu_) = false;
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(lifecycle_mu_);
};

}  // namespace maitre::http
