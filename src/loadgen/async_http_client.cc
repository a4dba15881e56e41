#include "loadgen/async_http_client.h"

#include <algorithm>
#include <atomic>
#include <boost/asio/connect.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <deque>
#include <optional>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "http/beast_response.h"
#include "http/host_port.h"

namespace maitre::loadgen {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;

struct Pending {
  std::shared_ptr<const std::string> wire;
  AsyncHttpCallback done;
  bool retried = false;
};

struct Connection {
  explicit Connection(asio::io_context& ioc) : socket(ioc) {}
  tcp::socket socket;
  beast::flat_buffer buffer;
  std::optional<bhttp::response_parser<bhttp::string_body>> parser;
  Pending current;
  bool reused = false;     // it has carried a request before this one
  bool timed_out = false;  // the sweep closed it
  Nanos deadline = kInfiniteFuture;
  Nanos sent_at = 0;
};
using ConnectionPtr = std::shared_ptr<Connection>;

// One io thread with its own connections. Every member is touched only on
// that thread, so none needs a lock.
class Shard {
 public:
  Shard(const AsyncHttpClientOptions& options, const Clock* clock,
        tcp::resolver::results_type endpoints, int max_open, std::atomic<int64_t>* opened)
      : options_(options),
        clock_(clock),
        endpoints_(std::move(endpoints)),
        max_open_(max_open),
        opened_(opened),
        work_(asio::make_work_guard(ioc_)),
        sweep_timer_(ioc_) {
    // The sweep enforces timeouts for every connection at once, which is
    // cheaper than arming and cancelling a timer per request.
    sweep_every_ = std::clamp<Nanos>(options_.timeout / 8, kMillisecond, 100 * kMillisecond);
    ArmSweep();
    thread_ = std::thread([this] { ioc_.run(); });
  }

  ~Shard() { Stop(); }

  void Post(Pending p) {
    asio::post(ioc_, [this, p = std::move(p)]() mutable { Dispatch(std::move(p)); });
  }

  // Closes everything on the io thread; run() then runs out of work and
  // returns.
  void Stop() {
    if (!thread_.joinable()) return;
    asio::post(ioc_, [this] {
      stopping_ = true;
      beast::error_code ignored;
      sweep_timer_.cancel();
      for (auto& [raw, connection] : live_) connection->socket.close(ignored);
      live_.clear();
      idle_.clear();
      queue_.clear();
      work_.reset();
    });
    thread_.join();
  }

 private:
  void Dispatch(Pending p) {
    if (stopping_) return;
    if (!idle_.empty()) {
      ConnectionPtr c = std::move(idle_.back());
      idle_.pop_back();
      c->reused = true;
      c->current = std::move(p);
      Write(c);
    } else if (open_ < max_open_) {
      Connect(std::move(p));
    } else {
      queue_.push_back(std::move(p));
    }
  }

  // Starts queued requests on whatever capacity a closed connection freed.
  void PumpQueue() {
    while (!queue_.empty() && (!idle_.empty() || open_ < max_open_)) {
      Pending p = std::move(queue_.front());
      queue_.pop_front();
      Dispatch(std::move(p));
    }
  }

  void Connect(Pending p) {
    auto c = std::make_shared<Connection>(ioc_);
    c->current = std::move(p);
    c->deadline = clock_->Now() + options_.timeout;
    ++open_;
    live_[c.get()] = c;
    asio::async_connect(c->socket, endpoints_,
                        [this, c](const beast::error_code& ec, const tcp::endpoint&) {
                          if (stopping_) return;
                          if (ec) {
                            Fail(c, ec);
                            return;
                          }
                          beast::error_code ignored;
                          c->socket.set_option(tcp::no_delay(true), ignored);
                          c->buffer.reserve(16 << 10);
                          opened_->fetch_add(1, std::memory_order_relaxed);
                          Write(c);
                        });
  }

  void Write(const ConnectionPtr& c) {
    c->parser.emplace();
    c->parser->body_limit(uint64_t{1} << 32);
    c->sent_at = clock_->Now();
    c->deadline = c->sent_at + options_.timeout;
    asio::async_write(c->socket, asio::buffer(*c->current.wire),
                      [this, c](const beast::error_code& ec, size_t) {
                        if (stopping_) return;
                        if (ec) {
                          Fail(c, ec);
                          return;
                        }
                        bhttp::async_read(c->socket, c->buffer, *c->parser,
                                          [this, c](const beast::error_code& read_ec, size_t) {
                                            if (stopping_) return;
                                            if (read_ec) {
                                              Fail(c, read_ec);
                                            } else {
                                              Complete(c);
                                            }
                                          });
                      });
  }

  void Complete(const ConnectionPtr& c) {
    AsyncHttpResult result;
    result.done_at = clock_->Now();
    result.sent_at = c->sent_at;
    const bool keep_alive = c->parser->get().keep_alive();
    result.response = http::internal::FromBeastResponse(c->parser->release());
    AsyncHttpCallback done = std::move(c->current.done);
    c->current = Pending{};
    c->deadline = kInfiniteFuture;
    c->parser.reset();
    if (keep_alive) {
      // Reuse it for the oldest queued request, or park it.
      if (!queue_.empty()) {
        c->reused = true;
        c->current = std::move(queue_.front());
        queue_.pop_front();
        Write(c);
      } else {
        idle_.push_back(c);
      }
    } else {
      Forget(c);
      PumpQueue();
    }
    done(std::move(result));
  }

  void Fail(const ConnectionPtr& c, const beast::error_code& ec) {
    Pending p = std::move(c->current);
    const bool stale = c->reused && !c->timed_out && !p.retried && c->parser &&
                       !c->parser->got_some();
    const bool timed_out = c->timed_out;
    const Nanos sent_at = c->sent_at;
    Forget(c);
    if (stale) {
      // The server most likely closed this idle keep-alive connection just
      // before we wrote to it: one more try on another connection.
      p.retried = true;
      Dispatch(std::move(p));
      PumpQueue();
      return;
    }
    PumpQueue();
    AsyncHttpResult result;
    result.sent_at = sent_at;
    result.done_at = clock_->Now();
    if (timed_out) {
      result.transport = absl::DeadlineExceededError(
          absl::StrCat("no answer from ", options_.address, " within ",
                       ToSeconds(options_.timeout), " s"));
    } else {
      result.transport = absl::UnavailableError(
          absl::StrCat("connection to ", options_.address, " failed: ", ec.message()));
    }
    if (p.done) p.done(std::move(result));
  }

  void Forget(const ConnectionPtr& c) {
    beast::error_code ignored;
    c->socket.close(ignored);
    if (live_.erase(c.get()) > 0) --open_;
  }

  void ArmSweep() {
    sweep_timer_.expires_after(std::chrono::nanoseconds(sweep_every_));
    sweep_timer_.async_wait([this](const beast::error_code& ec) {
      if (ec || stopping_) return;
      const Nanos now = clock_->Now();
      for (auto& [raw, connection] : live_) {
        if (!connection->timed_out && connection->deadline <= now) {
          // Closing fails the pending operation; Fail() reports the timeout.
          connection->timed_out = true;
          beast::error_code ignored;
          connection->socket.close(ignored);
        }
      }
      ArmSweep();
    });
  }

  const AsyncHttpClientOptions& options_;
  const Clock* clock_;
  const tcp::resolver::results_type endpoints_;
  const int max_open_;
  std::atomic<int64_t>* opened_;

  asio::io_context ioc_{1};
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  asio::steady_timer sweep_timer_;
  Nanos sweep_every_ = 0;
  std::thread thread_;

  bool stopping_ = false;
  int open_ = 0;
  // Connections open now (busy or idle); owns them so Stop() can close all.
  std::unordered_map<Connection*, ConnectionPtr> live_;
  std::vector<ConnectionPtr> idle_;  // LIFO: the warmest connection first
  std::deque<Pending> queue_;
};

}  // namespace

struct AsyncHttpClient::Impl {
  AsyncHttpClientOptions options;
  std::atomic<int64_t> opened{0};
  std::atomic<uint64_t> next_shard{0};
  std::atomic<bool> shut_down{false};
  std::vector<std::unique_ptr<Shard>> shards;
};

AsyncHttpClient::AsyncHttpClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

AsyncHttpClient::~AsyncHttpClient() { Shutdown(); }

absl::StatusOr<std::unique_ptr<AsyncHttpClient>> AsyncHttpClient::Create(
    AsyncHttpClientOptions options) {
  if (options.io_threads < 1) {
    return absl::InvalidArgumentError("AsyncHttpClientOptions.io_threads must be at least 1");
  }
  if (options.max_connections < options.io_threads) {
    return absl::InvalidArgumentError(
        "AsyncHttpClientOptions.max_connections must be at least io_threads");
  }
  if (options.timeout <= 0) {
    return absl::InvalidArgumentError("AsyncHttpClientOptions.timeout must be positive");
  }
  std::string host, port;
  absl::Status split = http::internal::SplitHostPort(options.address, "80", &host, &port);
  if (!split.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("server address \"", options.address, "\": ", split.message()));
  }
  asio::io_context resolver_ioc;
  tcp::resolver resolver(resolver_ioc);
  beast::error_code ec;
  auto endpoints = resolver.resolve(host, port, ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("cannot resolve ", options.address, ": ", ec.message()));
  }
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  const Clock* clock = impl->options.clock ? impl->options.clock : SteadyClock::Get();
  const int n = impl->options.io_threads;
  for (int i = 0; i < n; ++i) {
    // Spread the connection cap over the shards, the remainder to the first.
    int cap = impl->options.max_connections / n + (i < impl->options.max_connections % n ? 1 : 0);
    impl->shards.push_back(
        std::make_unique<Shard>(impl->options, clock, endpoints, cap, &impl->opened));
  }
  return std::unique_ptr<AsyncHttpClient>(new AsyncHttpClient(std::move(impl)));
}

void AsyncHttpClient::Send(std::shared_ptr<const std::string> wire, AsyncHttpCallback done) {
  if (impl_->shut_down.load(std::memory_order_acquire)) return;
  const size_t shard =
      impl_->next_shard.fetch_add(1, std::memory_order_relaxed) % impl_->shards.size();
  impl_->shards[shard]->Post(Pending{std::move(wire), std::move(done)});
}

void AsyncHttpClient::Shutdown() {
  if (impl_->shut_down.exchange(true)) return;
  for (auto& shard : impl_->shards) shard->Stop();
}

int64_t AsyncHttpClient::connections_opened() const {
  return impl_->opened.load(std::memory_order_relaxed);
}

}  // namespace maitre::loadgen
