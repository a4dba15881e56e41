// One HTTP connection of the server (server.h): reading a request's header
// and body under the idle and header timeouts, handing it to the router,
// writing the answer (directly from the answering thread when the
// connection waits for it), keep-alive, refusals and draining. Internal to
// src/http: only server.cc includes it.
#pragma once

#include <array>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <exception>
#include <sys/socket.h>
#include <sys/uio.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "core/clock.h"
#include "http/beast_request.h"
#include "http/responder.h"
#include "http/server_core.h"
#include "http/stamped_reader.h"

namespace maitre::http::internal {

// One connection. Everything but Deliver() runs on the connection's strand.
//
// Timeouts are found by a coarse timer rather than a deadline per
// operation: re-arming a deadline costs a timerfd system call on every read
// and write, which is a measurable share of a ~40 us round trip. The timer
// fires every ServerCore::tick and closes the connection when no I/O has
// completed for idle_timeout while it waited on the peer (time spent in the
// handler never counts), or when the request header it is reading has taken
// header_timeout.
class Session final : public ResponseSink, public std::enable_shared_from_this<Session> {
 public:
  Session(std::shared_ptr<ServerCore> core, tcp::socket socket, Strand strand)
      : core_(std::move(core)),
        strand_(std::move(strand)),
        socket_(std::move(socket)),
        reader_(socket_),
        timer_(strand_) {}

  ~Session() override {
    absl::MutexLock lock(&core_->mu);
    core_->sessions.erase(this);
    if (holds_slot_) --core_->open;
  }

  const Strand& strand() const { return strand_; }

  // Counts the connection against the cap until it closes; called under
  // core->mu before the session is shared.
  void TakeSlot() { holds_slot_ = true; }

  void Start() {
    if (state_ == State::kClosed) return;
    buffer_.reserve(kReadBufferBytes);
    quiet_since_ = SteadyClock::Get()->Now();
    ArmTimer();
    ReadHeader();
    header_since_ = quiet_since_;  // a new connection's first header counts from now
  }

  void Close() {
    if (state_ == State::kClosed) return;
    state_ = State::kClosed;
    deferred_.reset();
    beast::error_code ignored;
    {
      absl::MutexLock lock(&direct_mu_);
      awaiting_answer_ = false;
      socket_.close(ignored);  // cancels pending operations
    }
    timer_.cancel();
    if (holds_slot_) {
      absl::MutexLock lock(&core_->mu);
      holds_slot_ = false;
      --core_->open;
    }
  }

  // BeginDrain() has begun: a connection idle between requests closes now;
  // one reading a request, handling or writing one goes on, and closes
  // after its answer (see Dispatch and OnWrite).
  void OnDrain() {
    if ((state_ == State::kReading && buffer_.size() == 0) || state_ == State::kDraining) {
      Close();
    }
  }

  // Any thread. Answers that arrive on the strand (the usual inline answer)
  // skip the post. A late answer from another thread (a worker's reply on a
  // gRPC thread) is written on that thread when the connection is waiting
  // for it: handing it to an io thread would put that thread's wake-up, tens
  // of microseconds on a virtual machine, on every such request's latency.
  void Deliver(Response response, bool dropped) override {
    if (strand_.running_in_this_thread()) {
      OnDeliver(std::move(response), dropped);
      return;
    }
    if (WriteDirectly(response)) return;
    PostUnlessStopped([self = shared_from_this(), response = std::move(response),
                       dropped]() mutable { self->OnDeliver(std::move(response), dropped); });
  }

 private:
  // kReading: a request's header; kReadingBody: its body.
  enum class State { kReading, kReadingBody, kHandling, kWriting, kDraining, kClosed };

  void ArmTimer() {
    timer_.expires_after(Chrono(core_->tick));
    // A weak reference: the timer alone must not keep a connection alive.
    timer_.async_wait([weak = weak_from_this()](beast::error_code ec) {
      std::shared_ptr<Session> self = weak.lock();
      if (!self || ec || self->state_ == State::kClosed) return;
      if (self->TimedOut()) return self->Close();
      self->ArmTimer();
    });
  }

  // At a tick of the timer: whether the connection has waited on its peer
  // for idle_timeout without progress, or spent header_timeout on a header.
  bool TimedOut() {
    const Nanos now = SteadyClock::Get()->Now();
    if (activity_ != activity_seen_ || state_ == State::kHandling) {
      activity_seen_ = activity_;
      quiet_since_ = now;
    } else if (now - quiet_since_ >= core_->options.idle_timeout) {
      return true;
    }
    if (state_ != State::kReading) return false;
    // A kept-alive connection's next header counts from its first byte
    // (Beast parses a header only once it is whole, so a partial one stays
    // in the buffer); the timer sees that byte at the tick after it came.
    if (header_since_ == 0 && buffer_.size() > 0) header_since_ = now;
    return header_since_ != 0 && now - header_since_ >= core_->options.header_timeout;
  }

  void ReadHeader() {
    if (state_ == State::kClosed) return;
    state_ = State::kReading;
    header_since_ = 0;
    parser_.emplace();
    parser_->header_limit(kRequestHeaderLimit);
    parser_->body_limit(static_cast<uint64_t>(core_->options.max_body_bytes));
    reader_.BeginRequest(buffer_.size() > 0);
    bhttp::async_read_header(reader_, buffer_, *parser_,
                             beast::bind_front_handler(&Session::OnHeader, shared_from_this()));
  }

  void OnHeader(beast::error_code ec, size_t /*bytes*/) {
    if (state_ == State::kClosed) return;
    ++activity_;
    if (ec) return OnReadError(ec);
    // Counted from when its first bytes reached the socket: the wait before
    // the I/O thread read them is part of the backlog the shedder judges,
    // and of the query's deadline.
    head_arrived_ = ArrivalOnClock(reader_.request_stamp(), core_->options.clock->Now());
    state_ = State::kReadingBody;
    if (parser_->is_done()) return Dispatch();
    if (absl::EqualsIgnoreCase(Sv(parser_->get()[bhttp::field::expect]), "100-continue")) {
      // curl waits (a second) for this before sending a large upload.
      asio::async_write(socket_, asio::buffer(kContinue.data(), kContinue.size()),
                        [self = shared_from_this()](beast::error_code ec, size_t) {
                          if (self->state_ == State::kClosed) return;
                          ++self->activity_;
                          if (ec) return self->Close();
                          self->ReadBody();
                        });
      return;
    }
    ReadBody();
  }

  // Reads the body piece by piece, so that a long upload counts as activity.
  // A body already read with its head still goes through async_read_some,
  // whose completion waits behind the other connections' events. Parsing it
  // on the spot was tried while Request::arrived was stamped at the head
  // (it is now the socket's receive stamp): it moved the whole wait to
  // before the head, where nothing then saw it, and under overload nothing
  // was shed and the backlog grew to seconds (docs/experiments.md,
  // "overload").
  void ReadBody() {
    bhttp::async_read_some(reader_, buffer_, *parser_,
                           beast::bind_front_handler(&Session::OnBody, shared_from_this()));
  }

  void OnBody(beast::error_code ec, size_t /*bytes*/) {
    if (state_ == State::kClosed) return;
    ++activity_;
    if (ec) return OnReadError(ec);
    if (!parser_->is_done()) return ReadBody();
    Dispatch();
  }
  void OnReadError(beast::error_code ec) {
    const size_t limit = core_->options.max_body_bytes;
    if (ec == bhttp::error::body_limit) {
      // With a Content-Length the parser stops right after the header, so
      // the body is refused before it is read.
      uint64_t length = 0;
      if (absl::SimpleAtoi(Sv(parser_->get()[bhttp::field::content_length]), &length)) {
        return Refuse(
            413, absl::StrCat("request body of ", length, " bytes exceeds the limit of ", limit,
                              " bytes; send a smaller body or raise the "
                              "server's max_body_bytes"));
      }
      return Refuse(413, absl::StrCat("request body exceeds the limit of ", limit,
                                      " bytes; send a smaller body or raise the "
                                      "server's max_body_bytes"));
    }
    if (ec == bhttp::error::header_limit) {
      return Refuse(
          431, absl::StrCat("request headers exceed the limit of ", kRequestHeaderLimit, " bytes"));
    }
    // A peer that goes away, a timeout, or Stop(): nothing to answer.
    if (ec == bhttp::error::end_of_stream || ec == bhttp::error::partial_message ||
        ec.category() != bhttp::make_error_code(bhttp::error::bad_method).category()) {
      return Close();
    }
    Refuse(400, absl::StrCat("malformed HTTP request: ", ec.message()));
  }

  // Answers an unreadable request and closes the connection afterwards.
  void Refuse(int status, absl::string_view message) {
    keep_alive_ = false;
    http10_ = false;
    drain_after_write_ = true;
    Write(Response::Error(status, message));
  }

  void Dispatch() {
    auto& message = parser_->get();
    keep_alive_ = message.keep_alive();
    http10_ = message.version() == 10;
    state_ = State::kHandling;
    if (core_->draining.load(std::memory_order_relaxed)) {
      keep_alive_ = false;
      return Write(Response::Error(503, kDrainingMessage));
    }

    absl::string_view raw_path;
    absl::StatusOr<Request> request = FromBeastRequest(message, &raw_path);
    if (!request.ok()) {
      return Write(Response::Error(
          400, absl::StrCat("malformed request path: ", request.status().message())));
    }
    request->arrived = head_arrived_;

    // An answer given inline is parked in deferred_ and written once the
    // handler has returned, so the write never races the handler's own
    // unwinding, and a throwing handler can still be reported as such.
    in_handler_ = true;
    std::string failure;
    try {
      core_->router.Route(*std::move(request), Responder(shared_from_this()), raw_path);
    } catch (const std::exception& e) {
      failure = e.what();
      if (failure.empty()) failure = "an exception with no message";
    } catch (...) {
      failure = "an exception that is not a std::exception";
    }
    in_handler_ = false;
    if (!deferred_) {  // answered later, from elsewhere
      // If the answer is already posted to the strand, Write() clears this
      // before anything else can read it: a Responder answers once.
      absl::MutexLock lock(&direct_mu_);
      awaiting_answer_ = true;
      return;
    }
    Response response = std::move(*deferred_);
    deferred_.reset();
    if (!failure.empty() && deferred_dropped_) {
      response = Response::Error(
          500, absl::StrCat("internal error: the request's handler threw: ", failure));
    }
    Write(std::move(response));
  }

  void OnDeliver(Response response, bool dropped) {
    if (state_ != State::kHandling) return;  // the connection closed meanwhile
    if (in_handler_) {
      deferred_.emplace(std::move(response));
      deferred_dropped_ = dropped;
      return;
    }
    Write(std::move(response));
  }

  void Write(Response response) {
    if (state_ == State::kClosed) return;
    {
      absl::MutexLock lock(&direct_mu_);
      awaiting_answer_ = false;
    }
    Prepare(std::move(response));
    WriteFrom(0);
  }

  // Makes `response` the one to write next, its head formatted in head_.
  void Prepare(Response response) {
    response_ = std::move(response);
    close_after_write_ = FormatHead(
        response_, !keep_alive_ || drain_after_write_ || CloseForDrain(), http10_, &head_);
  }

  // While the server drains, a connection closes after its answer unless
  // the next request is already in the buffer (it is answered 503 first:
  // closing with unread input would reset the connection, and could destroy
  // the answer before the client reads it). No read is pending while an
  // answer is prepared or written, so the buffer holds still.
  bool CloseForDrain() const {
    return core_->draining.load(std::memory_order_relaxed) && buffer_.size() == 0;
  }
  bool HasBody() const { return response_.status != 204 && response_.status != 304; }

  // Writes the prepared response_ (head_ and body) from byte `offset` on.
  void WriteFrom(size_t offset) {
    if (state_ == State::kClosed) return;
    std::array<asio::const_buffer, 2> buffers = {
        asio::buffer(head_), HasBody() ? asio::buffer(response_.body) : asio::const_buffer()};
    for (asio::const_buffer& buffer : buffers) {
      const size_t skip = std::min(offset, buffer.size());
      buffer += skip;
      offset -= skip;
    }
    state_ = State::kWriting;
    asio::async_write(socket_, buffers,
                      beast::bind_front_handler(&Session::OnWrite, shared_from_this()));
  }

  // Off the strand, while the connection waits for this answer: formats it
  // and sends what the socket takes now without blocking, then lets the
  // strand go on (reading the next request, or writing what the socket did
  // not take). False when the connection is not waiting (the answer came
  // during the handler, or the connection closed); the caller posts then.
  //
  // Safe off the strand because, while awaiting_answer_ is set, the strand
  // touches neither the socket nor the response state: no read is pending
  // (the next is started only after this answer), the idle timer leaves a
  // connection in kHandling alone, and Close() takes direct_mu_ first.
  bool WriteDirectly(Response& response) {
    absl::ReleasableMutexLock lock(&direct_mu_);
    if (!awaiting_answer_) return false;
    awaiting_answer_ = false;
    Prepare(std::move(response));
    std::array<iovec, 2> pieces = {iovec{head_.data(), head_.size()},
                                   iovec{response_.body.data(), HasBody() ? response_.body.size() : 0}};
    msghdr message{};
    message.msg_iov = pieces.data();
    message.msg_iovlen = pieces.size();
    const ssize_t sent =
        sendmsg(socket_.native_handle(), &message, MSG_DONTWAIT | MSG_NOSIGNAL);
    const size_t total = pieces[0].iov_len + pieces[1].iov_len;
    lock.Release();
    if (sent >= 0 && static_cast<size_t>(sent) == total) {
      PostUnlessStopped([self = shared_from_this()] { self->OnWrite({}, 0); });
    } else {
      // The socket is full, or failed: the strand writes the rest, and an
      // error ends up in OnWrite, which closes the connection.
      const size_t offset = sent > 0 ? static_cast<size_t>(sent) : 0;
      PostUnlessStopped([self = shared_from_this(), offset] { self->WriteFrom(offset); });
    }
    return true;
  }

  // Once the server stops nothing new may reach the io_context (see
  // ServerCore::stopped); Stop() closes this connection itself.
  template <typename Handler>
  void PostUnlessStopped(Handler handler) {
    absl::MutexLock lock(&core_->mu);
    if (!core_->stopped) asio::post(strand_, std::move(handler));
  }

  void OnWrite(beast::error_code ec, size_t /*bytes*/) {
    if (state_ == State::kClosed) return;
    ++activity_;
    if (ec) return Close();
    // An idle keep-alive connection should not pin a large body.
    std::string().swap(response_.body);
    response_.headers.clear();
    if (drain_after_write_) return StartDrain();
    if (close_after_write_ || CloseForDrain()) {
      beast::error_code ignored;
      socket_.shutdown(tcp::socket::shutdown_send, ignored);
      return Close();
    }
    ReadHeader();
  }

  // Bounded by kDrainLimit bytes, and by the idle timer if the peer stalls.
  void StartDrain() {
    state_ = State::kDraining;
    beast::error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_send, ignored);
    buffer_.clear();
    DrainSome(0);
  }

  void DrainSome(size_t drained) {
    socket_.async_read_some(
        buffer_.prepare(kReadBufferBytes),
        [self = shared_from_this(), drained](beast::error_code ec, size_t bytes) {
          if (self->state_ != State::kDraining) return;
          ++self->activity_;
          if (ec || drained + bytes > kDrainLimit) return self->Close();
          self->DrainSome(drained + bytes);
        });
  }

  // Declared first so that it is destroyed last: the socket and the timer
  // need the io_context that core_ owns.
  std::shared_ptr<ServerCore> core_;
  Strand strand_;
  tcp::socket socket_;
  StampedReader reader_;  // reads socket_, and keeps when each request reached it
  asio::steady_timer timer_;
  bool holds_slot_ = false;     // counted in core_->open (under core_->mu)
  uint64_t activity_ = 0;       // completed I/O operations
  uint64_t activity_seen_ = 0;  // activity_ when the timer last fired
  Nanos quiet_since_ = 0;       // when the timer last saw progress (or the handler busy)
  Nanos header_since_ = 0;      // when the header being read began (0: not yet seen)
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  Nanos head_arrived_ = 0;  // when the current request's first bytes reached the socket
  State state_ = State::kReading;
  bool keep_alive_ = true;
  bool http10_ = false;
  bool close_after_write_ = false;
  bool drain_after_write_ = false;
  bool in_handler_ = false;
  // Set while the handler has returned and the answer is still to come from
  // another thread, which may then write it itself (WriteDirectly).
  absl::Mutex direct_mu_;
  bool awaiting_answer_ ABSL_GUARDED_BY(direct_mu_) = false;
  std::optional<Response> deferred_;
  bool deferred_dropped_ = false;
  std::string head_;   // reused across responses
  Response response_;  // the one being written
};

}  // namespace maitre::http::internal
