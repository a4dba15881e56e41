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
  // closed after between one and two idle_timeouts. Time a request spends
  // in its handler does not count.
  Nanos idle_timeout = 60 * kSecond;
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

  // Stops accepting, closes every connection, and joins the io threads.
  // Requests still waiting for their handler are abandoned: a later answer
  // is dropped. Idempotent.
  void Stop();

  // The bound port (useful with port 0).
  int port() const { return port_; }

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
