// The open and closed loops against the fake HTTP server. Time is a
// ManualClock and the server holds its answers until told, so "the server
// is slow" and "the schedule says now" are both exact; real time only
// bounds how long a test waits for something that must happen.
#include "loadgen/driver.h"

#include <thread>

#include "gtest/gtest.h"
#include "loadgen/report.h"
#include "loadgen/testing/fake_servers.h"

namespace maitre::loadgen {
namespace {

using testing::FakeHttpInferServer;

constexpr Nanos kStart = 5 * kSecond;

class DriverTest : public ::testing::Test {
 protected:
  void SetUp() override { MakeServer(nullptr); }

  void MakeServer(FakeHttpInferServer::AnswerFn answer) {
    auto server = FakeHttpInferServer::Create(nlohmann::json::object(), std::move(answer));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    HttpTransportOptions options;
    options.address = server_->address();
    options.clock = &clock_;
    options.timeout = 3600 * kSecond;  // this clock only moves when told
    Target target;
    target.model = "m";
    Tensor row;
    row.name = "x";
    row.dtype = DataType::kFp32;
    row.shape = {1, 2};
    row.data.assign(8, '\0');
    auto transport = CreateHttpTransport(options, target, {{row}});
    ASSERT_TRUE(transport.ok()) << transport.status();
    transport_ = *std::move(transport);
  }

  void TearDown() override {
    if (runner_.joinable()) runner_.join();
    if (transport_) transport_->Shutdown();
  }

  DriverOptions Options(Nanos duration, Nanos drain = 10 * kSecond) {
    DriverOptions options;
    options.duration = duration;
    options.drain_timeout = drain;
    options.clock = &clock_;
    return options;
  }

  std::unique_ptr<ArrivalSource> Uniform(double qps, Nanos duration) {
    GeneratorSpec spec;
    spec.kind = GeneratorKind::kUniform;
    spec.rate_qps = qps;
    spec.duration = duration;
    auto source = CreateGenerator(spec);
    EXPECT_TRUE(source.ok());
    return *std::move(source);
  }

  ManualClock clock_{kStart};
  std::unique_ptr<FakeHttpInferServer> server_;
  std::unique_ptr<Transport> transport_;
  std::thread runner_;
  RunResult result_;
};

TEST_F(DriverTest, OpenLoopSendsOnScheduleWhileAnswersWait) {
  server_->gate().SetHold(true);
  auto arrivals = Uniform(100, 100 * kMillisecond);  // at 0, 10, ..., 90 ms
  runner_ = std::thread([&] {
    result_ = RunOpenLoop(*transport_, *arrivals, Options(100 * kMillisecond));
  });
  for (int k = 0; k < 10; ++k) {
    // Request k goes out when the clock reaches its time, whatever is still
    // unanswered.
    ASSERT_TRUE(server_->gate().WaitForReceived(k + 1)) << "request " << k;
    EXPECT_EQ(server_->gate().received(), k + 1) << "nothing is sent early";
    EXPECT_EQ(server_->gate().held(), k + 1);
    clock_.Advance(10 * kMillisecond);
  }
  clock_.Set(kStart + kSecond);  // every answer comes at t = 1 s
  server_->gate().ReleaseAll();
  runner_.join();

  ASSERT_EQ(result_.records.size(), 10u);
  EXPECT_EQ(result_.start, kStart);
  EXPECT_EQ(result_.max_in_flight, 10);
  EXPECT_EQ(server_->gate().max_in_flight(), 10);
  for (int k = 0; k < 10; ++k) {
    const RequestRecord& r = result_.records[k];
    EXPECT_TRUE(r.ok);
    EXPECT_EQ(r.scheduled, kStart + k * 10 * kMillisecond);
    EXPECT_EQ(r.sent, r.scheduled);
    EXPECT_EQ(r.done, kStart + kSecond);
    EXPECT_EQ(r.server.total_us, 400);
  }
  RunDescription description;
  description.model = "m";
  description.slo_ms = 950;
  BenchReport report = BuildReport(result_, description);
  // Latency counts from the schedule: 1000 ms for the first, 910 for the
  // last; the first five exceed 950 ms... and 950 itself does not.
  EXPECT_DOUBLE_EQ(report.latency_ms.max, 1000);
  EXPECT_DOUBLE_EQ(report.latency_ms.p50, 955);
  EXPECT_EQ(report.slo_violations, 5);
  EXPECT_DOUBLE_EQ(report.client_lag_ms.max, 0);
}

TEST_F(DriverTest, OpenLoopChargesClientLagToLatency) {
  server_->gate().SetHold(true);
  auto arrivals = Uniform(100, 50 * kMillisecond);  // at 0, 10, ..., 40 ms
  runner_ = std::thread([&] {
    result_ = RunOpenLoop(*transport_, *arrivals, Options(50 * kMillisecond));
  });
  ASSERT_TRUE(server_->gate().WaitForReceived(1));
  // The clock jumps past every arrival at once: the rest go out late, all
  // at 45 ms, and their lag shows.
  clock_.Advance(45 * kMillisecond);
  ASSERT_TRUE(server_->gate().WaitForReceived(5));
  clock_.Advance(5 * kMillisecond);
  server_->gate().ReleaseAll();
  runner_.join();
  ASSERT_EQ(result_.records.size(), 5u);
  for (int k = 1; k < 5; ++k) {
    EXPECT_EQ(result_.records[k].sent, kStart + 45 * kMillisecond);
    EXPECT_EQ(result_.records[k].sent - result_.records[k].scheduled,
              (45 - 10 * k) * kMillisecond);
    EXPECT_EQ(result_.records[k].done - result_.records[k].scheduled,
              (50 - 10 * k) * kMillisecond);
  }
}

TEST_F(DriverTest, ClosedLoopKeepsExactlyNInFlight) {
  server_->gate().SetHold(true);
  runner_ = std::thread([&] { result_ = RunClosedLoop(*transport_, 4, Options(kSecond)); });
  ASSERT_TRUE(server_->gate().WaitForHeld(4));
  for (int i = 1; i <= 6; ++i) {
    server_->gate().ReleaseOne();
    // Each answer brings exactly one new request.
    ASSERT_TRUE(server_->gate().WaitForReceived(4 + i));
    ASSERT_TRUE(server_->gate().WaitForHeld(4));
    EXPECT_EQ(server_->gate().received(), 4 + i);
    EXPECT_EQ(server_->gate().in_flight(), 4);
  }
  clock_.Advance(kSecond);  // the load phase is over: answers retire workers
  server_->gate().ReleaseAll();
  runner_.join();
  EXPECT_EQ(result_.records.size(), 10u);
  EXPECT_EQ(result_.max_in_flight, 4);
  EXPECT_EQ(server_->gate().max_in_flight(), 4);
  for (const RequestRecord& r : result_.records) EXPECT_TRUE(r.ok);
}

TEST_F(DriverTest, ErrorsAreCountedByStatus) {
  MakeServer([](const testing::ReceivedHttpRequest& request, int64_t index) {
    if (index % 3 == 1) return http::Response::Error(503, "busy");
    if (index % 3 == 2) return http::Response::Error(429, "slow down");
    return FakeHttpInferServer::DefaultAnswer(request, index);
  });
  auto arrivals = Uniform(90, 100 * kMillisecond);  // nine arrivals
  runner_ = std::thread([&] {
    result_ = RunOpenLoop(*transport_, *arrivals, Options(100 * kMillisecond));
  });
  ASSERT_TRUE(server_->gate().WaitForReceived(1));
  clock_.Advance(100 * kMillisecond);
  runner_.join();
  RunDescription description;
  description.model = "m";
  BenchReport report = BuildReport(result_, description);
  EXPECT_EQ(report.started, 9);
  EXPECT_EQ(report.ok, 3);
  EXPECT_EQ(report.failed, 6);
  ASSERT_EQ(report.errors.size(), 2u);
  for (const ErrorCount& e : report.errors) {
    EXPECT_EQ(e.count, 3) << e.kind;
    if (e.kind == "http 503") {
      EXPECT_EQ(e.example, "busy");
    } else {
      EXPECT_EQ(e.kind, "http 429");
      EXPECT_EQ(e.example, "slow down");
    }
  }
}

TEST_F(DriverTest, AnswersMissingAfterTheDrainAreUnfinished) {
  server_->gate().SetHold(true);
  auto arrivals = Uniform(10, 100 * kMillisecond);  // one arrival, at 0
  runner_ = std::thread([&] {
    result_ = RunOpenLoop(*transport_, *arrivals, Options(100 * kMillisecond, kSecond));
  });
  ASSERT_TRUE(server_->gate().WaitForHeld(1));
  clock_.Advance(100 * kMillisecond + kSecond);
  runner_.join();
  ASSERT_EQ(result_.records.size(), 1u);
  EXPECT_EQ(result_.records[0].done, 0);
  EXPECT_EQ(result_.end, kStart + 1100 * kMillisecond);
  transport_->Shutdown();
  server_->gate().ReleaseAll();  // a late answer changes nothing
  RunDescription description;
  description.model = "m";
  description.slo_ms = 10;
  BenchReport report = BuildReport(result_, description);
  EXPECT_EQ(report.unfinished, 1);
  EXPECT_EQ(report.slo_violations, 1);
  ASSERT_EQ(report.errors.size(), 1u);
  EXPECT_EQ(report.errors[0].kind, "unfinished");
}

// Connections refused at once: each failure starts the worker's next
// request, which must loop through the io thread, not recurse.
TEST_F(DriverTest, ClosedLoopSurvivesTheServerGoingAway) {
  server_.reset();
  DriverOptions options = Options(300 * kMillisecond);
  options.clock = nullptr;  // real time, so the run ends by itself
  result_ = RunClosedLoop(*transport_, 2, options);
  RunDescription description;
  description.model = "m";
  BenchReport report = BuildReport(result_, description);
  EXPECT_GT(report.failed, 0);
  EXPECT_EQ(report.ok, 0);
  ASSERT_EQ(report.errors.size(), 1u);
  EXPECT_EQ(report.errors[0].kind, "connection");
}

TEST_F(DriverTest, ReportsProgress) {
  auto arrivals = Uniform(100, 3 * kSecond);
  std::vector<Progress> seen;
  DriverOptions options = Options(3 * kSecond);
  options.progress = [&seen](const Progress& p) { seen.push_back(p); };
  runner_ = std::thread([&] { result_ = RunOpenLoop(*transport_, *arrivals, options); });
  for (int i = 0; i < 300; ++i) {
    ASSERT_TRUE(server_->gate().WaitForReceived(i + 1));
    clock_.Advance(10 * kMillisecond);
  }
  runner_.join();
  EXPECT_EQ(result_.records.size(), 300u);
  ASSERT_GE(seen.size(), 2u);
  EXPECT_GE(seen.back().elapsed, 2 * kSecond);
  EXPECT_GT(seen.back().started, seen.front().started);
}

}  // namespace
}  // namespace maitre::loadgen
