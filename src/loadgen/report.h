// The numbers `maitre bench` reports, computed from a run's per-request
// records, and their two renderings: an aligned table for people and JSON
// for scripts.
//
// Definitions (they matter when comparing runs):
// - latency: answer time minus *scheduled* send time, over successful
//   requests. In an open loop this charges client lag to the latency, as a
//   real user would see it; "service" is answer minus actual send time.
// - throughput: successful answers per second over the run's window, from
//   the start of the load phase to the last answer (at least the load
//   phase's length).
// - SLO violations: successful requests slower than the SLO, plus every
//   failed or unfinished request, over all requests started.
// - server split: medians of the answers' queue_us / compute_us / total_us
//   parameters; "outside server" is the median of (service − total): the
//   client, the network and the front-end's parsing; "batch rows" is the
//   mean of the answers' batch_size, the rows of the batch each query rode
//   (so a batch of 8 counts eight times: it is what a query saw, not the
//   mean batch the executor ran).
// - effective accuracy: the mean accuracy of the variants that answered,
//   over successful answers to an app whose variant's accuracy the server
//   listed (GET /v2/apps/{app}); -1 when there is none.
// - the series buckets requests by the second they were scheduled in, so a
//   slow answer counts against the load that caused it.
// - percentiles interpolate linearly between closest ranks (numpy's
//   default), so p50 of {1, 2, 3, 4} is 2.5.
//
// Thread-safety: pure functions over values.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "loadgen/driver.h"
#include "nlohmann/json.hpp"

namespace maitre::loadgen {

// The q-th percentile (0 <= q <= 100) of `sorted` (ascending); 0 if empty.
double Percentile(const std::vector<double>& sorted, double q);

struct Distribution {
  int64_t count = 0;
  double mean = 0;
  double p50 = 0;
  double p90 = 0;
  double p99 = 0;
  double max = 0;
};

// Sorts its argument and summarises it.
Distribution Summarize(std::vector<double> values);

struct ErrorCount {
  std::string kind;  // "http 503", "grpc UNAVAILABLE", "timeout", "connection", "bad answer"
  int64_t count = 0;
  std::string example;  // the first message seen
  // How fast these failures came back: answer − sent (the server's and the
  // network's time, not the client's lag), so a quick refusal (429) shows
  // apart from a slow timeout. Empty for "unfinished".
  Distribution latency_ms;
};

// One request that failed or was never answered, for `maitre bench
// --failures`: when it was scheduled and what it was told.
struct FailedRequest {
  double at_s = 0;         // scheduled, since the load phase began
  double latency_ms = -1;  // answer − sent; -1 when unfinished or never sent
  std::string kind;        // as in ErrorCount; "unfinished" when no answer came
  std::string message;     // "" when the run kept none (kMaxErrorMessages)
};

// How the run was set up, for the report's header.
struct RunDescription {
  std::string model;  // exactly one of model and app
  std::string app;
  std::string protocol;  // ProtocolName()
  bool open_loop = true;
  std::string arrivals;  // open loop: "poisson", "gamma:2", "uniform", "trace:FILE"
  double rate_qps = 0;   // open loop (a trace's mean rate)
  int concurrency = 0;   // closed loop
  std::optional<double> slo_ms;
  int64_t connections = 0;
  // "model:version" -> accuracy, for an app's variants.
  std::map<std::string, double> variant_accuracy;
};

struct ServedCount {
  std::string variant;  // "model:version"; "" when answers named none
  int64_t count = 0;
  double accuracy = -1;  // -1: unknown
};

// One second of the run (see "the series" above).
struct SecondOfRun {
  int64_t second = 0;  // since the load phase began
  int64_t started = 0;
  int64_t ok = 0;
  int64_t failed = 0;  // failed and unfinished
  int64_t slo_violations = 0;
  double latency_p99_ms = 0;       // of its ok requests; 0 when none
  double effective_accuracy = -1;  // -1: no answer of known accuracy
  std::vector<int64_t> served;     // per BenchReport::served entry
};

struct BenchReport {
  RunDescription run;
  double duration_s = 0;  // the load phase
  double window_s = 0;    // what throughput divides by
  int64_t started = 0;
  int64_t ok = 0;
  int64_t failed = 0;
  int64_t unfinished = 0;
  double send_rate_qps = 0;   // started / load phase
  double throughput_qps = 0;  // ok / window
  Distribution latency_ms;     // ok: answer − scheduled
  Distribution service_ms;     // ok: answer − sent
  Distribution client_lag_ms;  // every request that left: sent − scheduled
  int64_t slo_violations = 0;  // only with an SLO
  double slo_violation_ratio = 0;
  int64_t answers_with_timings = 0;
  double queue_ms_p50 = -1;  // -1: the server reported none
  double compute_ms_p50 = -1;
  double total_ms_p50 = -1;
  double outside_server_ms_p50 = -1;
  double batch_rows_mean = -1;  // -1: the server reported none
  std::vector<ErrorCount> errors;  // most frequent first
  int64_t max_in_flight = 0;
  std::vector<ServedCount> served;  // ok answers by variant, most first
  double effective_accuracy = -1;
  std::vector<SecondOfRun> series;
  std::vector<FailedRequest> failures;  // in the order they were started
};

BenchReport BuildReport(const RunResult& run, const RunDescription& description);

// A few aligned lines and tables; ends with a newline.
std::string FormatReport(const BenchReport& report);

nlohmann::json ReportJson(const BenchReport& report);

// The series as CSV: second,started,ok,failed,slo_violations,latency_p99_ms,
// effective_accuracy, then one column of answers per served variant, named
// by the variant; an unknown effective accuracy is an empty cell.
std::string SeriesCsv(const BenchReport& report);

// Every failed or unfinished request as CSV: at_s,latency_ms,kind,message
// (latency_ms empty when unknown; the message quoted as RFC 4180 says).
std::string FailuresCsv(const BenchReport& report);

}  // namespace maitre::loadgen
