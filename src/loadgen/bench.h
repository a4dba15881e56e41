// `maitre bench` as a library call (docs/api.md, "Command line"): load a model
// or an app at a rate (open loop) or a concurrency (closed loop), over HTTP
// with JSON or binary tensors or over gRPC, and report throughput, latency
// percentiles, SLO violations, the server's queue/compute split and errors by
// status. The CLI only turns flags into BenchOptions and prints the report.
//
// Arrivals come from src/core/arrivals.h, so `maitre bench` and `maitre sim`
// see the same arrival process for the same kind, rate and seed.
//
// Thread-safety: RunBench blocks its caller and may run on any thread;
// concurrent calls are independent.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "core/clock.h"
#include "loadgen/driver.h"
#include "loadgen/report.h"
#include "loadgen/transport.h"
#include "core/arrivals.h"

namespace maitre::loadgen {

struct BenchOptions {
  // The target: exactly one.
  std::string model;  // --model NAME (a model or a variant id)
  std::string app;    // --app APP
  std::string api_key;  // sent with every query when set ($MAITRE_API_KEY)

  // --latency-ms: the SLO that violations count against; for an app it is
  // also sent as the query's requirement. Without it, an app's default
  // latency objective is the SLO. --min-accuracy and --max-cost are sent
  // to an app (a model target ignores them).
  std::optional<double> latency_ms;
  std::optional<double> min_accuracy;
  std::optional<double> max_cost;

  // The load: exactly one of rate_qps > 0 (open loop) and concurrency > 0
  // (closed loop).
  double rate_qps = 0;               // --rate QPS
  std::string arrivals = "poisson";  // --arrivals poisson|uniform|gamma:CV|trace:FILE
  int concurrency = 0;               // --concurrency N
  double duration_s = 10;            // --duration S
  uint64_t seed = 1;                 // of the arrival process

  Protocol protocol = Protocol::kHttpJson;       // --protocol http|http-binary|grpc
  std::string server = "http://127.0.0.1:8000";  // --server URL (metadata always comes from here)
  std::string grpc_address = "127.0.0.1:8001";   // --grpc ADDR
  int grpc_channels = 1;                         // --grpc-channels N
  std::string input_file;                        // --input FILE.npz; empty: zeros
  size_t max_input_rows = 1024;  // distinct payloads built from the file (cycled)
  int batch = 1;                 // --batch N: rows per request

  double timeout_s = 30;  // per request; also how long to wait for answers at the end
  int io_threads = 1;     // HTTP client io threads
  int max_connections = 1024;
  const Clock* clock = nullptr;  // null: SteadyClock
  // Called about once a second while the run goes (for a progress line).
  std::function<void(const Progress&)> progress;
};

// An --arrivals value taken apart.
struct ArrivalsSpec {
  GeneratorKind kind = GeneratorKind::kPoisson;
  double cv = 1;           // gamma
  std::string trace_file;  // non-empty: replay this trace
};
absl::StatusOr<ArrivalsSpec> ParseArrivals(absl::string_view text);

// Checks the options without touching the network (the CLI calls it to
// reject bad flags before anything starts).
absl::Status ValidateBenchOptions(const BenchOptions& options);

// Runs the benchmark. Errors are for a run that could not happen (bad
// options, unknown target, a first request the server refuses as malformed
// or unknown); failures during the run are counted in the report instead.
absl::StatusOr<BenchReport> RunBench(const BenchOptions& options);

}  // namespace maitre::loadgen
