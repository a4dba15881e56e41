#include "loadgen/async_http_client.h"

#include <atomic>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "loadgen/codec.h"
#include "loadgen/testing/fake_servers.h"

namespace maitre::loadgen {
namespace {

using testing::FakeHttpInferServer;

// Collects callback results; waits in real time, but only as a bound on a
// hang, never as a measurement.
class Results {
 public:
  AsyncHttpCallback Callback() {
    return [this](AsyncHttpResult r) {
      absl::MutexLock lock(&mu_);
      results_.push_back(std::move(r));
    };
  }
  bool WaitFor(size_t n) {
    absl::MutexLock lock(&mu_);
    auto enough = [this, n]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return results_.size() >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(10));
  }
  std::vector<AsyncHttpResult> Take() {
    absl::MutexLock lock(&mu_);
    return std::move(results_);
  }
  size_t size() {
    absl::MutexLock lock(&mu_);
    return results_.size();
  }

 private:
  absl::Mutex mu_;
  std::vector<AsyncHttpResult> results_ ABSL_GUARDED_BY(mu_);
};

class AsyncHttpClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = FakeHttpInferServer::Create(nlohmann::json::object());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }

  std::unique_ptr<AsyncHttpClient> MakeClient(int max_connections = 1024,
                                              const Clock* clock = nullptr,
                                              Nanos timeout = 30 * kSecond) {
    AsyncHttpClientOptions options;
    options.address = server_->address();
    options.max_connections = max_connections;
    options.clock = clock;
    options.timeout = timeout;
    auto client = AsyncHttpClient::Create(options);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }

  std::shared_ptr<const std::string> Wire(const std::string& body = "{}") {
    return std::make_shared<const std::string>(SerializeHttpRequest(
        "POST", server_->address(), "/v2/models/m/infer", {{"Content-Type", "application/json"}},
        body));
  }

  std::unique_ptr<FakeHttpInferServer> server_;
};

TEST_F(AsyncHttpClientTest, KeepsManyRequestsInFlightAtOnce) {
  server_->gate().SetHold(true);
  auto client = MakeClient();
  Results results;
  for (int i = 0; i < 20; ++i) client->Send(Wire(), results.Callback());
  ASSERT_TRUE(server_->gate().WaitForHeld(20)) << "sending must not wait for answers";
  EXPECT_EQ(results.size(), 0u);
  EXPECT_EQ(client->connections_opened(), 20);
  server_->gate().ReleaseAll();
  ASSERT_TRUE(results.WaitFor(20));
  for (const AsyncHttpResult& r : results.Take()) {
    ASSERT_TRUE(r.transport.ok()) << r.transport;
    EXPECT_EQ(r.response.status, 200);
    EXPECT_NE(r.response.body.find("queue_us"), std::string::npos);
    EXPECT_LE(r.sent_at, r.done_at);
  }
  EXPECT_EQ(server_->gate().max_in_flight(), 20);
}

TEST_F(AsyncHttpClientTest, ReusesKeepAliveConnections) {
  auto client = MakeClient();
  Results results;
  for (size_t i = 1; i <= 10; ++i) {
    client->Send(Wire(), results.Callback());
    ASSERT_TRUE(results.WaitFor(i));
  }
  EXPECT_EQ(client->connections_opened(), 1);
  EXPECT_EQ(server_->requests().size(), 10u);
}

TEST_F(AsyncHttpClientTest, QueuesBeyondMaxConnections) {
  server_->gate().SetHold(true);
  auto client = MakeClient(/*max_connections=*/2);
  Results results;
  for (int i = 0; i < 6; ++i) client->Send(Wire(), results.Callback());
  ASSERT_TRUE(server_->gate().WaitForHeld(2));
  for (int answered = 1; answered <= 6; ++answered) {
    EXPECT_LE(server_->gate().in_flight(), 2);
    server_->gate().ReleaseOne();
    ASSERT_TRUE(results.WaitFor(answered));
    if (answered <= 4) ASSERT_TRUE(server_->gate().WaitForHeld(2));
  }
  EXPECT_EQ(server_->gate().max_in_flight(), 2);
  EXPECT_EQ(client->connections_opened(), 2);
}

TEST_F(AsyncHttpClientTest, TimesOutByItsClock) {
  ManualClock clock(kSecond);
  server_->gate().SetHold(true);
  auto client = MakeClient(8, &clock, /*timeout=*/100 * kMillisecond);
  Results results;
  client->Send(Wire(), results.Callback());
  ASSERT_TRUE(server_->gate().WaitForHeld(1));
  EXPECT_EQ(results.size(), 0u);
  clock.Advance(101 * kMillisecond);
  ASSERT_TRUE(results.WaitFor(1));
  AsyncHttpResult r = std::move(results.Take()[0]);
  EXPECT_EQ(r.transport.code(), absl::StatusCode::kDeadlineExceeded) << r.transport;
  EXPECT_EQ(r.sent_at, kSecond);
  EXPECT_EQ(r.done_at, kSecond + 101 * kMillisecond);
}

TEST_F(AsyncHttpClientTest, ReportsARefusedConnection) {
  const std::string address = server_->address();
  server_.reset();  // nothing listens there any more
  AsyncHttpClientOptions options;
  options.address = address;
  auto client = AsyncHttpClient::Create(options);
  ASSERT_TRUE(client.ok());
  Results results;
  (*client)->Send(std::make_shared<const std::string>("GET / HTTP/1.1\r\n\r\n"),
                  results.Callback());
  ASSERT_TRUE(results.WaitFor(1));
  EXPECT_EQ(results.Take()[0].transport.code(), absl::StatusCode::kUnavailable);
}

TEST_F(AsyncHttpClientTest, ShutdownAbandonsWhatIsInFlight) {
  server_->gate().SetHold(true);
  auto client = MakeClient();
  std::atomic<int> called{0};
  for (int i = 0; i < 3; ++i) client->Send(Wire(), [&called](AsyncHttpResult) { ++called; });
  ASSERT_TRUE(server_->gate().WaitForHeld(3));
  client->Shutdown();
  client->Send(Wire(), [&called](AsyncHttpResult) { ++called; });  // ignored
  server_->gate().ReleaseAll();
  client.reset();
  EXPECT_EQ(called.load(), 0);
}

TEST(AsyncHttpClientOptionsTest, RefusesNonsense) {
  AsyncHttpClientOptions options;
  options.io_threads = 0;
  EXPECT_FALSE(AsyncHttpClient::Create(options).ok());
  options = {};
  options.timeout = 0;
  EXPECT_FALSE(AsyncHttpClient::Create(options).ok());
  options = {};
  options.address = "no-port-here:x";
  EXPECT_FALSE(AsyncHttpClient::Create(options).ok());
}

}  // namespace
}  // namespace maitre::loadgen
