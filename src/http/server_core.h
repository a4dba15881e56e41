// The state an HTTP server shares with its connections (server.h): the
// io_context, the listener and its strand, the connection count and cap, and
// the draining and stopped flags; and the constants and helpers both use.
// Internal to src/http: only server.cc includes it (through session.h), so
// Boost.Asio and Beast stay out of server.h.
#pragma once

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "core/time.h"
#include "http/message.h"
#include "http/router.h"
#include "http/server.h"

namespace maitre::http::internal {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using Strand = asio::strand<asio::io_context::executor_type>;


// Beast reads at most the buffer's spare capacity (but at least 512 bytes)
// per system call and never grows a buffer that the parser drains, so the
// initial capacity sets the read size: 64 KiB reads an 8 KB inference
// request in one call instead of sixteen.
inline constexpr size_t kReadBufferBytes = 64 << 10;
// After an error response sent before the request was fully read (413, 400),
// the server discards up to this much of what the client is still sending
// before closing: closing a socket with unread input makes the kernel send a reset,
// which can destroy the error response before the client reads it.
inline constexpr size_t kDrainLimit = 8 << 20;
inline constexpr Nanos kAcceptRetryDelay = 10 * kMillisecond;
// Connections accepted per wake-up of the listener, so that a flood of them
// does not hold the accepting thread from the requests of others.
inline constexpr int kAcceptBatch = 64;
inline constexpr absl::string_view kDrainingMessage =
    "the server is shutting down and takes no new requests; send this one to another server";
inline constexpr absl::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

inline std::chrono::nanoseconds Chrono(Nanos ns) { return std::chrono::nanoseconds(ns); }

inline absl::string_view Sv(beast::string_view s) { return absl::string_view(s.data(), s.size()); }

// Serialises the status line and headers of `response` into *out (reusing its
// capacity). Returns whether the connection closes after this response.
bool FormatHead(const Response& response, bool close, bool http10, std::string* out);

// The connection cap in force: what the options ask for, but at most half
// the process's descriptor limit.
int ConnectionCap(int wanted);

class Session;

// State shared by the Server and its connections. Connections hold it by
// shared_ptr so that the io_context outlives every socket, even a socket
// kept alive by a Responder after the Server is gone.
struct ServerCore : std::enable_shared_from_this<ServerCore> {
  ServerCore(ServerOptions options_in, Router router_in)
      : options(std::move(options_in)),
        router(std::move(router_in)),
        max_connections(ConnectionCap(options.max_connections)),
        tick(std::max<Nanos>(kMillisecond,
                             std::min(options.idle_timeout, options.header_timeout) / 2)),
        ioc(options.threads),
        accept_strand(asio::make_strand(ioc)),
        acceptor(accept_strand),
        accept_retry(accept_strand) {
    Response refusal =
        Response::Error(503, absl::StrCat("the server has its limit of ", max_connections,
                                          " open connections; retry shortly"));
    FormatHead(refusal, /*close=*/true, /*http10=*/false, &over_cap_answer);
    over_cap_answer.append(refusal.body);
  }

  // Waits for the listener to have connections to accept.
  void Accept();
  void OnListenerReady(beast::error_code ec);
  void RetryAcceptLater();
  // Makes a connection of an accepted descriptor, or refuses it.
  void Admit(int fd);
  // Closes the listener on its strand: nothing is accepted after.
  void CloseListener();
  // Runs `action` on each connection still alive, on the connection's strand.
  void PostToEachSession(void (Session::*action)()) ABSL_LOCKS_EXCLUDED(mu);

  const ServerOptions options;
  const Router router;
  const int max_connections;
  // How often each connection's timer checks it for the idle and header
  // timeouts.
  const Nanos tick;
  // The whole answer to a connection over the cap.
  std::string over_cap_answer;
  asio::io_context ioc;
  Strand accept_strand;
  tcp::acceptor acceptor;           // used on accept_strand only
  tcp protocol = tcp::v4();         // the listener's (set before Start)
  asio::steady_timer accept_retry;  // used on accept_strand only
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  // Set by BeginDrain(); read on every request.
  std::atomic<bool> draining{false};

  absl::Mutex mu;
  // Once set, nothing new is posted to the io_context, so the io threads can
  // drain it and exit.
  bool stopped ABSL_GUARDED_BY(mu) = false;
  // Connections admitted and not yet closed (each holds a descriptor).
  int open ABSL_GUARDED_BY(mu) = 0;
  std::unordered_map<Session*, std::weak_ptr<Session>> sessions ABSL_GUARDED_BY(mu);
};

}  // namespace maitre::http::internal
