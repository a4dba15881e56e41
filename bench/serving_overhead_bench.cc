// What does serving add? For the zoo MLP at batch 1, in one run:
//   1. the raw executor: CreateExecutor + Run in this process, 1 thread;
//   2. end to end over HTTP: POST /v2/models/fmnist-mlp:VARIANT/infer (JSON)
//      to a real `maitre serve` with one cpu-1 worker, over one keep-alive
//      connection;
//   3. end to end over gRPC: ModelInfer with the tensor in
//      raw_input_contents, to the same server over one channel;
//   4. a round trip to the controller that does no serving work on each
//      transport (GET /v2/health/live, ServerLive): the transport's floor.
// Requests go one at a time, in rounds that take a block of each kind in
// turn, so the shared host's slow stretches fall on every kind alike.
// Reports p50 and p99 of each, what each transport adds over the raw
// executor, and the server's own split (queue, compute, total) so the
// overhead can be attributed. It also reports the CPU each kind of request
// costs the controller and the worker (their threads' run time from
// /proc/PID/task/*/schedstat, over each block): on a busy host latency
// varies with what else runs, but the CPU a request takes much less, so a
// change in the serving path shows there first.
//
//   serving_overhead_bench [--requests N] [--variant torch|opencv]
//                          [--profile-sweeps N]
// --profile-sweeps is the server's (a minimum of 3 by default, a minute
// apart); 1 starts measuring after one sweep, for quick comparisons.
// Needs MAITRE_ZOO_DIR and MAITRE_BINARY (set them, or run through ctest's
// environment: see docs/operations.md).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
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

// One kind of request: `once` sends one and says whether it succeeded.
struct Probe {
  const char* label;
  std::function<bool()> once;
  std::vector<double> us;
  // CPU nanoseconds the controller and the worker spent over its blocks.
  int64_t controller_cpu_ns = 0, worker_cpu_ns = 0;
};

// Nanoseconds every live thread of `pid` has run on a CPU (the first field
// of each /proc/PID/task/TID/schedstat); 0 if the process is gone.
int64_t ProcessCpuNanos(pid_t pid) {
  int64_t total = 0;
  const std::string tasks = absl::StrCat("/proc/", pid, "/task");
  std::error_code error;
  for (const auto& task : std::filesystem::directory_iterator(tasks, error)) {
    std::ifstream in(task.path() / "schedstat");
    int64_t ran = 0;
    if (in >> ran) total += ran;
  }
  return total;
}

// Whether the people's table shows every variant generated and profiled on
// cpu-1 (or failed), the only type this bench runs; cpu-2 rows stay
// unprofiled.
bool AllProfiledOnCpu1(const std::string& table) {
  if (absl::StrContains(table, "pending")) return false;
  for (absl::string_view line : absl::StrSplit(table, '\n')) {
    if (absl::StrContains(line, " cpu-1 ") &&
        !absl::EndsWith(absl::StripTrailingAsciiWhitespace(line), " ready") &&
        !absl::StrContains(line, "failed")) {
      return false;
    }
  }
  return true;
}

// The server's own split of each measured HTTP request, in microseconds.
struct ServerSplit {
  std::vector<double> total_us, queue_us, compute_us;
};

// Waits until variant generation and profiling, which go on in the
// background after registration, are done: measuring beside them would time
// the profiler, not serving.
void AwaitProfiles(maitre::testing::ServerProcess& server) {
  for (int i = 0; i < 900; ++i) {
    auto table = server.Get("/v2/apps/bench?format=table");
    if (table.ok() && AllProfiledOnCpu1(table->body)) return;
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

std::string JsonBody(const maitre::Tensor& image) {
  std::string body = R"({"inputs":[{"name":"input","datatype":"FP32","shape":[1,1,28,28],"data":[)";
  for (int64_t i = 0; i < image.NumElements(); ++i) {
    if (i > 0) body.push_back(',');
    absl::StrAppend(&body, image.As<float>()[i]);
  }
  body.append("]}]}");
  return body;
}

// The five kinds of request, in the order the report prints them. They
// refer to every argument, which must outlive them.
std::vector<Probe> MakeProbes(maitre::runtime::Executor& executor,
                              const std::vector<maitre::Tensor>& inputs,
                              maitre::testing::ServerProcess& server,
                              inference::GRPCInferenceService::Stub& stub,
                              const inference::ModelInferRequest& infer, const std::string& path,
                              const std::string& body, const bool& measuring,
                              ServerSplit& split) {
  std::vector<Probe> probes;
  probes.push_back({"raw executor (in process)", [&] { return executor.Run(inputs).ok(); }});
  probes.push_back({"end to end (HTTP, JSON)", [&] {
                      auto r = server.Post(path, body);
                      if (!r.ok() || r->status != 200) {
                        std::fprintf(stderr, "request failed: %s\n",
                                     r.ok() ? r->body.c_str() : "transport");
                        return false;
                      }
                      if (!measuring) return true;
                      auto j = nlohmann::json::parse(r->body);
                      split.total_us.push_back(j["parameters"]["total_us"].get<double>());
                      split.queue_us.push_back(j["parameters"]["queue_us"].get<double>());
                      split.compute_us.push_back(j["parameters"]["compute_us"].get<double>());
                      return true;
                    }});
  probes.push_back({"end to end (gRPC, raw tensor)", [&] {
                      grpc::ClientContext context;
                      inference::ModelInferResponse response;
                      grpc::Status status = stub.ModelInfer(&context, infer, &response);
                      if (!status.ok()) {
                        std::fprintf(stderr, "gRPC request failed: %s\n",
                                     status.error_message().c_str());
                      }
                      return status.ok();
                    }});
  probes.push_back({"round trip, no work (HTTP live)", [&] {
                      auto r = server.Get("/v2/health/live");
                      return r.ok() && r->status == 200;
                    }});
  probes.push_back({"round trip, no work (gRPC live)", [&] {
                      grpc::ClientContext context;
                      inference::ServerLiveResponse response;
                      return stub.ServerLive(&context, {}, &response).ok();
                    }});
  return probes;
}

// Warms every path up (the first queries load the variant), then measures
// in rounds of `block` requests of each kind. False if a request failed.
bool Measure(std::vector<Probe>& probes, int requests, bool& measuring, pid_t controller,
             pid_t worker) {
  for (Probe& probe : probes) {
    for (int i = 0; i < 300; ++i) {
      if (!probe.once()) return false;
    }
  }
  measuring = true;
  const int block = 100;
  for (int done = 0; done < requests; done += block) {
    for (Probe& probe : probes) {
      const int64_t controller_before = ProcessCpuNanos(controller);
      const int64_t worker_before = ProcessCpuNanos(worker);
      for (int i = 0; i < block; ++i) {
        auto start = Clock::now();
        if (!probe.once()) return false;
        probe.us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
      }
      probe.controller_cpu_ns += ProcessCpuNanos(controller) - controller_before;
      probe.worker_cpu_ns += ProcessCpuNanos(worker) - worker_before;
    }
  }
  return true;
}

void Report(const std::vector<Probe>& probes, const ServerSplit& split,
            const std::string& variant) {
  auto p50 = [&](int i) { return Percentile(probes[i].us, 0.5); };
  auto p99 = [&](int i) { return Percentile(probes[i].us, 0.99); };
  std::printf("fmnist-mlp:%s, batch 1, %zu requests of each kind, one cpu-1 worker\n",
              variant.c_str(), probes[0].us.size());
  std::printf("%-34s %10s %10s\n", "", "p50 us", "p99 us");
  for (int i = 0; i < 3; ++i) std::printf("%-34s %10.1f %10.1f\n", probes[i].label, p50(i), p99(i));
  std::printf("%-34s %10.1f %10.1f\n", "added by serving over HTTP", p50(1) - p50(0),
              p99(1) - p99(0));
  std::printf("%-34s %10.1f %10.1f\n", "added by serving over gRPC", p50(2) - p50(0),
              p99(2) - p99(0));
  std::printf("%-34s %10.1f %10.1f\n", "  server total (front-end to reply)",
              Percentile(split.total_us, 0.5), Percentile(split.total_us, 0.99));
  std::printf("%-34s %10.1f %10.1f\n", "  worker queue", Percentile(split.queue_us, 0.5),
              Percentile(split.queue_us, 0.99));
  std::printf("%-34s %10.1f %10.1f\n", "  worker compute", Percentile(split.compute_us, 0.5),
              Percentile(split.compute_us, 0.99));
  std::printf("(server split: HTTP requests)\n");
  for (int i = 3; i < 5; ++i) std::printf("%-34s %10.1f %10.1f\n", probes[i].label, p50(i), p99(i));
  std::printf("ratio end-to-end / raw at p50: HTTP %.2f, gRPC %.2f\n", p50(1) / p50(0),
              p50(2) / p50(0));
  std::printf("%-34s %10s %10s\n", "CPU per request (us)", "controller", "worker");
  for (size_t i = 1; i < probes.size(); ++i) {
    const double n = static_cast<double>(probes[i].us.size());
    std::printf("%-34s %10.1f %10.1f\n", probes[i].label, probes[i].controller_cpu_ns / n / 1e3,
                probes[i].worker_cpu_ns / n / 1e3);
  }
}

}  // namespace

int main(int argc, char** argv) {
  using namespace maitre;
  int requests = 3000;
  std::string variant = "torch";
  std::string profile_sweeps;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--requests") == 0) requests = std::atoi(argv[i + 1]);
    if (std::strcmp(argv[i], "--variant") == 0) variant = argv[i + 1];
    if (std::strcmp(argv[i], "--profile-sweeps") == 0) profile_sweeps = argv[i + 1];
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
  Tensor image = *SliceRows((*valset)->inputs, 0, 1);
  image.name = "input";

  // The raw executor, one thread (a cpu-1 worker's setting).
  runtime::ConfigureProcessThreads(1);
  Runtime rt = variant == "opencv" ? Runtime::kOpenCv : Runtime::kTorch;
  auto executor = runtime::CreateExecutor(
      {rt, variant == "opencv" ? mlp->onnx : mlp->torchscript, runtime::testing::FmnistSpec()});
  if (!executor.ok()) {
    std::fprintf(stderr, "executor: %s\n", std::string(executor.status().message()).c_str());
    return 1;
  }
  std::vector<Tensor> inputs = {image};

  // A real server with one cpu-1 worker.
  runtime::testing::ScopedTempDir data;
  testing::ServerOptions options;
  options.data_dir = data.path();
  options.workers = "cpu-1:1";
  if (!profile_sweeps.empty()) options.extra_args = {"--profile-sweeps", profile_sweeps};
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
  AwaitProfiles(**server);

  auto stub = inference::GRPCInferenceService::NewStub(
      grpc::CreateChannel((*server)->grpc_address(), grpc::InsecureChannelCredentials()));
  inference::ModelInferRequest infer;
  infer.set_model_name("fmnist-mlp");
  infer.set_model_version(variant);
  auto* input = infer.add_inputs();
  input->set_name("input");
  input->set_datatype("FP32");
  for (int64_t d : image.shape) input->add_shape(d);
  infer.add_raw_input_contents(image.data);

  // The probes refer to these; they live until the report.
  const std::string path = absl::StrCat("/v2/models/fmnist-mlp:", variant, "/infer");
  const std::string body = JsonBody(image);
  bool measuring = false;
  ServerSplit split;
  std::vector<Probe> probes =
      MakeProbes(**executor, inputs, **server, *stub, infer, path, body, measuring, split);
  auto workers = (*server)->WorkerPids();
  if (!workers.ok() || workers->size() != 1) {
    std::fprintf(stderr, "expected one worker: %s\n",
                 workers.ok() ? "another count" : std::string(workers.status().message()).c_str());
    return 1;
  }
  if (!Measure(probes, requests, measuring, (*server)->pid(), workers->front())) return 1;
  (void)(*server)->Stop();
  Report(probes, split, variant);
  return 0;
}
