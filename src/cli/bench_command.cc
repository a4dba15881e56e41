#include "cli/bench_command.h"

#include <cstdio>
#include <iostream>
#include <memory>

#include "cli/api_client.h"
#include "core/file_util.h"
#include "loadgen/bench.h"

namespace maitre::cli {

void AddBenchCommand(CLI::App& app, int* exit_code) {
  struct Flags {
    loadgen::BenchOptions options;
    std::string protocol = "http";
    double latency_ms = -1, min_accuracy = -1, max_cost = -1;
    bool json = false;
    std::string series_file;
    std::string failures_file;
    std::string pipeline;
  };
  auto flags = std::make_shared<Flags>();
  loadgen::BenchOptions& o = flags->options;
  CLI::App* cmd = app.add_subcommand("bench", "Drive load at a server and report what it saw");
  cmd->add_option("--model", o.model, "Target model (or model:variant)");
  cmd->add_option("--app", o.app, "Target app (model-less queries)");
  cmd->add_option("--pipeline", flags->pipeline,
                  "Target pipeline (docs/pipelines.md), reached as a model is");
  cmd->add_option("--rate", o.rate_qps, "Open loop: queries per second");
  cmd->add_option("--arrivals", o.arrivals, "poisson, uniform, gamma:CV or trace:FILE")
      ->capture_default_str();
  cmd->add_option("--concurrency", o.concurrency, "Closed loop: queries in flight");
  cmd->add_option("--duration", o.duration_s, "Seconds")->capture_default_str();
  cmd->add_option("--latency-ms", flags->latency_ms, "The SLO (sent as the requirement to apps)");
  cmd->add_option("--min-accuracy", flags->min_accuracy, "Sent to apps");
  cmd->add_option("--max-cost", flags->max_cost, "Sent to apps ($/h)");
  cmd->add_option("--protocol", flags->protocol, "http, http-binary or grpc")->capture_default_str();
  cmd->add_option("--server", o.server, "Server URL")->capture_default_str();
  cmd->add_option("--grpc", o.grpc_address, "Server gRPC address")->capture_default_str();
  cmd->add_option("--grpc-channels", o.grpc_channels,
                  "gRPC channels (connections) the queries take in turn")
      ->capture_default_str();
  cmd->add_option("--input", o.input_file, ".npz with input rows (default: zeros)");
  cmd->add_option("--batch", o.batch, "Rows per request")->capture_default_str();
  cmd->add_option("--seed", o.seed, "Seed of the arrival process")->capture_default_str();
  cmd->add_option("--timeout", o.timeout_s, "Per-request timeout, seconds")->capture_default_str();
  cmd->add_flag("--json", flags->json, "Print the report as JSON");
  cmd->add_option("--series", flags->series_file,
                  "Also write a per-second CSV: load, answers, violations, p99, effective "
                  "accuracy and answers by variant");
  cmd->add_option("--failures", flags->failures_file,
                  "Also write every failed or unfinished request as CSV: when it was "
                  "scheduled, how long its failure took, its kind and its message");
  cmd->callback([flags, exit_code] {
    loadgen::BenchOptions o = flags->options;
    if (!flags->pipeline.empty()) {
      if (!o.model.empty()) {
        std::cerr << "maitre bench: name exactly one of --model, --app and --pipeline\n";
        *exit_code = 1;
        return;
      }
      // /v2/models/{name}/infer and gRPC ModelInfer serve a pipeline by
      // its name, and /v2/models/{name} gives its inputs.
      o.model = flags->pipeline;
    }
    if (flags->latency_ms >= 0) o.latency_ms = flags->latency_ms;
    if (flags->min_accuracy >= 0) o.min_accuracy = flags->min_accuracy;
    if (flags->max_cost >= 0) o.max_cost = flags->max_cost;
    auto protocol = loadgen::ParseProtocol(flags->protocol);
    if (!protocol.ok()) {
      std::cerr << "maitre bench: " << protocol.status().message() << "\n";
      *exit_code = 1;
      return;
    }
    o.protocol = *protocol;
    auto api_key = ApiKeyFromEnvironment();
    if (!api_key.ok()) {
      std::cerr << "maitre bench: " << api_key.status().message() << "\n";
      *exit_code = 1;
      return;
    }
    o.api_key = *api_key;
    if (absl::Status valid = loadgen::ValidateBenchOptions(o); !valid.ok()) {
      std::cerr << "maitre bench: " << valid.message() << "\n";
      *exit_code = 1;
      return;
    }
    bool json = flags->json;
    o.progress = [json](const loadgen::Progress& p) {
      if (json) return;
      std::fprintf(stderr, "\r%5.1f s  sent %lld  ok %lld  failed %lld  in flight %lld   ",
                   ToSeconds(p.elapsed), static_cast<long long>(p.started),
                   static_cast<long long>(p.answered), static_cast<long long>(p.failed),
                   static_cast<long long>(p.in_flight));
    };
    auto report = loadgen::RunBench(o);
    if (!json) std::fprintf(stderr, "\n");
    if (!report.ok()) {
      std::cerr << "maitre bench: " << report.status().message() << "\n";
      *exit_code = 1;
      return;
    }
    for (const auto& [file, csv] :
         {std::pair{flags->series_file, &loadgen::SeriesCsv},
          std::pair{flags->failures_file, &loadgen::FailuresCsv}}) {
      if (file.empty()) continue;
      if (absl::Status written = WriteFileAtomically(file, csv(*report)); !written.ok()) {
        std::cerr << "maitre bench: " << written.message() << "\n";
        *exit_code = 1;
      }
    }
    if (json) {
      std::cout << loadgen::ReportJson(*report).dump(2) << "\n";
    } else {
      std::cout << loadgen::FormatReport(*report);
    }
  });
}

}  // namespace maitre::cli
