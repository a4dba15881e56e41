#include "http/server.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>
#include <optional>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#include <unordered_map>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/clock.h"
#include "core/thread_name.h"
#include "http/beast_request.h"
#include "http/host_port.h"

namespace maitre::http {
namespace internal {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using Strand = asio::strand<asio::io_context::executor_type>;

namespace {

// Beast reads at most the buffer's spare capacity (but at least 512 bytes)
// per system call and never grows a buffer that the parser drains, so the
// initial capacity sets the read size: 64 KiB reads an 8 KB inference
// request in one call instead of sixteen.
constexpr size_t kReadBufferBytes = 64 << 10;
// After an error response sent before the request was fully read (413, 400),
// the server discards up to this much of what the client is still sending
// before closing: closing a socket with unread input makes the kernel send a reset,
// which can destroy the error response before the client reads it.
constexpr size_t kDrainLimit = 8 << 20;
constexpr Nanos kAcceptRetryDelay = 10 * kMillisecond;
// Connections accepted per wake-up of the listener, so that a flood of them
// does not hold the accepting thread from the requests of others.
constexpr int kAcceptBatch = 64;
constexpr absl::string_view kDrainingMessage =
    "the server is shutting down and takes no new requests; send this one to another server";
constexpr absl::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

std::chrono::nanoseconds Chrono(Nanos ns) { return std::chrono::nanoseconds(ns); }

absl::string_view Sv(beast::string_view s) { return absl::string_view(s.data(), s.size()); }

bool HasCrLf(absl::string_view s) { return s.find_first_of("\r\n") != absl::string_view::npos; }

// Serialises the status line and headers of `response` into *out (reusing its
// capacity). Returns whether the connection closes after this response.
bool FormatHead(const Response& response, bool close, bool http10, std::string* out) {
  int status = response.status;
  if (status < 200 || status > 999) status = 500;  // 1xx cannot be a final answer
  const bool has_body = status != 204 && status != 304;
  for (const Header& header : response.headers) {
    if (absl::EqualsIgnoreCase(header.name, "Connection") &&
        absl::EqualsIgnoreCase(header.value, "close")) {
      close = true;
    }
  }
  absl::string_view reason = Sv(bhttp::obsolete_reason(bhttp::int_to_status(status)));
  if (absl::StartsWith(reason, "<")) reason = "Unknown";

  out->clear();
  absl::StrAppend(out, "HTTP/1.1 ", status, " ", reason, "\r\n");
  if (!response.content_type.empty() && !HasCrLf(response.content_type)) {
    absl::StrAppend(out, "Content-Type: ", response.content_type, "\r\n");
  }
  if (has_body) absl::StrAppend(out, "Content-Length: ", response.body.size(), "\r\n");
  for (const Header& header : response.headers) {
    if (header.name.empty() || HasCrLf(header.name) || HasCrLf(header.value) ||
        absl::EqualsIgnoreCase(header.name, "Content-Length") ||
        absl::EqualsIgnoreCase(header.name, "Transfer-Encoding") ||
        absl::EqualsIgnoreCase(header.name, "Connection")) {
      continue;
    }
    absl::StrAppend(out, header.name, ": ", header.value, "\r\n");
  }
  if (close) {
    out->append("Connection: close\r\n");
  } else if (http10) {
    out->append("Connection: keep-alive\r\n");
  }
  out->append("\r\n");
  return close;
}

// The connection cap in force: what the options ask for, but at most half
// the process's descriptor limit, so that connections alone cannot take the
// descriptors the rest of the process needs.
int ConnectionCap(int wanted) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return wanted;
  return static_cast<int>(std::min<rlim_t>(wanted, std::max<rlim_t>(1, limit.rlim_cur / 2)));
}

void RunIoContext(asio::io_context* ioc) {
  for (;;) {
    try {
      ioc->run();
      return;
    } catch (...) {
      // Handlers catch what they expect; an unexpected exception (such as
      // bad_alloc) costs that one operation, not the io thread.
    }
  }
}

}  // namespace

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
    bhttp::async_read_header(socket_, buffer_, *parser_,
                             beast::bind_front_handler(&Session::OnHeader, shared_from_this()));
  }

  void OnHeader(beast::error_code ec, size_t /*bytes*/) {
    if (state_ == State::kClosed) return;
    ++activity_;
    if (ec) return OnReadError(ec);
    head_arrived_ = core_->options.clock->Now();
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
  void ReadBody() {
    bhttp::async_read_some(socket_, buffer_, *parser_,
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
  asio::steady_timer timer_;
  bool holds_slot_ = false;     // counted in core_->open (under core_->mu)
  uint64_t activity_ = 0;       // completed I/O operations
  uint64_t activity_seen_ = 0;  // activity_ when the timer last fired
  Nanos quiet_since_ = 0;       // when the timer last saw progress (or the handler busy)
  Nanos header_since_ = 0;      // when the header being read began (0: not yet seen)
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  Nanos head_arrived_ = 0;  // when the current request's head was read
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

// Connections are accepted with accept4 rather than Asio's accept, which
// cannot ask for SOCK_CLOEXEC: a descriptor is then never open without it,
// not even between accept and a later fcntl while another thread forks.
void ServerCore::Accept() {
  acceptor.async_wait(tcp::acceptor::wait_read,
                      [this](beast::error_code ec) { OnListenerReady(ec); });
}

void ServerCore::OnListenerReady(beast::error_code ec) {
  if (!acceptor.is_open()) return;  // Stop() or BeginDrain() closed it
  if (ec) {
    if (ec == asio::error::operation_aborted) return;
    return RetryAcceptLater();
  }
  for (int accepted = 0; accepted < kAcceptBatch;) {
    const int fd =
        accept4(acceptor.native_handle(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      Admit(fd);
      ++accepted;
      continue;
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK) break;
    // The peer gave up before its connection was accepted, or a signal.
    if (errno == ECONNABORTED || errno == EINTR || errno == EPROTO) continue;
    return RetryAcceptLater();  // out of descriptors and the like
  }
  Accept();
}

// Retries shortly rather than spin while accept fails (EMFILE, ENOBUFS).
void ServerCore::RetryAcceptLater() {
  accept_retry.expires_after(Chrono(kAcceptRetryDelay));
  accept_retry.async_wait([this](beast::error_code wait_ec) {
    if (!wait_ec && acceptor.is_open()) Accept();
  });
}

void ServerCore::Admit(int fd) {
  Strand strand = asio::make_strand(ioc);
  tcp::socket socket(strand);
  beast::error_code ec;
  socket.assign(protocol, fd, ec);
  if (ec) {
    ::close(fd);
    return;
  }
  socket.set_option(tcp::no_delay(true), ec);
  auto session = std::make_shared<Session>(shared_from_this(), std::move(socket), strand);
  enum class Verdict { kAdmit, kOverCap, kStopping } verdict = Verdict::kAdmit;
  {
    absl::MutexLock lock(&mu);
    if (stopped || draining.load(std::memory_order_relaxed)) {
      verdict = Verdict::kStopping;
    } else if (open >= max_connections) {
      verdict = Verdict::kOverCap;
    } else {
      ++open;
      session->TakeSlot();
      sessions.emplace(session.get(), session);
    }
  }
  if (verdict == Verdict::kAdmit) {
    asio::post(strand, [session] { session->Start(); });
    return;
  }
  if (verdict == Verdict::kOverCap) {
    // As much of the answer as the socket takes now; the connection is
    // closed either way, so it costs no descriptor past this call.
    (void)send(fd, over_cap_answer.data(), over_cap_answer.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  }
  session->Close();  // not yet shared with any other thread
}

void ServerCore::CloseListener() {
  asio::post(accept_strand, [this] {
    beast::error_code ignored;
    acceptor.close(ignored);
    accept_retry.cancel();
  });
}

void ServerCore::PostToEachSession(void (Session::*action)()) {
  std::vector<std::shared_ptr<Session>> live;
  {
    absl::MutexLock lock(&mu);
    for (auto& entry : sessions) {
      if (std::shared_ptr<Session> session = entry.second.lock()) {
        live.push_back(std::move(session));
      }
    }
  }
  // Posted outside the lock: dropping the last reference to a session
  // destroys it, which takes the lock.
  for (std::shared_ptr<Session>& session : live) {
    Strand strand = session->strand();
    asio::post(strand, [session = std::move(session), action] { (session.get()->*action)(); });
  }
}

}  // namespace internal

using internal::ServerCore;
using internal::Session;
using internal::Strand;
namespace asio = boost::asio;
namespace beast = boost::beast;
using tcp = asio::ip::tcp;

absl::StatusOr<std::unique_ptr<Server>> Server::Create(ServerOptions options, Router router) {
  if (options.threads < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("ServerOptions.threads must be at least 1, got ", options.threads));
  }
  if (options.idle_timeout <= 0) {
    return absl::InvalidArgumentError("ServerOptions.idle_timeout must be positive");
  }
  if (options.header_timeout <= 0) {
    return absl::InvalidArgumentError("ServerOptions.header_timeout must be positive");
  }
  if (options.max_connections < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ServerOptions.max_connections must be at least 1, got ", options.max_connections));
  }
  if (!router.status().ok()) return router.status();
  std::string host;
  std::string port;
  absl::Status split = internal::SplitHostPort(options.address, "", &host, &port);
  if (!split.ok()) return split;
  if (host.empty()) host = "0.0.0.0";
  const std::string address = options.address;

  try {
    auto core = std::make_shared<ServerCore>(std::move(options), std::move(router));
    beast::error_code ec;
    tcp::resolver resolver(core->ioc);
    auto endpoints = resolver.resolve(host, port, tcp::resolver::passive, ec);
    if (ec || endpoints.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot resolve the listen address ", address, ": ", ec.message()));
    }
    tcp::endpoint endpoint = endpoints.begin()->endpoint();
    tcp::acceptor& acceptor = core->acceptor;
    core->protocol = endpoint.protocol();
    // Opened here rather than by Asio, which cannot ask for SOCK_CLOEXEC.
    const int fd = ::socket(endpoint.protocol().family(),
                            SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, IPPROTO_TCP);
    if (fd < 0) {
      return absl::UnavailableError(
          absl::StrCat("cannot open a socket to listen on ", address, ": ", std::strerror(errno)));
    }
    acceptor.assign(endpoint.protocol(), fd, ec);
    if (ec) ::close(fd);
    // Lets a restarted server bind while old connections sit in TIME_WAIT;
    // on Linux it still refuses a port another socket listens on.
    if (!ec) acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) acceptor.bind(endpoint, ec);
    if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      std::string hint = ec == asio::error::address_in_use
                             ? " (another process is listening there; pick another port)"
                             : "";
      return absl::UnavailableError(
          absl::StrCat("cannot listen on ", address, ": ", ec.message(), hint));
    }
    int bound_port = acceptor.local_endpoint(ec).port();
    if (ec) return absl::InternalError(absl::StrCat("cannot read the bound port: ", ec.message()));
    return std::unique_ptr<Server>(new Server(std::move(core), bound_port));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("cannot start the HTTP server: ", e.what()));
  }
}

Server::Server(std::shared_ptr<ServerCore> core, int port) : core_(std::move(core)), port_(port) {}

Server::~Server() { Stop(); }

void Server::Start() {
  absl::MutexLock lock(&lifecycle_mu_);
  if (started_ || stopped_) return;
  started_ = true;
  ServerCore* core = core_.get();
  core->work.emplace(core->ioc.get_executor());
  asio::post(core->accept_strand, [core] { core->Accept(); });
  threads_.reserve(core->options.threads);
  for (int i = 0; i < core->options.threads; ++i) {
    threads_.emplace_back([core] {
      NameThisThread("http-io");
      internal::RunIoContext(&core->ioc);
    });
  }
}

void Server::BeginDrain() {
  absl::MutexLock lock(&lifecycle_mu_);
  if (!started_ || stopped_) return;
  {
    absl::MutexLock core_lock(&core_->mu);
    if (core_->draining.exchange(true)) return;
  }
  core_->CloseListener();
  core_->PostToEachSession(&Session::OnDrain);
}

int Server::open_connections() const {
  absl::MutexLock lock(&core_->mu);
  return core_->open;
}

int Server::max_connections() const { return core_->max_connections; }

void Server::Stop() {
  absl::MutexLock lock(&lifecycle_mu_);
  if (stopped_) return;
  stopped_ = true;
  ServerCore* core = core_.get();
  if (!started_) {
    // No io thread ever ran, so nothing else can touch the acceptor.
    absl::MutexLock core_lock(&core->mu);
    core->stopped = true;
    beast::error_code ignored;
    core->acceptor.close(ignored);
    return;
  }
  // Close everything on its own strand, then let the io threads run out of
  // work: cancelled operations complete, and nothing new is posted because
  // `stopped` is set. No forced io_context::stop(), so no handler is left
  // queued holding a connection.
  {
    absl::MutexLock core_lock(&core->mu);
    core->stopped = true;
  }
  core->CloseListener();
  core->PostToEachSession(&Session::Close);
  core->work.reset();
  for (std::thread& thread : threads_) thread.join();
  threads_.clear();
}

}  // namespace maitre::http
