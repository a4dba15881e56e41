#include "loadgen/report.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"

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

// null for "not reported" or "unknown" (a negative value).
nlohmann::json NullIfUnknown(double v) { return v < 0 ? nlohmann::json(nullptr) : nlohmann::json(v); }

// Mean of a sum over a count; -1 for none.
double MeanOrUnknown(double sum, int64_t count) {
  return count > 0 ? sum / static_cast<double>(count) : -1.0;
}

// A second of the run while it is being counted.
struct SecondTally {
  SecondOfRun row;
  std::vector<double> latency;
  std::vector<int64_t> served;  // by the order variants were first seen
  double accuracy_sum = 0;
  int64_t accuracy_count = 0;
};

// Counts answers by the variant that gave them, overall and per second, and
// turns the counts into the report's served table, effective accuracy and
// series (variants ordered by answers, most first).
class VariantTally {
 public:
  explicit VariantTally(const std::map<std::string, double>& accuracy) : accuracy_(accuracy) {}

  void Count(const std::string& variant, SecondTally* second) {
    auto [it, added] = index_.try_emplace(variant, served_.size());
    if (added) {
      auto known = accuracy_.find(variant);
      served_.push_back({variant, 0, known == accuracy_.end() ? -1.0 : known->second});
    }
    ServedCount& count = served_[it->second];
    ++count.count;
    if (second->served.size() <= it->second) second->served.resize(it->second + 1, 0);
    ++second->served[it->second];
    if (count.accuracy >= 0) {
      accuracy_sum_ += count.accuracy;
      ++accuracy_count_;
      second->accuracy_sum += count.accuracy;
      ++second->accuracy_count;
    }
  }

  void Finish(BenchReport* report, std::vector<SecondTally> seconds) {
    std::vector<size_t> order(served_.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return served_[a].count > served_[b].count; });
    for (size_t i : order) report->served.push_back(served_[i]);
    report->effective_accuracy = MeanOrUnknown(accuracy_sum_, accuracy_count_);
    for (size_t s = 0; s < seconds.size(); ++s) {
      SecondTally& tally = seconds[s];
      SecondOfRun row = tally.row;
      row.second = static_cast<int64_t>(s);
      std::sort(tally.latency.begin(), tally.latency.end());
      row.latency_p99_ms = Percentile(tally.latency, 99);
      row.effective_accuracy = MeanOrUnknown(tally.accuracy_sum, tally.accuracy_count);
      tally.served.resize(served_.size(), 0);
      for (size_t i : order) row.served.push_back(tally.served[i]);
      report->series.push_back(std::move(row));
    }
  }

 private:
  const std::map<std::string, double>& accuracy_;
  std::map<std::string, size_t> index_;
  std::vector<ServedCount> served_;
  double accuracy_sum_ = 0;
  int64_t accuracy_count_ = 0;
};

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
  double batch_rows_sum = 0;
  int64_t batch_rows_count = 0;
  std::vector<int64_t> error_counts(run.error_kinds.size(), 0);
  std::vector<std::vector<double>> error_latency(run.error_kinds.size());
  const double slo = description.slo_ms.value_or(0);
  VariantTally variants(description.variant_accuracy);
  std::vector<SecondTally> seconds;
  for (const RequestRecord& r : run.records) {
    ++report.started;
    const int64_t second = std::max<int64_t>(0, (r.scheduled - run.start) / kSecond);
    if (seconds.size() <= static_cast<size_t>(second)) seconds.resize(second + 1);
    SecondTally& this_second = seconds[second];
    ++this_second.row.started;
    if (r.sent != 0) lag.push_back(Ms(r.sent - r.scheduled));
    if (r.done == 0 || !r.ok) {
      ++report.slo_violations;
      ++this_second.row.failed;
      ++this_second.row.slo_violations;
    }
    if (r.done == 0) {
      ++report.unfinished;
      report.failures.push_back({ToSeconds(r.scheduled - run.start), -1, "unfinished", ""});
      continue;
    }
    if (!r.ok) {
      ++report.failed;
      FailedRequest failure{ToSeconds(r.scheduled - run.start),
                            r.sent != 0 ? Ms(r.done - r.sent) : -1, "", ""};
      if (r.error >= 0 && static_cast<size_t>(r.error) < run.error_kinds.size()) {
        failure.kind = run.error_kinds[r.error];
      }
      if (r.message >= 0 && static_cast<size_t>(r.message) < run.error_messages.size()) {
        failure.message = run.error_messages[r.message];
      }
      report.failures.push_back(std::move(failure));
      if (r.error >= 0 && static_cast<size_t>(r.error) < error_counts.size()) {
        ++error_counts[r.error];
        if (r.sent != 0) error_latency[r.error].push_back(Ms(r.done - r.sent));
      }
      continue;
    }
    ++report.ok;
    const double l = Ms(r.done - r.scheduled);
    latency.push_back(l);
    service.push_back(Ms(r.done - r.sent));
    if (description.slo_ms && l > slo) {
      ++report.slo_violations;
      ++this_second.row.slo_violations;
    }
    ++this_second.row.ok;
    this_second.latency.push_back(l);
    variants.Count(r.server.variant, &this_second);
    if (r.server.total_us >= 0 || r.server.queue_us >= 0 || r.server.compute_us >= 0) {
      ++report.answers_with_timings;
    }
    if (r.server.queue_us >= 0) queue.push_back(r.server.queue_us / 1000.0);
    if (r.server.compute_us >= 0) compute.push_back(r.server.compute_us / 1000.0);
    if (r.server.batch_rows > 0) {
      batch_rows_sum += static_cast<double>(r.server.batch_rows);
      ++batch_rows_count;
    }
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
  if (batch_rows_count > 0) report.batch_rows_mean = batch_rows_sum / batch_rows_count;
  for (size_t i = 0; i < run.error_kinds.size(); ++i) {
    if (error_counts[i] == 0) continue;
    report.errors.push_back({run.error_kinds[i], error_counts[i],
                             i < run.error_examples.size() ? run.error_examples[i] : "",
                             Summarize(std::move(error_latency[i]))});
  }
  if (report.unfinished > 0) {
    report.errors.push_back({"unfinished", report.unfinished,
                             "no answer before the drain timeout after the load phase", {}});
  }
  std::stable_sort(report.errors.begin(), report.errors.end(),
                   [](const ErrorCount& a, const ErrorCount& b) { return a.count > b.count; });
  variants.Finish(&report, std::move(seconds));
  if (!description.slo_ms) {
    for (SecondOfRun& s : report.series) s.slo_violations = 0;
  }
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
    if (r.batch_rows_mean > 0) {
      summary.push_back({"server batch (mean)",
                         absl::StrFormat("%.1f rows in the batch each answer ran in",
                                         r.batch_rows_mean)});
    }
  } else {
    summary.push_back({"server (p50)", "no timings in the answers"});
  }
  if (r.effective_accuracy >= 0) {
    summary.push_back({"effective accuracy",
                       absl::StrFormat("%.4f (mean over the answering variants)",
                                       r.effective_accuracy)});
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

  if (!r.served.empty() && !(r.served.size() == 1 && r.served[0].variant.empty())) {
    out.push_back('\n');
    std::vector<std::vector<std::string>> served;
    served.push_back({"SERVED BY", "ANSWERS", "SHARE", "ACCURACY"});
    for (const ServedCount& v : r.served) {
      served.push_back({v.variant.empty() ? "(unnamed)" : v.variant, absl::StrCat(v.count),
                        absl::StrFormat("%.1f%%", 100.0 * static_cast<double>(v.count) /
                                                      static_cast<double>(std::max<int64_t>(r.ok, 1))),
                        v.accuracy < 0 ? "-" : Fixed(v.accuracy, 4)});
    }
    out.append(Render(served, "lrrr"));
  }
  if (!r.errors.empty()) {
    out.push_back('\n');
    std::vector<std::vector<std::string>> errors;
    errors.push_back({"ERROR", "COUNT", "MEDIAN MS", "P99 MS", "EXAMPLE"});
    for (const ErrorCount& e : r.errors) {
      std::string example = e.example.size() > 100 ? e.example.substr(0, 97) + "..." : e.example;
      const bool timed = e.latency_ms.count > 0;
      errors.push_back({e.kind, absl::StrCat(e.count), timed ? Fixed(e.latency_ms.p50) : "-",
                        timed ? Fixed(e.latency_ms.p99) : "-", example});
    }
    out.append(Render(errors, "lrrrl"));
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
                 {"queue_ms_p50", NullIfUnknown(r.queue_ms_p50)},
                 {"compute_ms_p50", NullIfUnknown(r.compute_ms_p50)},
                 {"total_ms_p50", NullIfUnknown(r.total_ms_p50)},
                 {"outside_server_ms_p50", NullIfUnknown(r.outside_server_ms_p50)},
                 {"batch_rows_mean", NullIfUnknown(r.batch_rows_mean)}};
  nlohmann::json errors = nlohmann::json::object();
  nlohmann::json examples = nlohmann::json::object();
  nlohmann::json error_latency = nlohmann::json::object();
  for (const ErrorCount& e : r.errors) {
    errors[e.kind] = e.count;
    examples[e.kind] = e.example;
    if (e.latency_ms.count > 0) error_latency[e.kind] = DistributionJson(e.latency_ms);
  }
  j["errors"] = errors;
  j["error_examples"] = examples;
  j["error_latency_ms"] = error_latency;
  j["max_in_flight"] = r.max_in_flight;
  j["connections"] = d.connections;
  nlohmann::json served = nlohmann::json::array();
  for (const ServedCount& v : r.served) {
    served.push_back({{"variant", v.variant},
                      {"answers", v.count},
                      {"accuracy", NullIfUnknown(v.accuracy)}});
  }
  j["served"] = served;
  j["effective_accuracy"] = NullIfUnknown(r.effective_accuracy);
  return j;
}

std::string SeriesCsv(const BenchReport& r) {
  std::string out = "second,started,ok,failed,slo_violations,latency_p99_ms,effective_accuracy";
  for (const ServedCount& v : r.served) absl::StrAppend(&out, ",", v.variant);
  out.push_back('\n');
  for (const SecondOfRun& s : r.series) {
    absl::StrAppend(&out, s.second, ",", s.started, ",", s.ok, ",", s.failed, ",",
                    s.slo_violations, ",", Fixed(s.latency_p99_ms), ",",
                    s.effective_accuracy < 0 ? "" : Fixed(s.effective_accuracy, 4));
    for (int64_t n : s.served) absl::StrAppend(&out, ",", n);
    out.push_back('\n');
  }
  return out;
}

std::string FailuresCsv(const BenchReport& r) {
  auto quoted = [](const std::string& text) {
    return absl::StrCat("\"", absl::StrReplaceAll(text, {{"\"", "\"\""}}), "\"");
  };
  std::string out = "at_s,latency_ms,kind,message\n";
  for (const FailedRequest& f : r.failures) {
    absl::StrAppend(&out, Fixed(f.at_s, 3), ",", f.latency_ms < 0 ? "" : Fixed(f.latency_ms), ",",
                    quoted(f.kind), ",", quoted(f.message), "\n");
  }
  return out;
}

}  // namespace maitre::loadgen
