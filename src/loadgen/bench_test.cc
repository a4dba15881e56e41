// RunBench end to end against the fake servers: metadata, inputs, every
// protocol, and the checks that stop a run before it starts. These run in
// real time for a fraction of a second and assert only on structure.
#include "loadgen/bench.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "loadgen/testing/fake_servers.h"
#include "core/npz.h"

namespace maitre::loadgen {
namespace {

using ::testing::HasSubstr;
using testing::FakeHttpInferServer;
using testing::ReceivedHttpRequest;
using json = nlohmann::json;

json Metadata() {
  return json::parse(R"({"name":"mlp","versions":["opencv"],"platform":"onnx",
      "inputs":[{"name":"input","datatype":"FP32","shape":[-1,4]}],
      "outputs":[{"name":"logits","datatype":"FP32","shape":[-1,2]}]})");
}

// A file under the test's temporary directory, removed at the end.
class TempFile {
 public:
  TempFile(const std::string& name, const std::string& contents)
      : path_(absl::StrCat(::testing::TempDir(), "/", getpid(), "_", name)) {
    std::ofstream(path_, std::ios::binary) << contents;
  }
  ~TempFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

Tensor Inputs(int64_t rows) {
  Tensor t;
  t.name = "inputs";
  t.dtype = DataType::kFp32;
  t.shape = {rows, 4};
  std::vector<float> v(rows * 4);
  for (int64_t r = 0; r < rows; ++r) {
    for (int c = 0; c < 4; ++c) v[r * 4 + c] = static_cast<float>(10 * r + c);
  }
  t.data.assign(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
  return t;
}

// The binary-data extension, decoded from its description (not from the
// client's encoder): returns the first input's floats.
std::vector<float> DecodeBinaryInput(const ReceivedHttpRequest& r, json* header) {
  const size_t json_length = std::stoul(r.header_length);
  *header = json::parse(r.body.substr(0, json_length));
  const json& input = (*header)["inputs"][0];
  const size_t size = input["parameters"]["binary_data_size"];
  std::vector<float> out(size / sizeof(float));
  std::memcpy(out.data(), r.body.data() + json_length, size);
  return out;
}

// Answers as a server using the extension would: a JSON header naming the
// binary output, then the output's bytes.
http::Response BinaryAnswer() {
  std::string header =
      R"({"model_name":"mlp","parameters":{"queue_us":30,"compute_us":70,"total_us":150},)"
      R"("outputs":[{"name":"logits","datatype":"FP32","shape":[1,2],)"
      R"("parameters":{"binary_data_size":8}}]})";
  float logits[2] = {0.5f, 0.5f};
  http::Response response;
  response.content_type = "application/octet-stream";
  response.headers.push_back({"Inference-Header-Content-Length", absl::StrCat(header.size())});
  response.body = header + std::string(reinterpret_cast<const char*>(logits), sizeof logits);
  return response;
}

BenchOptions ShortRun(const std::string& url) {
  BenchOptions o;
  o.model = "mlp";
  o.server = url;
  o.duration_s = 0.2;
  o.timeout_s = 5;
  return o;
}

TEST(RunBenchTest, BinaryRequestsCarryTheFileRowsInTurn) {
  auto server = FakeHttpInferServer::Create(
      Metadata(), [](const ReceivedHttpRequest&, int64_t) { return BinaryAnswer(); });
  ASSERT_TRUE(server.ok()) << server.status();
  TempFile npz("rows.npz", WriteNpz({Inputs(3)}));
  BenchOptions o = ShortRun((*server)->url());
  o.protocol = Protocol::kHttpBinary;
  o.concurrency = 2;
  o.input_file = npz.path();
  auto report = RunBench(o);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_GT(report->ok, 0) << FormatReport(*report);
  EXPECT_EQ(report->failed + report->unfinished, 0) << FormatReport(*report);
  EXPECT_EQ(report->run.protocol, "http-binary");
  EXPECT_DOUBLE_EQ(report->queue_ms_p50, 0.03);
  EXPECT_DOUBLE_EQ(report->compute_ms_p50, 0.07);
  EXPECT_DOUBLE_EQ(report->total_ms_p50, 0.15);

  std::set<float> firsts;
  for (const ReceivedHttpRequest& r : (*server)->requests()) {
    EXPECT_EQ(r.path, "/v2/models/mlp/infer");
    EXPECT_EQ(r.content_type, "application/octet-stream");
    json header;
    std::vector<float> v = DecodeBinaryInput(r, &header);
    const json& input = header["inputs"][0];
    EXPECT_EQ(input["name"], "input") << "the model's input name, not the file's";
    EXPECT_EQ(input["shape"], json({1, 4}));
    EXPECT_EQ(header["parameters"]["binary_data_output"], true);
    ASSERT_EQ(v.size(), 4u);
    // Row r holds 10r, 10r+1, 10r+2, 10r+3.
    EXPECT_EQ(std::fmod(v[0], 10.0f), 0.0f);
    EXPECT_EQ(v[3], v[0] + 3);
    firsts.insert(v[0]);
  }
  if ((*server)->requests().size() >= 3) EXPECT_EQ(firsts, (std::set<float>{0, 10, 20}));
}

TEST(RunBenchTest, AppQueriesOverJsonUseTheAppsDefaultSlo) {
  auto server = FakeHttpInferServer::Create(Metadata());
  ASSERT_TRUE(server.ok());
  BenchOptions o = ShortRun((*server)->url());
  o.model.clear();
  o.app = "fmnist";
  o.min_accuracy = 0.8;
  o.rate_qps = 50;
  o.arrivals = "uniform";
  auto report = RunBench(o);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_TRUE(report->run.slo_ms.has_value());
  EXPECT_EQ(*report->run.slo_ms, 50);
  EXPECT_EQ(report->started, 10);  // 50/s for 0.2 s, uniform
  auto requests = (*server)->requests();
  ASSERT_GE(requests.size(), 10u);  // and the probe
  for (const ReceivedHttpRequest& r : requests) {
    EXPECT_EQ(r.path, "/v2/apps/fmnist/infer");
    json body = json::parse(r.body);
    EXPECT_EQ(body["parameters"], json({{"min_accuracy", 0.8}}));
    EXPECT_EQ(body["inputs"][0]["data"], json({0, 0, 0, 0})) << "zeros without --input";
  }
  json j = ReportJson(*report);
  EXPECT_EQ(j["target"]["app"], "fmnist");
  EXPECT_EQ(j["load"]["mode"], "open");
}

TEST(RunBenchTest, GrpcRunReportsTheServersSplit) {
  auto http = FakeHttpInferServer::Create(Metadata());
  auto grpc = testing::FakeGrpcInferServer::Create();
  ASSERT_TRUE(http.ok() && grpc.ok());
  BenchOptions o = ShortRun((*http)->url());
  o.protocol = Protocol::kGrpc;
  o.grpc_address = (*grpc)->address();
  o.concurrency = 2;
  o.arrivals = "ignored in a closed loop";
  auto report = RunBench(o);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_GT(report->ok, 0) << FormatReport(*report);
  EXPECT_EQ(report->failed, 0) << FormatReport(*report);
  EXPECT_DOUBLE_EQ(report->total_ms_p50, 0.4);
  EXPECT_EQ(report->run.connections, 1);
  EXPECT_EQ((*http)->requests().size(), 0u) << "inference went over gRPC";
}

TEST(RunBenchTest, AnUnknownTargetStopsTheRunWithTheServersWords) {
  auto server = FakeHttpInferServer::Create(Metadata(), [](const ReceivedHttpRequest&, int64_t) {
    return http::Response::Error(404, "no model named 'mlp' is registered");
  });
  ASSERT_TRUE(server.ok());
  BenchOptions o = ShortRun((*server)->url());
  o.concurrency = 1;
  auto report = RunBench(o);
  EXPECT_EQ(report.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(report.status().message(), HasSubstr("no model named 'mlp'"));
  EXPECT_EQ((*server)->requests().size(), 1u);
}

TEST(BenchOptionsTest, ValidationNamesTheFlag) {
  BenchOptions o;
  EXPECT_THAT(ValidateBenchOptions(o).message(), HasSubstr("--model and --app"));
  o.model = "m";
  EXPECT_THAT(ValidateBenchOptions(o).message(), HasSubstr("--rate"));
  o.rate_qps = 10;
  o.concurrency = 2;
  EXPECT_THAT(ValidateBenchOptions(o).message(), HasSubstr("--concurrency"));
  o.concurrency = 0;
  EXPECT_TRUE(ValidateBenchOptions(o).ok());
  o.arrivals = "gamma";
  EXPECT_THAT(ValidateBenchOptions(o).message(), HasSubstr("gamma:CV"));
  o.arrivals = "bursty";
  EXPECT_FALSE(ValidateBenchOptions(o).ok());
  o.arrivals = "poisson";
  o.min_accuracy = 1.5;
  EXPECT_THAT(ValidateBenchOptions(o).message(), HasSubstr("--min-accuracy"));
  o.min_accuracy.reset();
  o.server = "https://secure";
  EXPECT_THAT(ValidateBenchOptions(o).message(), HasSubstr("https"));
}

TEST(ParseArrivalsTest, KnowsEveryForm) {
  EXPECT_EQ(ParseArrivals("poisson")->kind, GeneratorKind::kPoisson);
  EXPECT_EQ(ParseArrivals("Uniform")->kind, GeneratorKind::kUniform);
  auto gamma = ParseArrivals("gamma:2.5");
  ASSERT_TRUE(gamma.ok());
  EXPECT_EQ(gamma->kind, GeneratorKind::kGamma);
  EXPECT_EQ(gamma->cv, 2.5);
  EXPECT_EQ(ParseArrivals("trace:/tmp/Trace.csv")->trace_file, "/tmp/Trace.csv");
  EXPECT_FALSE(ParseArrivals("gamma:-1").ok());
  EXPECT_FALSE(ParseArrivals("trace:").ok());
}

TEST(RunBenchTest, ReplaysATraceFile) {
  auto server = FakeHttpInferServer::Create(Metadata());
  ASSERT_TRUE(server.ok());
  TempFile trace("trace.csv", "arrival_ms\n0\n10\n20\n150\n500\n");
  BenchOptions o = ShortRun((*server)->url());
  o.rate_qps = 1;  // the trace sets the times; --rate only picks the open loop
  o.arrivals = absl::StrCat("trace:", trace.path());
  auto report = RunBench(o);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->started, 4) << "the arrival at 500 ms is past the 200 ms run";
  EXPECT_DOUBLE_EQ(report->run.rate_qps, 20);
}

}  // namespace
}  // namespace maitre::loadgen
