// The load generator's own cost, against the in-process fake servers (which
// answer at once with a small JSON or protobuf body):
//
// - BM_OpenLoop/PROTOCOL/RATE: one second of uniform open-loop arrivals.
//   The rate the client sustains is the highest at which send_qps keeps up
//   with RATE and lag_p99_us stays small; past it the client, not the
//   server, is the bottleneck and client lag grows.
// - BM_ClosedLoop/PROTOCOL/N: N workers; service_p50_us is one loopback
//   round trip through client, fake server and back.
//
// Protocols: 0 = http (JSON), 1 = http-binary, 2 = grpc. The client and the
// fake server share the machine, so these are lower bounds on what the
// client alone could do.
#include <benchmark/benchmark.h>

#include "loadgen/bench.h"
#include "loadgen/testing/fake_servers.h"

namespace maitre::loadgen {
namespace {

const nlohmann::json& Metadata() {
  static const nlohmann::json* metadata = new nlohmann::json(nlohmann::json::parse(
      R"({"name":"m","inputs":[{"name":"input","datatype":"FP32","shape":[-1,1,28,28]}]})"));
  return *metadata;
}

Protocol ProtocolOf(int64_t index) {
  return index == 0 ? Protocol::kHttpJson
                    : index == 1 ? Protocol::kHttpBinary : Protocol::kGrpc;
}

void Run(benchmark::State& state, BenchOptions options) {
  auto http = testing::FakeHttpInferServer::Create(Metadata(), nullptr, /*io_threads=*/1);
  auto grpc = testing::FakeGrpcInferServer::Create();
  if (!http.ok() || !grpc.ok()) {
    state.SkipWithError("the fake servers did not start");
    return;
  }
  options.model = "m";
  options.server = (*http)->url();
  options.grpc_address = (*grpc)->address();
  options.duration_s = 1;
  options.timeout_s = 10;
  BenchReport report;
  for (auto _ : state) {
    auto result = RunBench(options);
    if (!result.ok()) {
      state.SkipWithError(std::string(result.status().message()).c_str());
      return;
    }
    report = *std::move(result);
  }
  state.SetLabel(std::string(ProtocolName(options.protocol)));
  state.counters["send_qps"] = report.send_rate_qps;
  state.counters["ok_qps"] = report.throughput_qps;
  state.counters["failed"] = static_cast<double>(report.failed + report.unfinished);
  state.counters["lag_p50_us"] = report.client_lag_ms.p50 * 1000;
  state.counters["lag_p99_us"] = report.client_lag_ms.p99 * 1000;
  state.counters["service_p50_us"] = report.service_ms.p50 * 1000;
  state.counters["service_p99_us"] = report.service_ms.p99 * 1000;
  state.counters["in_flight_max"] = static_cast<double>(report.max_in_flight);
}

void BM_OpenLoop(benchmark::State& state) {
  BenchOptions options;
  options.protocol = ProtocolOf(state.range(0));
  options.rate_qps = static_cast<double>(state.range(1));
  options.arrivals = "uniform";
  Run(state, options);
}
BENCHMARK(BM_OpenLoop)
    ->ArgsProduct({{0, 1, 2}, {1000, 5000, 10000, 20000}})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

void BM_ClosedLoop(benchmark::State& state) {
  BenchOptions options;
  options.protocol = ProtocolOf(state.range(0));
  options.concurrency = static_cast<int>(state.range(1));
  Run(state, options);
}
BENCHMARK(BM_ClosedLoop)
    ->ArgsProduct({{0, 1, 2}, {1, 8}})
    ->Iterations(1)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace maitre::loadgen

BENCHMARK_MAIN();
