// End-to-end tests of Server and Client over loopback.
#include "http/server.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "core/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "http/client.h"
#include "http/multipart.h"
#include "nlohmann/json.hpp"

namespace maitre::http {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// Sends `bytes` on a fresh plain socket and returns everything the server
// writes until it closes the connection (or `read_limit` bytes).
std::string RawExchange(int port, const std::string& bytes, size_t read_limit = 1 << 20) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  size_t sent = 0;
  while (sent < bytes.size()) {
    ssize_t n = send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  std::string out;
  char buffer[4096];
  while (out.size() < read_limit) {
    ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) break;
    out.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

// A plain socket connected to the server on `port`; -1 if refused.
int Connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

bool SendAll(int fd, absl::string_view bytes) {
  return send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
}

// Reads from `fd` until the server closes it (*closed) or nothing comes for
// `limit`.
std::string ReadUntilClosed(int fd, Nanos limit, bool* closed) {
  timeval wait{static_cast<time_t>(limit / kSecond),
               static_cast<suseconds_t>(limit % kSecond / kMicrosecond)};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof(wait));
  std::string out;
  char buffer[4096];
  for (;;) {
    ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n > 0) {
      out.append(buffer, static_cast<size_t>(n));
      continue;
    }
    *closed = n == 0 || errno == ECONNRESET;
    return out;
  }
}

// Reads one answer's head (for answers without a body).
std::string ReadHead(int fd) {
  std::string out;
  char c;
  while (!absl::EndsWith(out, "\r\n\r\n") && recv(fd, &c, 1, 0) == 1) out.push_back(c);
  return out;
}

// Polls `done` until it holds; false after 20 s (far beyond a working host).
bool Eventually(const std::function<bool()>& done) {
  const Nanos give_up = SteadyClock::Get()->Now() + 20 * kSecond;
  while (!done()) {
    if (SteadyClock::Get()->Now() > give_up) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

std::string PatternBody(size_t bytes) {
  std::string body(bytes, '\0');
  for (size_t i = 0; i < bytes; ++i) body[i] = static_cast<char>('a' + i % 23);
  return body;
}

class ServerTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (server_) server_->Stop();
    absl::MutexLock lock(&mu_);
    for (std::thread& thread : threads_) thread.join();
  }

  Router MakeRouter() {
    Router router;
    router.Add("POST", "/echo", [](Request&& request, const PathParams&, Responder respond) {
      Response response;
      response.content_type = std::string(request.GetHeader("Content-Type"));
      response.body = std::move(request.body);
      response.headers.push_back({"X-Q", request.QueryParam("q")});
      std::move(respond)(std::move(response));
    });
    router.Add("GET", "/headers", [](Request&& request, const PathParams&, Responder respond) {
      std::move(respond)(Response::Text(200, std::string(request.GetHeader("x-test"))));
    });
    router.Add("GET", "/models/{name}", [](Request&& r, const PathParams& p, Responder respond) {
      std::move(respond)(Response::Text(200, absl::StrCat(p.at("name"), "|", r.path)));
    });
    router.Add("GET", "/later/{ms}", [this](Request&&, const PathParams& p, Responder respond) {
      int ms = std::stoi(p.at("ms"));
      absl::MutexLock lock(&mu_);
      threads_.emplace_back([ms, respond = std::move(respond)]() mutable {
        std::this_thread::sleep_for(std::chrono::milliseconds(ms));
        std::move(respond)(Response::Text(200, "later"));
      });
    });
    // Answers from another thread with `bytes` bytes of a repeating pattern,
    // optionally asking to close the connection afterwards.
    router.Add("GET", "/later-big/{bytes}", [this](Request&& r, const PathParams& p,
                                                    Responder respond) {
      const size_t bytes = std::stoul(p.at("bytes"));
      const bool close = r.QueryParam("close") == "1";
      absl::MutexLock lock(&mu_);
      threads_.emplace_back([bytes, close, respond = std::move(respond)]() mutable {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        Response response = Response::Text(200, PatternBody(bytes));
        if (close) response.headers.push_back({"Connection", "close"});
        std::move(respond)(std::move(response));
      });
    });
    // Answers when the server says the request arrived.
    router.Add("POST", "/arrived", [](Request&& r, const PathParams&, Responder respond) {
      std::move(respond)(Response::Text(200, absl::StrCat(r.arrived)));
    });
    // Holds the I/O thread it runs on until the test lets it go.
    router.Add("GET", "/block", [this](Request&&, const PathParams&, Responder respond) {
      blocking_.Notify();
      unblock_.WaitForNotification();
      std::move(respond)(Response::Text(200, "unblocked"));
    });
    router.Add("GET", "/drop", [](Request&&, const PathParams&, Responder) {});
    router.Add("GET", "/throw",
               [](Request&&, const PathParams&, Responder) { throw std::runtime_error("boom"); });
    router.Add("GET", "/close", [](Request&&, const PathParams&, Responder respond) {
      Response response = Response::Text(200, "bye");
      response.headers.push_back({"Connection", "close"});
      std::move(respond)(std::move(response));
    });
    router.Add("GET", "/empty", [](Request&&, const PathParams&, Responder respond) {
      std::move(respond)(Response::Text(204, "ignored"));
    });
    router.Add("GET", "/hang", [this](Request&&, const PathParams&, Responder respond) {
      absl::MutexLock lock(&mu_);
      parked_ = std::move(respond);
      parked_notification_.Notify();
    });
    router.Add("POST", "/upload", [](Request&& request, const PathParams&, Responder respond) {
      absl::StatusOr<std::vector<Part>> parts =
          ParseMultipart(request.GetHeader("Content-Type"), request.body);
      if (!parts.ok()) {
        std::move(respond)(Response::Error(400, parts.status().message()));
        return;
      }
      nlohmann::json json = nlohmann::json::object();
      for (const Part& part : *parts) json[part.name] = part.data.size();
      std::move(respond)(Response::Json(200, json.dump()));
    });
    return router;
  }

  void StartServer(ServerOptions options = {}) {
    options.address = "127.0.0.1:0";
    absl::StatusOr<std::unique_ptr<Server>> server = Server::Create(options, MakeRouter());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    server_->Start();
  }

  std::unique_ptr<Client> NewClient(Nanos timeout = 20 * kSecond) {
    ClientOptions options;
    options.base_url = absl::StrCat("http://127.0.0.1:", server_->port());
    options.timeout = timeout;
    absl::StatusOr<std::unique_ptr<Client>> client = Client::Create(options);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }

  std::unique_ptr<Server> server_;
  absl::Mutex mu_;
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
  Responder parked_ ABSL_GUARDED_BY(mu_);
  absl::Notification parked_notification_;
  absl::Notification blocking_, unblock_;  // /block
};

TEST_F(ServerTest, KeepAliveServesManyRequestsOnOneConnection) {
  StartServer();
  std::unique_ptr<Client> client = NewClient();
  for (int i = 0; i < 20; ++i) {
    std::string body = absl::StrCat(R"({"i": )", i, "}");
    absl::StatusOr<Response> response = client->Send("POST", "/echo", body);
    ASSERT_TRUE(response.ok()) << response.status();
    EXPECT_EQ(response->status, 200);
    EXPECT_EQ(response->body, body);
    EXPECT_EQ(response->content_type, "application/json");
    EXPECT_EQ(response->GetHeader("Content-Length"), absl::StrCat(body.size()));
  }
  EXPECT_EQ(client->connections_opened(), 1);
}

TEST_F(ServerTest, QueryParamsHeadersAndPathParams) {
  StartServer();
  std::unique_ptr<Client> client = NewClient();
  absl::StatusOr<Response> echo = client->Send("POST", "/echo?q=a%20b+c&x=1", "{}");
  ASSERT_TRUE(echo.ok()) << echo.status();
  EXPECT_EQ(echo->GetHeader("x-q"), "a b c");

  absl::StatusOr<Response> headers = client->Send("GET", "/headers", "", {{"X-Test", "hello"}});
  ASSERT_TRUE(headers.ok());
  EXPECT_EQ(headers->body, "hello");
  EXPECT_EQ(headers->content_type, "text/plain; charset=utf-8");

  absl::StatusOr<Response> model = client->Send("GET", "/models/fmnist-cnn%3Atorch-opt");
  ASSERT_TRUE(model.ok());
  EXPECT_EQ(model->body, "fmnist-cnn:torch-opt|/models/fmnist-cnn:torch-opt");
}

// The stamp is the server's clock less the request's wait in its socket,
// which on an idle server is far below the 1,000 s the clock moves by.
TEST_F(ServerTest, EachRequestIsStampedWithItsArrivalOnTheServersClock) {
  ManualClock clock(1234 * kSecond);
  ServerOptions options;
  options.clock = &clock;
  StartServer(options);
  std::unique_ptr<Client> client = NewClient();
  absl::StatusOr<Response> first = client->Send("POST", "/arrived", "{}");
  ASSERT_TRUE(first.ok()) << first.status();
  Nanos stamp = 0;
  ASSERT_TRUE(absl::SimpleAtoi(first->body, &stamp)) << first->body;
  EXPECT_LE(stamp, 1234 * kSecond);
  EXPECT_GT(stamp, 234 * kSecond);
  clock.Advance(1000 * kSecond);  // the next request on the same connection
  absl::StatusOr<Response> second = client->Send("POST", "/arrived", "{}");
  ASSERT_TRUE(second.ok()) << second.status();
  ASSERT_TRUE(absl::SimpleAtoi(second->body, &stamp)) << second->body;
  EXPECT_LE(stamp, 2234 * kSecond);
  EXPECT_GT(stamp, 1234 * kSecond);
}

// A request that waits in its socket while the I/O thread is busy is
// stamped with when it reached the socket, not when the server read it:
// under overload that wait is the backlog (docs/architecture.md, "How a
// query travels"). The clock stands still, so only the wait moves the stamp.
TEST_F(ServerTest, ARequestsStampCountsItsWaitInTheSocket) {
  ManualClock clock(1234 * kSecond);
  ServerOptions options;
  options.clock = &clock;
  StartServer(options);
  std::thread blocker([this] {
    RawExchange(server_->port(), "GET /block HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  });
  blocking_.WaitForNotification();  // the one I/O thread is held
  const int fd = Connect(server_->port());  // the kernel accepts it meanwhile
  const std::string request =
      "POST /arrived HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}";
  const bool sent = fd >= 0 && send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
                                   static_cast<ssize_t>(request.size());
  // The bytes are in the socket now; they wait there at least this long.
  if (sent) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  unblock_.Notify();
  std::string reply;
  if (fd >= 0) {
    char buffer[4096];
    for (ssize_t n; (n = recv(fd, buffer, sizeof(buffer), 0)) > 0;) reply.append(buffer, n);
    close(fd);
  }
  blocker.join();
  ASSERT_TRUE(sent);
  ASSERT_THAT(reply, StartsWith("HTTP/1.1 200"));
  Nanos stamp = 0;
  ASSERT_TRUE(absl::SimpleAtoi(reply.substr(reply.find("\r\n\r\n") + 4), &stamp)) << reply;
  EXPECT_LE(stamp, 1234 * kSecond - 100 * kMillisecond);
  EXPECT_GT(stamp, 234 * kSecond);
}

TEST_F(ServerTest, NotFoundAndMethodNotAllowed) {
  StartServer();
  std::unique_ptr<Client> client = NewClient();
  absl::StatusOr<Response> missing = client->Send("GET", "/nope");
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(missing->status, 404);
  EXPECT_TRUE(nlohmann::json::parse(missing->body).contains("error"));

  absl::StatusOr<Response> wrong = client->Send("DELETE", "/echo");
  ASSERT_TRUE(wrong.ok());
  EXPECT_EQ(wrong->status, 405);
  EXPECT_EQ(wrong->GetHeader("Allow"), "POST");
  EXPECT_EQ(client->connections_opened(), 1);  // errors keep the connection
}

TEST_F(ServerTest, HandlerMayAnswerLaterFromAnotherThread) {
  StartServer();
  std::unique_ptr<Client> client = NewClient();
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<Response> response = client->Send("GET", "/later/20");
    ASSERT_TRUE(response.ok()) << response.status();
    EXPECT_EQ(response->status, 200);
    EXPECT_EQ(response->body, "later");
  }
  EXPECT_EQ(client->connections_opened(), 1);
}

TEST_F(ServerTest, DroppedResponderAndThrowingHandlerAnswer500) {
  StartServer();
  std::unique_ptr<Client> client = NewClient();
  absl::StatusOr<Response> dropped = client->Send("GET", "/drop");
  ASSERT_TRUE(dropped.ok()) << dropped.status();
  EXPECT_EQ(dropped->status, 500);
  EXPECT_THAT(dropped->body, HasSubstr("without sending a response"));

  absl::StatusOr<Response> thrown = client->Send("GET", "/throw");
  ASSERT_TRUE(thrown.ok()) << thrown.status();
  EXPECT_EQ(thrown->status, 500);
  EXPECT_THAT(thrown->body, HasSubstr("boom"));

  absl::StatusOr<Response> after = client->Send("GET", "/headers");
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->status, 200);
  EXPECT_EQ(client->connections_opened(), 1);
}

TEST_F(ServerTest, OversizeBodyIs413AndTheServerKeepsServing) {
  ServerOptions options;
  options.max_body_bytes = 1024;
  StartServer(options);
  std::unique_ptr<Client> client = NewClient();
  absl::StatusOr<Response> too_big = client->Send("POST", "/echo", std::string(100000, 'x'));
  ASSERT_TRUE(too_big.ok()) << too_big.status();
  EXPECT_EQ(too_big->status, 413);
  std::string message = nlohmann::json::parse(too_big->body)["error"];
  EXPECT_THAT(message, HasSubstr("100000 bytes"));
  EXPECT_THAT(message, HasSubstr("limit of 1024 bytes"));
  EXPECT_EQ(too_big->GetHeader("Connection"), "close");

  absl::StatusOr<Response> fits = client->Send("POST", "/echo", std::string(1024, 'y'));
  ASSERT_TRUE(fits.ok()) << fits.status();
  EXPECT_EQ(fits->status, 200);
  EXPECT_EQ(fits->body.size(), 1024u);
  EXPECT_EQ(client->connections_opened(), 2);
}

TEST_F(ServerTest, OversizeChunkedBodyIs413) {
  ServerOptions options;
  options.max_body_bytes = 10;
  StartServer(options);
  std::string reply = RawExchange(server_->port(),
                                  "POST /echo HTTP/1.1\r\nHost: x\r\n"
                                  "Transfer-Encoding: chunked\r\n\r\n"
                                  "8\r\n12345678\r\n8\r\n12345678\r\n0\r\n\r\n");
  EXPECT_THAT(reply, StartsWith("HTTP/1.1 413"));
  EXPECT_THAT(reply, HasSubstr("limit of 10 bytes"));
}

TEST_F(ServerTest, GarbageIs400AndTheServerKeepsServing) {
  StartServer();
  for (const std::string& garbage :
       {std::string("this is not http\r\n\r\n"), std::string("\x01\x02\x03\xff\r\n\r\n", 8),
        std::string("GET /x HTTP/1.1\r\nContent-Length: nope\r\n\r\n")}) {
    std::string reply = RawExchange(server_->port(), garbage);
    EXPECT_THAT(reply, StartsWith("HTTP/1.1 400")) << garbage;
    EXPECT_THAT(reply, HasSubstr("Connection: close")) << garbage;
    EXPECT_THAT(reply, HasSubstr("malformed HTTP request")) << garbage;
  }
  std::unique_ptr<Client> client = NewClient();
  absl::StatusOr<Response> response = client->Send("GET", "/headers");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 200);
}

TEST_F(ServerTest, BadPercentEncodingInPathIs400) {
  StartServer();
  std::unique_ptr<Client> client = NewClient();
  absl::StatusOr<Response> response = client->Send("GET", "/models/%zz");
  ASSERT_TRUE(response.ok());
  EXPECT_EQ(response->status, 400);
}

// A late answer is written on the answering thread when the socket takes
// it at once; one larger than the socket's buffer is finished by the io
// thread. Either way the bytes arrive whole and in order, and the connection
// goes on serving (or closes, when the answer asks to).
TEST_F(ServerTest, LateAnswersOfAnySizeArriveWhole) {
  StartServer();
  std::unique_ptr<Client> client = NewClient();
  for (size_t bytes : {size_t{0}, size_t{10}, size_t{100000}, size_t{16} << 20, size_t{7}}) {
    absl::StatusOr<Response> response = client->Send("GET", absl::StrCat("/later-big/", bytes));
    ASSERT_TRUE(response.ok()) << response.status();
    EXPECT_EQ(response->status, 200);
    EXPECT_EQ(response->body.size(), bytes);
    EXPECT_TRUE(response->body == PatternBody(bytes)) << "body of " << bytes << " bytes differs";
  }
  EXPECT_EQ(client->connections_opened(), 1);

  absl::StatusOr<Response> response = client->Send("GET", "/later-big/3000000?close=1");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_TRUE(response->body == PatternBody(3000000));
  response = client->Send("GET", "/later-big/5");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->body, PatternBody(5));
  EXPECT_EQ(client->connections_opened(), 2);
}

TEST_F(ServerTest, ManyConcurrentClients) {
  ServerOptions options;
  options.threads = 4;
  StartServer(options);
  constexpr int kThreads = 16;
  constexpr int kRequests = 50;
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::unique_ptr<Client> client = NewClient();
      if (!client) return;
      for (int i = 0; i < kRequests; ++i) {
        std::string body = absl::StrCat(R"({"t": )", t, R"(, "i": )", i, "}");
        // Mix immediate and deferred answers.
        absl::StatusOr<Response> response =
            i % 10 == 0 ? client->Send("GET", "/later/1") : client->Send("POST", "/echo", body);
        if (response.ok() && response->status == 200 &&
            (i % 10 == 0 ? response->body == "later" : response->body == body)) {
          ok.fetch_add(1);
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(ok.load(), kThreads * kRequests);
}

TEST_F(ServerTest, StopWhileARequestIsPendingDoesNotHangOrCrash) {
  StartServer();
  absl::StatusOr<Response> result;
  std::thread requester([&] {
    std::unique_ptr<Client> client = NewClient();
    result = client->Send("GET", "/hang");
  });
  parked_notification_.WaitForNotification();
  server_->Stop();
  requester.join();
  EXPECT_FALSE(result.ok()) << result->status << " " << result->body;  // closed under it
  // Answering after Stop() is dropped; so is answering after the Server is gone.
  server_.reset();
  absl::MutexLock lock(&mu_);
  std::move(parked_)(Response::Text(200, "too late"));
}

TEST_F(ServerTest, ResponderOutlivingTheServerIsDroppedSafely) {
  StartServer();
  std::thread requester([&] {
    std::unique_ptr<Client> client = NewClient();
    client->Send("GET", "/hang").IgnoreError();
  });
  parked_notification_.WaitForNotification();
  server_.reset();  // Stop() via the destructor
  requester.join();
  absl::MutexLock lock(&mu_);
  parked_ = Responder();  // dropping it now must not touch freed memory
}

TEST_F(ServerTest, BinarySafeBodies) {
  StartServer();
  std::unique_ptr<Client> client = NewClient();
  std::string body;
  for (int i = 0; i < 70000; ++i) body.push_back(static_cast<char>(i % 256));
  absl::StatusOr<Response> response =
      client->Send("POST", "/echo", body, {{"Content-Type", "application/octet-stream"}});
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->content_type, "application/octet-stream");
  EXPECT_EQ(response->body, body);
}

TEST_F(ServerTest, ConnectionCloseFromTheHandlerMakesTheClientReconnect) {
  StartServer();
  std::unique_ptr<Client> client = NewClient();
  absl::StatusOr<Response> bye = client->Send("GET", "/close");
  ASSERT_TRUE(bye.ok());
  EXPECT_EQ(bye->GetHeader("Connection"), "close");
  absl::StatusOr<Response> next = client->Send("GET", "/headers");
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(client->connections_opened(), 2);
}

TEST_F(ServerTest, ClientRetriesWhenTheServerClosedAnIdleConnection) {
  ServerOptions options;
  options.idle_timeout = 20 * kMillisecond;
  StartServer(options);
  std::unique_ptr<Client> client = NewClient();
  ASSERT_TRUE(client->Send("POST", "/echo", "{}").ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // let the server time it out
  absl::StatusOr<Response> response = client->Send("POST", "/echo", "{}");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->body, "{}");
  EXPECT_EQ(client->connections_opened(), 2);
}

TEST_F(ServerTest, IdleTimeoutClosesSilentAndStalledConnections) {
  ServerOptions options;
  options.idle_timeout = 20 * kMillisecond;
  StartServer(options);
  // RawExchange returns once the server closes; without the idle timer these
  // would wait forever (the test's own timeout would catch it).
  EXPECT_EQ(RawExchange(server_->port(), ""), "");
  EXPECT_EQ(RawExchange(server_->port(), "GET /headers HTTP/1.1\r\nX-Te"), "");
  EXPECT_EQ(RawExchange(server_->port(), "POST /echo HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc"),
            "");
}

// A peer that connects and sends nothing, or half a header, is closed after
// the header timeout, long before the idle timeout; a kept-alive connection
// waiting between requests is not, until its next header starts and stalls.
TEST_F(ServerTest, HeaderTimeoutClosesStalledHeadersOnly) {
  ServerOptions options;
  options.header_timeout = 200 * kMillisecond;  // idle_timeout stays 60 s
  StartServer(options);
  const Clock* clock = SteadyClock::Get();
  for (const std::string sent : {"", "GET /headers HTTP/1.1\r\nX-Te"}) {
    const Nanos start = clock->Now();
    int fd = Connect(server_->port());
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(SendAll(fd, sent));
    bool closed = false;
    EXPECT_EQ(ReadUntilClosed(fd, 20 * kSecond, &closed), "");
    close(fd);
    EXPECT_TRUE(closed) << "still open after 20 s, having sent '" << sent << "'";
    EXPECT_GE(clock->Now() - start, 200 * kMillisecond);
  }
  int fd = Connect(server_->port());
  ASSERT_GE(fd, 0);
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(SendAll(fd, "GET /empty HTTP/1.1\r\nHost: x\r\n\r\n"));
    EXPECT_THAT(ReadHead(fd), StartsWith("HTTP/1.1 204")) << "request " << i;
    std::this_thread::sleep_for(std::chrono::milliseconds(600));  // three header timeouts
  }
  const Nanos start = clock->Now();
  ASSERT_TRUE(SendAll(fd, "GET /emp"));
  bool closed = false;
  EXPECT_EQ(ReadUntilClosed(fd, 20 * kSecond, &closed), "");
  close(fd);
  EXPECT_TRUE(closed);
  EXPECT_GE(clock->Now() - start, 200 * kMillisecond);
}

// Past the cap a connection is answered 503 and closed at once; the
// connections admitted before it are still served.
TEST_F(ServerTest, ConnectionCapRefusesTheExcessAndKeepsServing) {
  ServerOptions options;
  options.max_connections = 4;
  StartServer(options);
  ASSERT_EQ(server_->max_connections(), 4);
  std::unique_ptr<Client> client = NewClient();
  ASSERT_TRUE(client->Send("GET", "/headers").ok());
  std::vector<int> half_open;
  for (int i = 0; i < 3; ++i) {
    half_open.push_back(Connect(server_->port()));
    ASSERT_GE(half_open.back(), 0);
    ASSERT_TRUE(SendAll(half_open.back(), "GET /head"));
  }
  ASSERT_TRUE(Eventually([&] { return server_->open_connections() == 4; }))
      << server_->open_connections();
  for (int i = 0; i < 50; ++i) {
    std::string reply = RawExchange(server_->port(), "");
    EXPECT_THAT(reply, StartsWith("HTTP/1.1 503")) << "connection " << i;
    EXPECT_THAT(reply, HasSubstr("limit of 4 open connections")) << "connection " << i;
    EXPECT_LE(server_->open_connections(), 4);
  }
  absl::StatusOr<Response> served = client->Send("GET", "/headers");
  ASSERT_TRUE(served.ok()) << served.status();
  EXPECT_EQ(served->status, 200);
  EXPECT_EQ(client->connections_opened(), 1);
  for (int fd : half_open) close(fd);
  ASSERT_TRUE(Eventually([&] { return server_->open_connections() == 1; }));
  absl::StatusOr<Response> after = NewClient()->Send("GET", "/headers");
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->status, 200);
}

// Every descriptor the server opens is close-on-exec: a child process (the
// controller starts workers and variant generators) inherits neither the
// listener nor a client's connection.
TEST_F(ServerTest, NoChildProcessInheritsTheListenerOrAConnection) {
  StartServer();
  std::unique_ptr<Client> client = NewClient();
  ASSERT_TRUE(client->Send("GET", "/headers").ok());  // the server keeps this one open
  std::vector<int> server_fds;  // bound to the server's port: the listener and that connection
  DIR* dir = opendir("/proc/self/fd");
  ASSERT_NE(dir, nullptr);
  while (dirent* entry = readdir(dir)) {
    const int fd = std::atoi(entry->d_name);
    sockaddr_in addr{};
    socklen_t length = sizeof(addr);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length) == 0 &&
        addr.sin_family == AF_INET && ntohs(addr.sin_port) == server_->port()) {
      server_fds.push_back(fd);
    }
  }
  closedir(dir);
  ASSERT_EQ(server_fds.size(), 2u);
  std::string script;
  for (int fd : server_fds) absl::StrAppend(&script, "[ -e /proc/self/fd/", fd, " ] && exit 1; ");
  script += "exit 0";
  std::string shell = "/bin/sh", flag = "-c";
  char* argv[] = {shell.data(), flag.data(), script.data(), nullptr};
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, argv[0], nullptr, nullptr, argv, environ), 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "a child process inherited one of the server's sockets";
}

// BeginDrain: new connections are refused and idle ones closed; a request
// in its handler is answered, one already sent behind it gets 503, and
// then nothing is left open.
TEST_F(ServerTest, DrainAnswersWhatItHoldsAndRefusesTheRest) {
  StartServer();
  std::unique_ptr<Client> idle = NewClient();
  ASSERT_TRUE(idle->Send("GET", "/headers").ok());
  int busy = Connect(server_->port());
  ASSERT_GE(busy, 0);
  ASSERT_TRUE(SendAll(
      busy, "GET /hang HTTP/1.1\r\nHost: x\r\n\r\nGET /headers HTTP/1.1\r\nHost: x\r\n\r\n"));
  parked_notification_.WaitForNotification();
  ASSERT_EQ(server_->open_connections(), 2);

  server_->BeginDrain();
  EXPECT_TRUE(Eventually([&] { return server_->open_connections() == 1; }))
      << "the idle connection stayed open";
  EXPECT_TRUE(Eventually([&] {
    const int fd = Connect(server_->port());
    if (fd >= 0) close(fd);
    return fd < 0;
  })) << "new connections are still accepted";
  EXPECT_FALSE(idle->Send("GET", "/headers").ok());
  {
    absl::MutexLock lock(&mu_);
    std::move(parked_)(Response::Text(200, "held"));
  }
  bool closed = false;
  const std::string replies = ReadUntilClosed(busy, 20 * kSecond, &closed);
  close(busy);
  EXPECT_TRUE(closed);
  EXPECT_THAT(replies, StartsWith("HTTP/1.1 200"));
  EXPECT_THAT(replies, HasSubstr("\r\n\r\nheld"));
  const size_t refused = replies.find("HTTP/1.1 503");
  ASSERT_NE(refused, std::string::npos) << replies;
  EXPECT_THAT(replies.substr(refused), HasSubstr("Connection: close"));
  EXPECT_THAT(replies.substr(refused), HasSubstr("shutting down"));
  EXPECT_TRUE(Eventually([&] { return server_->open_connections() == 0; }));
}

TEST_F(ServerTest, HugeHeaderIs431) {
  StartServer();
  std::string reply = RawExchange(
      server_->port(),
      absl::StrCat("GET /headers HTTP/1.1\r\nX-Big: ", std::string(100000, 'x'), "\r\n\r\n"));
  EXPECT_THAT(reply, StartsWith("HTTP/1.1 431"));
}

TEST_F(ServerTest, NoContentHasNoBody) {
  StartServer();
  std::unique_ptr<Client> client = NewClient();
  absl::StatusOr<Response> response = client->Send("GET", "/empty");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 204);
  EXPECT_EQ(response->body, "");
  ASSERT_TRUE(client->Send("GET", "/headers").ok());  // the stream stayed in sync
  EXPECT_EQ(client->connections_opened(), 1);
}

TEST_F(ServerTest, RawProtocolDetails) {
  StartServer();
  // Expect: 100-continue gets the interim answer before the final one.
  std::string expect = RawExchange(server_->port(),
                                   "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
                                   "Expect: 100-continue\r\nConnection: close\r\n\r\nhi");
  EXPECT_THAT(expect, StartsWith("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n"));
  EXPECT_TRUE(absl::EndsWith(expect, "\r\n\r\nhi")) << expect;

  // A chunked request body arrives decoded.
  std::string chunked = RawExchange(server_->port(),
                                    "POST /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                                    "Transfer-Encoding: chunked\r\n\r\n"
                                    "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n");
  EXPECT_TRUE(absl::EndsWith(chunked, "\r\n\r\nabcde")) << chunked;

  // Two requests on one connection are answered in order; HTTP/1.0 closes.
  std::string two = RawExchange(server_->port(),
                                "GET /headers HTTP/1.1\r\nX-Test: one\r\n\r\n"
                                "GET /headers HTTP/1.0\r\nX-Test: two\r\n\r\n");
  size_t first = two.find("\r\n\r\none");
  size_t second = two.find("\r\n\r\ntwo");
  ASSERT_NE(first, std::string::npos) << two;
  ASSERT_NE(second, std::string::npos) << two;
  EXPECT_LT(first, second);
  EXPECT_THAT(two.substr(first), HasSubstr("Connection: close"));

  // Two requests with bodies in one write: each is answered with its own
  // body, in order.
  std::string bodies = RawExchange(server_->port(),
                                   "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n"
                                   "first"
                                   "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 6\r\n"
                                   "Connection: close\r\n\r\nsecond");
  size_t one = bodies.find("\r\n\r\nfirst");
  size_t other = bodies.find("\r\n\r\nsecond");
  ASSERT_NE(one, std::string::npos) << bodies;
  ASSERT_NE(other, std::string::npos) << bodies;
  EXPECT_LT(one, other);
}

TEST_F(ServerTest, MultipartUpload) {
  StartServer();
  std::unique_ptr<Client> client = NewClient();
  std::string content_type;
  std::string body =
      EncodeMultipart({{"model", "m.onnx", "application/octet-stream", std::string(50000, '\0')},
                       {"meta", "", "application/json", "{}"}},
                      &content_type);
  absl::StatusOr<Response> response =
      client->Send("POST", "/upload", body, {{"Content-Type", content_type}});
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(nlohmann::json::parse(response->body),
            nlohmann::json::parse(R"({"model": 50000, "meta": 2})"));

  absl::StatusOr<Response> bad = client->Send(
      "POST", "/upload", "junk", {{"Content-Type", "multipart/form-data; boundary=zz"}});
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->status, 400);
}

TEST_F(ServerTest, ClientTimesOut) {
  StartServer();
  std::unique_ptr<Client> client = NewClient(100 * kMillisecond);
  absl::StatusOr<Response> response = client->Send("GET", "/hang");
  EXPECT_EQ(response.status().code(), absl::StatusCode::kDeadlineExceeded) << response.status();
}

TEST_F(ServerTest, CreateReportsBadConfiguration) {
  StartServer();
  ServerOptions taken;
  taken.address = absl::StrCat("127.0.0.1:", server_->port());
  absl::StatusOr<std::unique_ptr<Server>> second = Server::Create(taken, MakeRouter());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable) << second.status();

  Router bad_router;
  bad_router.Add("GET", "no-slash", [](Request&&, const PathParams&, Responder) {});
  ServerOptions any;
  any.address = "127.0.0.1:0";
  EXPECT_EQ(Server::Create(any, std::move(bad_router)).status().code(),
            absl::StatusCode::kInvalidArgument);

  for (const char* address : {"127.0.0.1", "127.0.0.1:99999", "::1:80", "[::1"}) {
    ServerOptions options;
    options.address = address;
    EXPECT_EQ(Server::Create(options, Router()).status().code(), absl::StatusCode::kInvalidArgument)
        << address;
  }
  ServerOptions zero_threads;
  zero_threads.address = "127.0.0.1:0";
  zero_threads.threads = 0;
  EXPECT_FALSE(Server::Create(zero_threads, Router()).ok());
  ServerOptions no_connections;
  no_connections.address = "127.0.0.1:0";
  no_connections.max_connections = 0;
  EXPECT_EQ(Server::Create(no_connections, Router()).status().code(),
            absl::StatusCode::kInvalidArgument);
  ServerOptions no_header_time;
  no_header_time.address = "127.0.0.1:0";
  no_header_time.header_timeout = 0;
  EXPECT_EQ(Server::Create(no_header_time, Router()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(ServerTest, ServerNeverStartedStopsCleanly) {
  ServerOptions options;
  options.address = "127.0.0.1:0";
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Create(options, Router());
  ASSERT_TRUE(server.ok());
  (*server)->Stop();
  (*server)->Stop();
  (*server)->Start();  // after Stop: does nothing
}

TEST(ClientTest, ReportsTransportErrors) {
  EXPECT_EQ(Client::Create({"https://example.com", kSecond}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Client::Create({"http://:80", kSecond}).status().code(),
            absl::StatusCode::kInvalidArgument);

  // Find a port nobody listens on: bind one, then close it.
  int port = 0;
  {
    ServerOptions options;
    options.address = "127.0.0.1:0";
    absl::StatusOr<std::unique_ptr<Server>> server = Server::Create(options, Router());
    ASSERT_TRUE(server.ok());
    port = (*server)->port();
  }
  absl::StatusOr<std::unique_ptr<Client>> client =
      Client::Create({absl::StrCat("http://127.0.0.1:", port), 5 * kSecond});
  ASSERT_TRUE(client.ok());
  absl::StatusOr<Response> response = (*client)->Send("GET", "/");
  EXPECT_EQ(response.status().code(), absl::StatusCode::kUnavailable) << response.status();
  EXPECT_EQ((*client)->Send("GET", "no-slash").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*client)->Send("GET", "/x", "", {{"X-Bad", "a\r\nInjected: 1"}}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace maitre::http
