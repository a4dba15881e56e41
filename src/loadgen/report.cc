#include "loadgen/report.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace maitre::loadgen {
namespace {

double Ms(Nanos ns) { return ToMillis(ns); }

// Columns padded to their widest cell. `align` holds one letter per column,
// 'l' or 'r'; columns past it are left-aligned.
std::string Render(const std::vector<std::vector<std::string>>& rows, absl::string_view align) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    if (width.size() < row.size()) width.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line = "  ";
    for (size_t i = 0; i < row.size(); ++i) {
      if (i > 0) line.append("  ");
      const std::string pad(width[i] - row[i].size(), ' ');
      if (i < align.size() && align[i] == 'r') {
        absl::StrAppend(&line, pad, row[i]);
      } else {
        absl::StrAppend(&line, row[i], pad);
      }
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    absl::StrAppend(&out, line, "\n");
  }
  return out;
}

std::string Fixed(double v, int digits = 3) { return absl::StrFormat("%.*f", digits, v); }

std::vector<std::string> DistributionRow(const std::string& name, const Distribution& d) {
  if (d.count == 0) return {name, "-", "-", "-", "-", "-"};
  return {name, Fixed(d.p50), Fixed(d.p90), Fixed(d.p99), Fixed(d.max), Fixed(d.mean)};
}

nlohmann::json DistributionJson(const Distribution& d) {
  return {{"count", d.count}, {"mean", d.mean}, {"p50", d.p50},
          {"p90", d.p90},     {"p99", d.p99},   {"max", d.max}};
}

// null for "not reported".
nlohmann::json MaybeMs(double v) { return v < 0 ? nlohmann::json(nullptr) : nlohmann::json(v); }

}  // namespace

double Percentile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  q = std::clamp(q, 0.0, 100.0);
  const double rank = q / 100.0 * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

Distribution Summarize(std::vector<double> values) {
  Distribution d;
  if (values.empty()) return d;
  std::sort(values.begin(), values.end());
  d.count = static_cast<int64_t>(values.size());
  d.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  d.p50 = Percentile(values, 50);
  d.p90 = Percentile(values, 90);
  d.p99 = Percentile(values, 99);
  d.max = values.back();
  return d;
}

BenchReport BuildReport(const RunResult& run, const RunDescription& description) {
  BenchReport report;
  report.run = description;
  report.duration_s = ToSeconds(run.load_duration);
  report.window_s = ToSeconds(std::max(run.end, run.start + run.load_duration) - run.start);
  report.max_in_flight = run.max_in_flight;

  std::vector<double> latency, service, lag, queue, compute, total, outside;
  std::vector<int64_t> error_counts(run.error_kinds.size(), 0);
  const double slo = description.slo_ms.value_or(0);
  for (const RequestRecord& r : run.records) {
    ++report.started;
    if (r.sent != 0) lag.push_back(Ms(r.sent - r.scheduled));
    if (r.done == 0) {
      ++report.unfinished;
      ++report.slo_violations;
      continue;
    }
    if (!r.ok) {
      ++report.failed;
      ++report.slo_violations;
      if (r.error >= 0 && static_cast<size_t>(r.error) < error_counts.size()) {
        ++error_counts[r.error];
      }
      continue;
    }
    ++report.ok;
    const double l = Ms(r.done - r.scheduled);
    latency.push_back(l);
    service.push_back(Ms(r.done - r.sent));
    if (description.slo_ms && l > slo) ++report.slo_violations;
    if (r.server.total_us >= 0 || r.server.queue_us >= 0 || r.server.compute_us >= 0) {
      ++report.answers_with_timings;
    }
    if (r.server.queue_us >= 0) queue.push_back(r.server.queue_us / 1000.0);
    if (r.server.compute_us >= 0) compute.push_back(r.server.compute_us / 1000.0);
    if (r.server.total_us >= 0) {
      total.push_back(r.server.total_us / 1000.0);
      outside.push_back(Ms(r.done - r.sent) - r.server.total_us / 1000.0);
    }
  }
  if (!description.slo_ms) report.slo_violations = 0;
  if (report.started > 0) {
    report.slo_violation_ratio =
        static_cast<double>(report.slo_violations) / static_cast<double>(report.started);
  }
  if (run.load_duration > 0) {
    report.send_rate_qps = static_cast<double>(report.started) / ToSeconds(run.load_duration);
  }
  if (report.window_s > 0) {
    report.throughput_qps = static_cast<double>(report.ok) / report.window_s;
  }
  report.latency_ms = Summarize(std::move(latency));
  report.service_ms = Summarize(std::move(service));
  report.client_lag_ms = Summarize(std::move(lag));
  auto median = [](std::vector<double> v) {
    if (v.empty()) return -1.0;
    std::sort(v.begin(), v.end());
    return Percentile(v, 50);
  };
  report.queue_ms_p50 = median(std::move(queue));
  report.compute_ms_p50 = median(std::move(compute));
  report.total_ms_p50 = median(std::move(total));
  report.outside_server_ms_p50 = median(std::move(outside));
  for (size_t i = 0; i < run.error_kinds.size(); ++i) {
    if (error_counts[i] == 0) continue;
    report.errors.push_back({run.error_kinds[i], error_counts[i],
                             i < run.error_examples.size() ? run.error_examples[i] : ""});
  }
  if (report.unfinished > 0) {
    report.errors.push_back({"unfinished", report.unfinished,
                             "no answer before the drain timeout after the load phase"});
  }
  std::stable_sort(report.errors.begin(), report.errors.end(),
                   [](const ErrorCount& a, const ErrorCount& b) { return a.count > b.count; });
  return report;
}

std::string FormatReport(const BenchReport& r) {
  const RunDescription& d = r.run;
  std::string out;
  const std::string target = d.app.empty() ? absl::StrCat("model ", d.model)
                                           : absl::StrCat("app ", d.app);
  const std::string load =
      d.open_loop ? absl::StrFormat("open loop, %s arrivals at %.1f req/s", d.arrivals, d.rate_qps)
                  : absl::StrFormat("closed loop, %d concurrent", d.concurrency);
  absl::StrAppend(&out, "maitre bench: ", target, " over ", d.protocol, ", ", load, ", ",
                  Fixed(r.duration_s, 1), " s\n\n");

  std::vector<std::vector<std::string>> summary;
  summary.push_back({"requests", absl::StrFormat("%d started, %d ok, %d failed, %d unfinished",
                                                 r.started, r.ok, r.failed, r.unfinished)});
  summary.push_back({"throughput", absl::StrFormat("%.1f req/s (sent %.1f req/s; window %.2f s)",
                                                   r.throughput_qps, r.send_rate_qps,
                                                   r.window_s)});
  if (d.slo_ms) {
    summary.push_back({absl::StrCat("SLO ", *d.slo_ms, " ms"),
                       absl::StrFormat("%d violations (%.2f%%, failures included)",
                                       r.slo_violations, 100 * r.slo_violation_ratio)});
  } else {
    summary.push_back({"SLO", "none given (--latency-ms)"});
  }
  if (r.answers_with_timings > 0) {
    auto ms = [](double v) { return v < 0 ? std::string("-") : Fixed(v); };
    summary.push_back({"server (p50)", absl::StrCat("queue ", ms(r.queue_ms_p50), " ms, compute ",
                                                    ms(r.compute_ms_p50), " ms, total ",
                                                    ms(r.total_ms_p50), " ms")});
    summary.push_back({"outside server (p50)",
                       absl::StrCat(ms(r.outside_server_ms_p50),
                                    " ms (client, network, front-end parsing)")});
  } else {
    summary.push_back({"server (p50)", "no timings in the answers"});
  }
  summary.push_back({"in flight", absl::StrFormat("at most %d, over %d connection%s",
                                                  r.max_in_flight, d.connections,
                                                  d.connections == 1 ? "" : "s")});
  out.append(Render(summary, "ll"));
  out.push_back('\n');

  std::vector<std::vector<std::string>> table;
  table.push_back({"MS", "P50", "P90", "P99", "MAX", "MEAN"});
  table.push_back(DistributionRow("latency", r.latency_ms));
  table.push_back(DistributionRow("service", r.service_ms));
  table.push_back(DistributionRow("client lag", r.client_lag_ms));
  out.append(Render(table, "lrrrrr"));

  if (!r.errors.empty()) {
    out.push_back('\n');
    std::vector<std::vector<std::string>> errors;
    errors.push_back({"ERROR", "COUNT", "EXAMPLE"});
    for (const ErrorCount& e : r.errors) {
      std::string example = e.example.size() > 100 ? e.example.substr(0, 97) + "..." : e.example;
      errors.push_back({e.kind, absl::StrCat(e.count), example});
    }
    out.append(Render(errors, "lrl"));
  }
  return out;
}

nlohmann::json ReportJson(const BenchReport& r) {
  const RunDescription& d = r.run;
  nlohmann::json j;
  j["target"] = d.app.empty() ? nlohmann::json{{"model", d.model}} : nlohmann::json{{"app", d.app}};
  j["protocol"] = d.protocol;
  if (d.open_loop) {
    j["load"] = {{"mode", "open"}, {"arrivals", d.arrivals}, {"rate_qps", d.rate_qps}};
  } else {
    j["load"] = {{"mode", "closed"}, {"concurrency", d.concurrency}};
  }
  j["duration_s"] = r.duration_s;
  j["window_s"] = r.window_s;
  j["requests"] = {
      {"started", r.started}, {"ok", r.ok}, {"failed", r.failed}, {"unfinished", r.unfinished}};
  j["send_rate_qps"] = r.send_rate_qps;
  j["throughput_qps"] = r.throughput_qps;
  j["latency_ms"] = DistributionJson(r.latency_ms);
  j["service_ms"] = DistributionJson(r.service_ms);
  j["client_lag_ms"] = DistributionJson(r.client_lag_ms);
  if (d.slo_ms) {
    j["slo"] = {{"latency_ms", *d.slo_ms},
                {"violations", r.slo_violations},
                {"violation_ratio", r.slo_violation_ratio}};
  } else {
    j["slo"] = nullptr;
  }
  j["server"] = {{"answers_with_timings", r.answers_with_timings},
                 {"queue_ms_p50", MaybeMs(r.queue_ms_p50)},
                 {"compute_ms_p50", MaybeMs(r.compute_ms_p50)},
                 {"total_ms_p50", MaybeMs(r.total_ms_p50)},
                 {"outside_server_ms_p50", MaybeMs(r.outside_server_ms_p50)}};
  nlohmann::json errors = nlohmann::json::object();
  nlohmann::json examples = nlohmann::json::object();
  for (const ErrorCount& e : r.errors) {
    errors[e.kind] = e.count;
    examples[e.kind] = e.example;
  }
  j["errors"] = errors;
  j["error_examples"] = examples;
  j["max_in_flight"] = r.max_in_flight;
  j["connections"] = d.connections;
  return j;
}

}  // namespace maitre::loadgen
