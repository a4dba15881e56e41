// What does serving add? For the zoo MLP at batch 1, in one run:
//   1. the raw executor: CreateExecutor + Run in this process, 1 thread;
//   2. end to end over HTTP: POST /v2/models/fmnist-mlp/infer (JSON) to a real
//      `maitre serve` with one cpu-1 worker, over one keep-alive connection;
//   3. end to end over gRPC: ModelInfer with the tensor in
//      raw_input_contents, to the same server over one channel.
// Requests go one at a time. Reports p50 and p99 of each, what each transport
// adds over the raw executor, and the server's own split (queue, compute,
// total) so the overhead can be attributed.
//
//   serving_overhead_bench [--requests N] [--variant torch|opencv]
// Needs MAITRE_ZOO_DIR and MAITRE_BINARY (set them, or run through ctest's
// environment: see docs/operations.md).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "core/file_util.h"
#include "inference.grpc.pb.h"
#include "runtime/executor.h"
#include "runtime/testing/zoo.h"
#include "testing/server_process.h"

namespace {

using Clock = std::chrono::steady_clock;

double Percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * (v.size() - 1))];
}

struct Summary {
  double p50, p99;
};

Summary Summarise(const std::vector<double>& us) { return {Percentile(us, 0.5), Percentile(us, 0.99)}; }

// Latencies in us of `requests` ModelInfer calls, one at a time, after
// `warmup` unmeasured ones; empty on any failure (printed).
std::vector<double> TimeGrpc(const std::string& address, const maitre::Tensor& image,
                             const std::string& model, const std::string& variant, int warmup,
                             int requests) {
  auto stub = inference::GRPCInferenceService::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  inference::ModelInferRequest request;
  request.set_model_name(model);
  request.set_model_version(variant);
  auto* input = request.add_inputs();
  input->set_name("input");
  input->set_datatype("FP32");
  for (int64_t d : image.shape) input->add_shape(d);
  request.add_raw_input_contents(image.data);
  std::vector<double> us;
  for (int i = 0; i < warmup + requests; ++i) {
    grpc::ClientContext context;
    inference::ModelInferResponse response;
    auto start = Clock::now();
    grpc::Status status = stub->ModelInfer(&context, request, &response);
    double elapsed = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
    if (!status.ok()) {
      std::fprintf(stderr, "gRPC request failed: %s\n", status.error_message().c_str());
      return {};
    }
    if (i >= warmup) us.push_back(elapsed);
  }
  return us;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace maitre;
  int requests = 3000;
  std::string variant = "torch";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--requests") == 0) requests = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--variant") == 0) variant = argv[i + 1];
  }
  auto zoo = runtime::testing::LoadZoo();
  auto valset = runtime::testing::ZooValset();
  if (!zoo.ok() || !valset.ok()) {
    std::fprintf(stderr, "%s\n", std::string(zoo.ok() ? valset.status().message()
                                                      : zoo.status().message()).c_str());
    return 1;
  }
  const runtime::testing::ZooModel* mlp = nullptr;
  for (const auto& m : *zoo) {
    if (m.name == "fmnist-mlp") mlp = &m;
  }
  Tensor image = *runtime::SliceRows((*valset)->inputs, 0, 1);
  image.name = "input";

  // 1. The raw executor, one thread (a cpu-1 worker's setting).
  runtime::ConfigureProcessThreads(1);
  Runtime rt = variant == "opencv" ? Runtime::kOpenCv : Runtime::kTorch;
  auto executor = runtime::CreateExecutor(
      {rt, variant == "opencv" ? mlp->onnx : mlp->torchscript, runtime::testing::FmnistSpec()});
  if (!executor.ok()) {
    std::fprintf(stderr, "executor: %s\n", std::string(executor.status().message()).c_str());
    return 1;
  }
  std::vector<Tensor> inputs = {image};
  for (int i = 0; i < 200; ++i) (void)(*executor)->Run(inputs);
  std::vector<double> raw_us;
  for (int i = 0; i < requests; ++i) {
    auto start = Clock::now();
    auto out = (*executor)->Run(inputs);
    raw_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
    if (!out.ok()) return 1;
  }

  // 2. End to end through a real server with one cpu-1 worker.
  runtime::testing::ScopedTempDir data;
  testing::ServerOptions options;
  options.data_dir = data.path();
  options.workers = "cpu-1:1";
  auto server = testing::ServerProcess::Start(options);
  if (!server.ok()) {
    std::fprintf(stderr, "server: %s\n", std::string(server.status().message()).c_str());
    return 1;
  }
  auto registered = (*server)->Register("bench", "fmnist-mlp", mlp->torchscript, mlp->onnx, "");
  if (!registered.ok() || registered->status / 100 != 2) {
    std::fprintf(stderr, "register failed: %s\n", registered.ok() ? registered->body.c_str() : "");
    return 1;
  }
  std::string body = R"({"inputs":[{"name":"input","datatype":"FP32","shape":[1,1,28,28],"data":[)";
  for (int64_t i = 0; i < image.NumElements(); ++i) {
    if (i > 0) body.push_back(',');
    absl::StrAppend(&body, image.As<float>()[i]);
  }
  body.append("]}]}");
  std::string path = absl::StrCat("/v2/models/fmnist-mlp:", variant, "/infer");
  for (int i = 0; i < 300; ++i) (void)(*server)->Post(path, body);  // load + warm up
  std::vector<double> e2e_us, server_us, queue_us, compute_us;
  for (int i = 0; i < requests; ++i) {
    auto start = Clock::now();
    auto r = (*server)->Post(path, body);
    double us = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
    if (!r.ok() || r->status != 200) {
      std::fprintf(stderr, "request failed: %s\n", r.ok() ? r->body.c_str() : "transport");
      return 1;
    }
    e2e_us.push_back(us);
    auto j = nlohmann::json::parse(r->body);
    server_us.push_back(j["parameters"]["total_us"].get<double>());
    queue_us.push_back(j["parameters"]["queue_us"].get<double>());
    compute_us.push_back(j["parameters"]["compute_us"].get<double>());
  }
  std::vector<double> grpc_us =
      TimeGrpc((*server)->grpc_address(), image, "fmnist-mlp", variant, 300, requests);
  (void)(*server)->Stop();
  if (grpc_us.empty()) return 1;

  Summary raw = Summarise(raw_us), e2e = Summarise(e2e_us), grpc = Summarise(grpc_us);
  std::printf("fmnist-mlp:%s, batch 1, %d requests, one cpu-1 worker\n", variant.c_str(),
              requests);
  std::printf("%-34s %10s %10s\n", "", "p50 us", "p99 us");
  std::printf("%-34s %10.1f %10.1f\n", "raw executor (in process)", raw.p50, raw.p99);
  std::printf("%-34s %10.1f %10.1f\n", "end to end (HTTP, JSON)", e2e.p50, e2e.p99);
  std::printf("%-34s %10.1f %10.1f\n", "end to end (gRPC, raw tensor)", grpc.p50, grpc.p99);
  std::printf("%-34s %10.1f %10.1f\n", "added by serving over HTTP", e2e.p50 - raw.p50,
              e2e.p99 - raw.p99);
  std::printf("%-34s %10.1f %10.1f\n", "added by serving over gRPC", grpc.p50 - raw.p50,
              grpc.p99 - raw.p99);
  std::printf("%-34s %10.1f %10.1f\n", "  server total (front-end to reply)",
              Percentile(server_us, 0.5), Percentile(server_us, 0.99));
  std::printf("%-34s %10.1f %10.1f\n", "  worker queue", Percentile(queue_us, 0.5),
              Percentile(queue_us, 0.99));
  std::printf("%-34s %10.1f %10.1f\n", "  worker compute", Percentile(compute_us, 0.5),
              Percentile(compute_us, 0.99));
  std::printf("(server split: HTTP requests)\n");
  std::printf("ratio end-to-end / raw at p50: HTTP %.2f, gRPC %.2f\n", e2e.p50 / raw.p50,
              grpc.p50 / raw.p50);
  return 0;
}
