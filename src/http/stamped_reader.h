// Reads from a TCP socket and keeps when the kernel received what each read
// returned (SO_TIMESTAMPNS), so that a request's wait in the socket before
// the server read it can be counted: under overload the server's one I/O
// thread falls behind and requests wait in their sockets, where no clock of
// the server's sees them (docs/architecture.md, "Admission and overload").
// A Beast AsyncReadStream: Beast's HTTP reads take it in place of the
// socket. Internal to src/http: only session.h includes it.
#pragma once

#include <sys/socket.h>
#include <sys/uio.h>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/post.hpp>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <utility>

#include "http/server_core.h"

namespace maitre::http::internal {

class StampedReader {
 public:
  using executor_type = tcp::socket::executor_type;

  // Asks the kernel to stamp what `socket` receives; if it will not, reads
  // still work and carry no stamp.
  explicit StampedReader(tcp::socket& socket) : socket_(socket) {
    const int on = 1;
    ::setsockopt(socket_.native_handle(), SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof(on));
  }

  executor_type get_executor() { return socket_.get_executor(); }

  // A request begins: its stamp is that of the read that brings its first
  // bytes, or, when some came already with an earlier read (`buffered`),
  // that read's.
  void BeginRequest(bool buffered) { request_stamp_ = buffered ? last_stamp_ : 0; }

  // The kernel's receive time (CLOCK_REALTIME, ns) of the current request's
  // first bytes (TCP stamps a read with its newest segment's time, so a
  // read that gathers several segments reports the shortest wait); 0 when
  // the kernel gave none.
  Nanos request_stamp() const { return request_stamp_; }

  // Beast's AsyncReadStream: reads what is there now and completes through
  // the handler's executor, as Asio's own socket does; or waits until the
  // socket is readable first.
  template <class MutableBuffers, class Handler>
  void async_read_some(const MutableBuffers& buffers, Handler&& handler) {
    auto executor = asio::get_associated_executor(handler, socket_.get_executor());
    beast::error_code ec;
    const size_t bytes = ReadNow(buffers, ec);
    if (ec != asio::error::would_block) {
      asio::post(executor, [handler = std::forward<Handler>(handler), ec, bytes]() mutable {
        std::move(handler)(ec, bytes);
      });
      return;
    }
    socket_.async_wait(
        tcp::socket::wait_read,
        asio::bind_executor(executor, [this, buffers, handler = std::forward<Handler>(handler)](
                                          beast::error_code ec) mutable {
          size_t bytes = 0;
          if (!ec) bytes = ReadNow(buffers, ec);
          if (ec == asio::error::would_block) {  // woken without data: wait again
            return async_read_some(buffers, std::move(handler));
          }
          std::move(handler)(ec, bytes);
        }));
  }

 private:
  // One recvmsg into `buffers` that does not block; would_block when there
  // is nothing to read, eof when the peer has closed.
  template <class MutableBuffers>
  size_t ReadNow(const MutableBuffers& buffers, beast::error_code& ec) {
    constexpr size_t kMaxPieces = 16;
    iovec pieces[kMaxPieces];
    size_t count = 0;
    for (auto it = asio::buffer_sequence_begin(buffers);
         it != asio::buffer_sequence_end(buffers) && count < kMaxPieces; ++it) {
      const asio::mutable_buffer piece(*it);
      if (piece.size() == 0) continue;
      pieces[count++] = iovec{piece.data(), piece.size()};
    }
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(timespec))];
    msghdr message{};
    message.msg_iov = pieces;
    message.msg_iovlen = count;
    message.msg_control = control;
    message.msg_controllen = sizeof(control);
    ssize_t n;
    do {
      n = ::recvmsg(socket_.native_handle(), &message, MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
      ec = (errno == EAGAIN || errno == EWOULDBLOCK)
               ? beast::error_code(asio::error::would_block)
               : beast::error_code(errno, asio::error::get_system_category());
      return 0;
    }
    if (n == 0 && count > 0) {
      ec = asio::error::eof;
      return 0;
    }
    ec = {};
    // A segment that came before the kernel began stamping carries zero.
    last_stamp_ = 0;
    for (cmsghdr* c = CMSG_FIRSTHDR(&message); c != nullptr; c = CMSG_NXTHDR(&message, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
        timespec stamp;
        std::memcpy(&stamp, CMSG_DATA(c), sizeof(stamp));
        last_stamp_ = stamp.tv_sec * kSecond + stamp.tv_nsec;
      }
    }
    if (request_stamp_ == 0 && n > 0) request_stamp_ = last_stamp_;
    return static_cast<size_t>(n);
  }

  tcp::socket& socket_;
  Nanos last_stamp_ = 0;     // the last read's
  Nanos request_stamp_ = 0;  // the current request's first bytes'
};

// The time `stamp` (a kernel receive time, CLOCK_REALTIME ns; 0: none) was,
// on `clock`, whose reading is `now`: the wait since then, taken from now.
// A stamp from the future (the wall clock stepped back) counts as no wait.
inline Nanos ArrivalOnClock(Nanos stamp, Nanos now) {
  if (stamp == 0) return now;
  timespec wall;
  ::clock_gettime(CLOCK_REALTIME, &wall);
  const Nanos waited = wall.tv_sec * kSecond + wall.tv_nsec - stamp;
  return waited > 0 ? now - waited : now;
}

}  // namespace maitre::http::internal
