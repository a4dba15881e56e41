// The gRPC transport against a fake inference.GRPCInferenceService.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <set>
#include <thread>

#include "gtest/gtest.h"
#include "loadgen/driver.h"
#include "loadgen/report.h"
#include "loadgen/testing/fake_servers.h"
#include "loadgen/transport.h"

namespace maitre::loadgen {
namespace {

using testing::FakeGrpcInferServer;

Tensor Row(float value) {
  Tensor t;
  t.name = "input";
  t.dtype = DataType::kFp32;
  t.shape = {1, 2};
  float data[2] = {value, -value};
  t.data.assign(reinterpret_cast<const char*>(data), sizeof data);
  return t;
}

class GrpcTransportTest : public ::testing::Test {
 protected:
  void Start(FakeGrpcInferServer::AnswerFn answer, const Target& target, int channels = 1) {
    auto server = FakeGrpcInferServer::Create(std::move(answer));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    GrpcTransportOptions options;
    options.address = server_->address();
    options.channels = channels;
    options.clock = &clock_;
    options.timeout = 3600 * kSecond;
    auto transport = CreateGrpcTransport(options, target, {{Row(1)}, {Row(2)}, {Row(3)}});
    ASSERT_TRUE(transport.ok()) << transport.status();
    transport_ = *std::move(transport);
  }

  void TearDown() override {
    if (runner_.joinable()) runner_.join();
    if (transport_) transport_->Shutdown();
  }

  DriverOptions Options(Nanos duration) {
    DriverOptions options;
    options.duration = duration;
    options.drain_timeout = 10 * kSecond;
    options.clock = &clock_;
    return options;
  }

  ManualClock clock_{kSecond};
  std::unique_ptr<FakeGrpcInferServer> server_;
  std::unique_ptr<Transport> transport_;
  std::thread runner_;
  RunResult result_;
};

TEST_F(GrpcTransportTest, ClosedLoopKeepsExactlyNInFlight) {
  Target target;
  target.model = "fmnist-mlp";
  Start(nullptr, target);
  server_->gate().SetHold(true);
  runner_ = std::thread([&] { result_ = RunClosedLoop(*transport_, 3, Options(kSecond)); });
  ASSERT_TRUE(server_->gate().WaitForHeld(3));
  for (int i = 1; i <= 5; ++i) {
    server_->gate().ReleaseOne();
    ASSERT_TRUE(server_->gate().WaitForReceived(3 + i));
    ASSERT_TRUE(server_->gate().WaitForHeld(3));
    EXPECT_EQ(server_->gate().in_flight(), 3);
  }
  clock_.Advance(kSecond);
  server_->gate().ReleaseAll();
  runner_.join();
  EXPECT_EQ(result_.records.size(), 8u);
  EXPECT_EQ(server_->gate().max_in_flight(), 3);
  for (const RequestRecord& r : result_.records) {
    EXPECT_TRUE(r.ok);
    EXPECT_EQ(r.server.queue_us, 100);
    EXPECT_EQ(r.server.compute_us, 200);
    EXPECT_EQ(r.server.total_us, 400);
  }
  // Payloads cycle through the rows, as raw little-endian bytes.
  auto requests = server_->requests();
  ASSERT_EQ(requests.size(), 8u);
  std::vector<float> firsts;
  for (const auto& request : requests) {
    EXPECT_EQ(request.model_name(), "fmnist-mlp");
    EXPECT_EQ(request.parameters().count("maitre_app"), 0u);
    ASSERT_EQ(request.inputs_size(), 1);
    EXPECT_EQ(request.inputs(0).name(), "input");
    EXPECT_EQ(request.inputs(0).datatype(), "FP32");
    EXPECT_EQ(std::vector<int64_t>(request.inputs(0).shape().begin(),
                                   request.inputs(0).shape().end()),
              (std::vector<int64_t>{1, 2}));
    ASSERT_EQ(request.raw_input_contents_size(), 1);
    ASSERT_EQ(request.raw_input_contents(0).size(), 8u);
    float v[2];
    std::memcpy(v, request.raw_input_contents(0).data(), 8);
    EXPECT_EQ(v[1], -v[0]);
    firsts.push_back(v[0]);
  }
  std::sort(firsts.begin(), firsts.end());
  EXPECT_EQ(firsts, (std::vector<float>{1, 1, 1, 2, 2, 2, 3, 3}));
}

TEST_F(GrpcTransportTest, CallsTakeTheChannelsInTurnEachItsOwnConnection) {
  Target target;
  target.model = "fmnist-mlp";
  Start(nullptr, target, /*channels=*/3);
  EXPECT_EQ(transport_->connections_opened(), 3);
  runner_ = std::thread([&] { result_ = RunClosedLoop(*transport_, 1, Options(kSecond)); });
  ASSERT_TRUE(server_->gate().WaitForReceived(6));
  clock_.Advance(kSecond);
  runner_.join();
  // One at a time, so the n-th call went on channel n mod 3: the peers
  // (client ports) repeat with period 3 and are three different ones.
  std::vector<std::string> peers = server_->peers();
  ASSERT_GE(peers.size(), 6u);
  EXPECT_EQ(std::set<std::string>(peers.begin(), peers.end()).size(), 3u);
  for (size_t i = 3; i < peers.size(); ++i) EXPECT_EQ(peers[i], peers[i - 3]) << i;
}

TEST(GrpcTransportCreateTest, RefusesFewerThanOneChannel) {
  GrpcTransportOptions options;
  options.channels = 0;
  Target target;
  target.model = "m";
  auto transport = CreateGrpcTransport(options, target, {{Row(1)}});
  EXPECT_EQ(transport.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(GrpcTransportTest, AppQueriesCarryTheirRequirements) {
  Target target;
  target.app = "fmnist";
  target.latency_ms = 25;
  target.min_accuracy = 0.85;
  Start(nullptr, target);
  GeneratorSpec spec;
  spec.kind = GeneratorKind::kUniform;
  spec.rate_qps = 20;
  spec.duration = 100 * kMillisecond;  // arrivals at 0 and 50 ms
  auto arrivals = CreateGenerator(spec);
  ASSERT_TRUE(arrivals.ok());
  runner_ = std::thread(
      [&] { result_ = RunOpenLoop(*transport_, **arrivals, Options(100 * kMillisecond)); });
  ASSERT_TRUE(server_->gate().WaitForReceived(1));
  clock_.Advance(100 * kMillisecond);
  runner_.join();
  ASSERT_EQ(result_.records.size(), 2u);
  for (const auto& request : server_->requests()) {
    EXPECT_EQ(request.model_name(), "") << "the server picks the model";
    EXPECT_EQ(request.parameters().at("maitre_app").string_param(), "fmnist");
    EXPECT_EQ(request.parameters().at("latency_ms").double_param(), 25);
    EXPECT_EQ(request.parameters().at("min_accuracy").double_param(), 0.85);
    EXPECT_EQ(request.parameters().count("max_cost"), 0u);
  }
}

TEST_F(GrpcTransportTest, ErrorsAreCountedByCode) {
  Target target;
  target.model = "m";
  Start(
      [](const inference::ModelInferRequest&, inference::ModelInferResponse*, int64_t index) {
        FakeGrpcInferServer::Answer a;
        if (index % 2 == 1) {
          a.code = grpc::StatusCode::UNAVAILABLE;
          a.message = "no worker";
        }
        return a;
      },
      target);
  runner_ = std::thread([&] { result_ = RunClosedLoop(*transport_, 1, Options(kSecond)); });
  ASSERT_TRUE(server_->gate().WaitForReceived(6));
  clock_.Advance(kSecond);
  runner_.join();
  RunDescription description;
  description.model = "m";
  BenchReport report = BuildReport(result_, description);
  ASSERT_GE(report.started, 6);
  EXPECT_EQ(report.ok, (report.started + 1) / 2);
  ASSERT_EQ(report.errors.size(), 1u);
  EXPECT_EQ(report.errors[0].kind, "grpc UNAVAILABLE");
  EXPECT_EQ(report.errors[0].count, report.started / 2);
  EXPECT_EQ(report.errors[0].example, "no worker");
}

// Calls to a vanished server fail at once, and each failure starts the
// worker's next call: that must loop, not recurse, for the whole run.
TEST_F(GrpcTransportTest, ClosedLoopSurvivesTheServerGoingAway) {
  Target target;
  target.model = "m";
  Start(nullptr, target);
  server_.reset();
  DriverOptions options = Options(300 * kMillisecond);
  options.clock = nullptr;  // real time, so the run ends by itself
  result_ = RunClosedLoop(*transport_, 2, options);
  RunDescription description;
  description.model = "m";
  BenchReport report = BuildReport(result_, description);
  EXPECT_GT(report.failed, 0);
  EXPECT_EQ(report.ok, 0);
  EXPECT_EQ(report.unfinished, 0);
  for (const ErrorCount& e : report.errors) EXPECT_EQ(e.kind, "grpc UNAVAILABLE") << e.example;
}

TEST(GrpcTransportCreateTest, RefusesAnAddressWhereNothingListens) {
  std::string address;
  {
    auto server = FakeGrpcInferServer::Create();
    ASSERT_TRUE(server.ok());
    address = (*server)->address();
  }
  GrpcTransportOptions options;
  options.address = address;
  options.connect_timeout = 200 * kMillisecond;
  Target target;
  target.model = "m";
  auto transport = CreateGrpcTransport(options, target, {{Row(1)}});
  EXPECT_EQ(transport.status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(GrpcTransportTest, ShutdownCancelsWhatIsInFlight) {
  Target target;
  target.model = "m";
  Start(nullptr, target);
  server_->gate().SetHold(true);
  std::atomic<int> called{0};
  for (int i = 0; i < 3; ++i) transport_->Start(i, [&called](CallResult) { ++called; });
  ASSERT_TRUE(server_->gate().WaitForHeld(3));
  transport_->Shutdown();
  transport_->Start(0, [&called](CallResult) { ++called; });  // ignored
  EXPECT_EQ(called.load(), 0);
}

}  // namespace
}  // namespace maitre::loadgen
