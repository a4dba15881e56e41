#include "loadgen/bench.h"

#include <cmath>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/notification.h"
#include "core/file_util.h"
#include "core/status_macros.h"
#include "core/zero_row.h"
#include "loadgen/inputs.h"

namespace maitre::loadgen {
namespace {

absl::Status Invalid(absl::string_view a, absl::string_view b = "", absl::string_view c = "") {
  return absl::InvalidArgumentError(absl::StrCat(a, b, c));
}

struct BaseUrl {
  std::string address;  // host:port
  std::string prefix;   // "" or "/api"
};

absl::StatusOr<BaseUrl> ParseBaseUrl(absl::string_view url) {
  absl::string_view rest = url;
  if (absl::StartsWithIgnoreCase(rest, "https://")) {
    return Invalid("--server ", url, ": https is not supported; use http://");
  }
  if (absl::StartsWithIgnoreCase(rest, "http://")) rest.remove_prefix(7);
  const size_t slash = rest.find('/');
  BaseUrl out;
  out.address = std::string(rest.substr(0, slash));
  if (slash != absl::string_view::npos) {
    absl::string_view prefix = rest.substr(slash);
    while (absl::ConsumeSuffix(&prefix, "/")) {
    }
    out.prefix = std::string(prefix);
  }
  if (out.address.empty()) return Invalid("--server ", url, " names no host");
  if (out.address.find(':') == std::string::npos) absl::StrAppend(&out.address, ":80");
  return out;
}

// Failures of the first request that would fail every request the same way:
// better one clear message now than a report full of them.
bool IsFatalOnFirstRequest(const CallResult& r) {
  if (r.error_kind == "connection") return true;
  if (absl::StartsWith(r.error_kind, "http 4")) {
    return r.error_kind != "http 429" && r.error_kind != "http 408";
  }
  return r.error_kind == "grpc INVALID_ARGUMENT" || r.error_kind == "grpc NOT_FOUND" ||
         r.error_kind == "grpc UNIMPLEMENTED" || r.error_kind == "grpc FAILED_PRECONDITION";
}

// Sends one request before the clock starts: it opens the connection, and
// a target the server does not know stops the run with the server's own
// words.
absl::Status Probe(Transport& transport, Nanos timeout) {
  struct Shared {
    absl::Notification done;
    CallResult result;
  };
  auto shared = std::make_shared<Shared>();
  transport.Start(0, [shared](CallResult r) {
    shared->result = std::move(r);
    shared->done.Notify();
  });
  if (!shared->done.WaitForNotificationWithTimeout(absl::Nanoseconds(timeout) +
                                                   absl::Seconds(1))) {
    return absl::OkStatus();  // slow, not wrong: the run will count it
  }
  const CallResult& r = shared->result;
  if (!r.ok && IsFatalOnFirstRequest(r)) {
    return absl::FailedPreconditionError(
        absl::StrCat("the first request failed (", r.error_kind, "): ", r.error_message));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ArrivalsSpec> ParseArrivals(absl::string_view text) {
  ArrivalsSpec spec;
  const std::string lower = absl::AsciiStrToLower(text);
  if (absl::StartsWith(lower, "trace:")) {
    spec.trace_file = std::string(text.substr(6));
    if (spec.trace_file.empty()) return Invalid("--arrivals trace:FILE needs a file");
    return spec;
  }
  if (lower == "poisson") {
    spec.kind = GeneratorKind::kPoisson;
  } else if (lower == "uniform") {
    spec.kind = GeneratorKind::kUniform;
  } else if (absl::StartsWith(lower, "gamma")) {
    spec.kind = GeneratorKind::kGamma;
    absl::string_view cv = absl::string_view(lower).substr(5);
    if (!absl::ConsumePrefix(&cv, ":") || !absl::SimpleAtod(cv, &spec.cv) ||
        !(spec.cv > 0) || !std::isfinite(spec.cv)) {
      return Invalid("--arrivals ", text,
                     ": write gamma:CV with the coefficient of variation, e.g. gamma:2");
    }
  } else {
    return Invalid("--arrivals ", text, ": use poisson, uniform, gamma:CV or trace:FILE");
  }
  return spec;
}

absl::Status ValidateBenchOptions(const BenchOptions& o) {
  if (o.model.empty() == o.app.empty()) return Invalid("name exactly one of --model and --app");
  if ((o.rate_qps > 0) == (o.concurrency > 0)) {
    return Invalid("give exactly one of --rate (open loop) and --concurrency (closed loop)");
  }
  if (o.rate_qps < 0 || !std::isfinite(o.rate_qps)) return Invalid("--rate must be positive");
  if (o.concurrency < 0) return Invalid("--concurrency must be positive");
  if (!(o.duration_s > 0) || !std::isfinite(o.duration_s)) {
    return Invalid("--duration must be positive");
  }
  if (!(o.timeout_s > 0)) return Invalid("the request timeout must be positive");
  if (o.batch < 1) return Invalid("--batch must be at least 1");
  if (o.latency_ms && !(*o.latency_ms > 0)) return Invalid("--latency-ms must be positive");
  if (o.min_accuracy && !(*o.min_accuracy >= 0 && *o.min_accuracy <= 1)) {
    return Invalid("--min-accuracy must be between 0 and 1");
  }
  if (o.max_cost && !(*o.max_cost >= 0)) return Invalid("--max-cost must not be negative");
  if (o.rate_qps > 0) MAITRE_RETURN_IF_ERROR(ParseArrivals(o.arrivals).status());
  if (o.protocol == Protocol::kGrpc && o.grpc_address.empty()) {
    return Invalid("--protocol grpc needs --grpc ADDR");
  }
  return ParseBaseUrl(o.server).status();
}

absl::StatusOr<BenchReport> RunBench(const BenchOptions& o) {
  MAITRE_RETURN_IF_ERROR(ValidateBenchOptions(o));
  const Clock* clock = o.clock ? o.clock : SteadyClock::Get();
  const Nanos timeout = FromSeconds(o.timeout_s);
  const Nanos duration = FromSeconds(o.duration_s);

  Target target;
  target.model = o.model;
  target.app = o.app;
  target.api_key = o.api_key;
  if (!o.app.empty()) {
    target.latency_ms = o.latency_ms;
    target.min_accuracy = o.min_accuracy;
    target.max_cost = o.max_cost;
  }

  // The inputs: the file's rows, shaped and named by the metadata when the
  // server gives it; otherwise zeros, which need the metadata.
  auto info = FetchTargetInfo(o.server, target, std::min(timeout, 10 * kSecond));
  std::vector<std::vector<Tensor>> rows;
  if (!o.input_file.empty()) {
    MAITRE_ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(o.input_file));
    auto parsed = RowsFromNpz(bytes, o.max_input_rows,
                              info.ok() ? info->inputs : std::vector<TensorSpec>{});
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(o.input_file, ": ", parsed.status().message()));
    }
    rows = *std::move(parsed);
  } else {
    if (!info.ok()) {
      return absl::Status(info.status().code(),
                          absl::StrCat("cannot learn the input shape (pass --input FILE.npz, or "
                                       "check --server): ",
                                       info.status().message()));
    }
    MAITRE_ASSIGN_OR_RETURN(std::vector<Tensor> zeros, ZeroRow(info->inputs));
    rows.push_back(std::move(zeros));
  }
  if (o.batch > 1) {
    MAITRE_ASSIGN_OR_RETURN(rows, BatchRequests(rows, o.batch));
  }

  std::unique_ptr<Transport> transport;
  if (o.protocol == Protocol::kGrpc) {
    GrpcTransportOptions g;
    g.address = o.grpc_address;
    g.channels = o.grpc_channels;
    g.timeout = timeout;
    g.connect_timeout = std::min(timeout, 10 * kSecond);
    g.clock = clock;
    MAITRE_ASSIGN_OR_RETURN(transport, CreateGrpcTransport(g, target, rows));
  } else {
    MAITRE_ASSIGN_OR_RETURN(BaseUrl base, ParseBaseUrl(o.server));
    HttpTransportOptions h;
    h.address = base.address;
    h.path_prefix = base.prefix;
    h.binary = o.protocol == Protocol::kHttpBinary;
    h.io_threads = o.io_threads;
    h.max_connections = o.max_connections;
    h.timeout = timeout;
    h.clock = clock;
    MAITRE_ASSIGN_OR_RETURN(transport, CreateHttpTransport(h, target, rows));
  }
  MAITRE_RETURN_IF_ERROR(Probe(*transport, timeout));

  RunDescription description;
  description.model = o.model;
  description.app = o.app;
  description.protocol = std::string(ProtocolName(o.protocol));
  description.slo_ms = o.latency_ms;
  if (!description.slo_ms && info.ok()) description.slo_ms = info->default_latency_ms;
  if (info.ok()) description.variant_accuracy = info->variant_accuracy;

  DriverOptions driver;
  driver.duration = duration;
  driver.drain_timeout = timeout;
  driver.clock = clock;
  driver.progress = o.progress;

  RunResult run;
  if (o.rate_qps > 0) {
    MAITRE_ASSIGN_OR_RETURN(ArrivalsSpec spec, ParseArrivals(o.arrivals));
    std::unique_ptr<ArrivalSource> source;
    description.open_loop = true;
    description.arrivals = o.arrivals;
    description.rate_qps = o.rate_qps;
    if (!spec.trace_file.empty()) {
      MAITRE_ASSIGN_OR_RETURN(std::string text, ReadFileToString(spec.trace_file));
      // The trace's app column, if any, must name this target.
      auto parsed = ParseTraceCsv(text, {o.app.empty() ? o.model : o.app});
      if (!parsed.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(spec.trace_file, ": ", parsed.status().message()));
      }
      int64_t within = 0;
      for (const Arrival& a : *parsed) within += a.time < duration ? 1 : 0;
      description.rate_qps = static_cast<double>(within) / o.duration_s;
      source = CreateReplay(*std::move(parsed), duration);
    } else {
      GeneratorSpec g;
      g.kind = spec.kind;
      g.rate_qps = o.rate_qps;
      g.cv = spec.cv;
      g.duration = duration;
      g.seed = o.seed;
      MAITRE_ASSIGN_OR_RETURN(source, CreateGenerator(g));
    }
    run = RunOpenLoop(*transport, *source, driver);
  } else {
    description.open_loop = false;
    description.concurrency = o.concurrency;
    run = RunClosedLoop(*transport, o.concurrency, driver);
  }
  transport->Shutdown();
  description.connections = transport->connections_opened();
  return BuildReport(run, description);
}

}  // namespace maitre::loadgen
