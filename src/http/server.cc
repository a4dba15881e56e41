#include "http/server.h"

#include <algorithm>
#include <array>
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
#include <chrono>
#include <exception>
#include <optional>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unordered_map>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
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
        ioc(options.threads),
        accept_strand(asio::make_strand(ioc)),
        acceptor(accept_strand),
        accept_retry(accept_strand) {}

  void Accept();
  void OnAccept(beast::error_code ec, tcp::socket socket, Strand strand);

  const ServerOptions options;
  const Router router;
  asio::io_context ioc;
  Strand accept_strand;
  tcp::acceptor acceptor;           // used on accept_strand only
  asio::steady_timer accept_retry;  // used on accept_strand only
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;

  absl::Mutex mu;
  // Once set, nothing new is posted to the io_context, so the io threads can
  // drain it and exit.
  bool stopped ABSL_GUARDED_BY(mu) = false;
  std::unordered_map<Session*, std::weak_ptr<Session>> sessions ABSL_GUARDED_BY(mu);
};

// One connection. Everything but Deliver() runs on the connection's strand.
//
// Idle connections are found by a coarse timer rather than a deadline per
// operation: re-arming a deadline costs a timerfd system call on every read
// and write, which is a measurable share of a ~40 us round trip. The timer
// fires once per idle_timeout and closes the connection if no I/O completed
// since the previous firing while it waited on the peer, so a silent peer is
// dropped after between one and two idle_timeouts. Time spent in the handler
// never counts.
class Session final : public ResponseSink, public std::enable_shared_from_this<Session> {
 public:
  Session(std::shared_ptr<ServerCore> core, tcp::socket socket, Strand strand)
      : core_(std::move(core)),
        strand_(std::move(strand)),
        socket_(std::move(socket)),
        idle_timer_(strand_) {}

  ~Session() override {
    absl::MutexLock lock(&core_->mu);
    core_->sessions.erase(this);
  }

  const Strand& strand() const { return strand_; }

  void Start() {
    if (state_ == State::kClosed) return;
    buffer_.reserve(kReadBufferBytes);
    ArmIdleTimer();
    ReadHeader();
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
    idle_timer_.cancel();
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
  enum class State { kReading, kHandling, kWriting, kDraining, kClosed };

  void ArmIdleTimer() {
    idle_timer_.expires_after(Chrono(core_->options.idle_timeout));
    // A weak reference: the timer alone must not keep a connection alive.
    idle_timer_.async_wait([weak = weak_from_this()](beast::error_code ec) {
      std::shared_ptr<Session> self = weak.lock();
      if (!self || ec || self->state_ == State::kClosed) return;
      if (self->state_ != State::kHandling && self->activity_ == self->activity_seen_) {
        return self->Close();
      }
      self->activity_seen_ = self->activity_;
      self->ArmIdleTimer();
    });
  }

  void ReadHeader() {
    if (state_ == State::kClosed) return;
    state_ = State::kReading;
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

    absl::string_view raw_path;
    absl::StatusOr<Request> request = FromBeastRequest(message, &raw_path);
    if (!request.ok()) {
      return Write(Response::Error(
          400, absl::StrCat("malformed request path: ", request.status().message())));
    }

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
    close_after_write_ = FormatHead(response_, !keep_alive_ || drain_after_write_, http10_, &head_);
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
    if (close_after_write_) {
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
  asio::steady_timer idle_timer_;
  uint64_t activity_ = 0;       // completed I/O operations
  uint64_t activity_seen_ = 0;  // activity_ when the idle timer last fired
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
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

void ServerCore::Accept() {
  Strand strand = asio::make_strand(ioc);
  acceptor.async_accept(strand, [this, strand](beast::error_code ec, tcp::socket socket) {
    OnAccept(ec, std::move(socket), strand);
  });
}

void ServerCore::OnAccept(beast::error_code ec, tcp::socket socket, Strand strand) {
  if (!acceptor.is_open()) return;  // Stop() closed it
  if (ec) {
    if (ec == asio::error::operation_aborted) return;
    // Out of descriptors and the like: retry shortly rather than spin.
    accept_retry.expires_after(Chrono(kAcceptRetryDelay));
    accept_retry.async_wait([this](beast::error_code wait_ec) {
      if (!wait_ec && acceptor.is_open()) Accept();
    });
    return;
  }
  beast::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);
  auto session = std::make_shared<Session>(shared_from_this(), std::move(socket), strand);
  bool refused = false;
  {
    absl::MutexLock lock(&mu);
    refused = stopped;
    if (!refused) sessions.emplace(session.get(), session);
  }
  if (refused) {
    session->Close();  // not yet shared with any other thread
  } else {
    asio::post(strand, [session] { session->Start(); });
  }
  Accept();
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
    acceptor.open(endpoint.protocol(), ec);
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
    threads_.emplace_back([core] { internal::RunIoContext(&core->ioc); });
  }
}

void Server::Stop() {
  absl::MutexLock lock(&lifecycle_mu_);
  if (stopped_) return;
  stopped_ = true;
  ServerCore* core = core_.get();
  std::vector<std::shared_ptr<Session>> sessions;
  {
    absl::MutexLock core_lock(&core->mu);
    core->stopped = true;
    for (auto& entry : core->sessions) {
      if (std::shared_ptr<Session> session = entry.second.lock()) {
        sessions.push_back(std::move(session));
      }
    }
  }
  if (!started_) {
    // No io thread ever ran, so nothing else can touch the acceptor.
    beast::error_code ignored;
    core->acceptor.close(ignored);
    return;
  }
  // Close everything on its own strand, then let the io threads run out of
  // work: cancelled operations complete, and nothing new is posted because
  // `stopped` is set. No forced io_context::stop(), so no handler is left
  // queued holding a connection.
  asio::post(core->accept_strand, [core] {
    beast::error_code ignored;
    core->acceptor.close(ignored);
    core->accept_retry.cancel();
  });
  for (std::shared_ptr<Session>& session : sessions) {
    Strand strand = session->strand();
    asio::post(strand, [session = std::move(session)] { session->Close(); });
  }
  sessions.clear();
  core->work.reset();
  for (std::thread& thread : threads_) thread.join();
  threads_.clear();
}

}  // namespace maitre::http
