#include "http/server.h"

#include <algorithm>
#include <cerrno>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/clock.h"
#include "core/thread_name.h"
#include "http/host_port.h"
#include "http/server_core.h"
#include "http/session.h"

namespace maitre::http {
namespace internal {
namespace {

bool HasCrLf(absl::string_view s) { return s.find_first_of("\r\n") != absl::string_view::npos; }

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
