#include "sim/report.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/file_util.h"
#include "nlohmann/json.hpp"
#include "sim/svg_chart.h"

namespace maitre::sim {
namespace {

using Json = nlohmann::ordered_json;

// Seconds the reports cover: the trace's length, or longer if queries were
// still being answered after it ended.
size_t ReportSeconds(const Simulator& sim) {
  size_t horizon = static_cast<size_t>((sim.setup().horizon + kSecond - 1) / kSecond);
  return std::max(horizon, sim.metrics().per_second.size());
}

Counters SecondAt(const Simulator& sim, size_t s) {
  const auto& per_second = sim.metrics().per_second;
  return s < per_second.size() ? per_second[s] : Counters();
}

// Instances of each variant (by variant index), in variant order.
std::vector<int> InstancesByVariant(const SimulationSetup& setup) {
  std::vector<int> count(setup.variants.size(), 0);
  for (const SimInstanceSpec& i : setup.instances) ++count[i.variant];
  return count;
}

// "model:variant@worker_type".
std::string VariantLabel(const SimulationSetup& setup, const SimVariant& v) {
  return absl::StrCat(v.key.ToString(), "@", setup.worker_types[v.worker_type].type.name);
}

// Rounded so that the JSON stays readable; the rounding is deterministic.
double Round(double v, double scale = 1e6) { return std::round(v * scale) / scale; }

double Ratio(int64_t a, int64_t b) { return b > 0 ? static_cast<double>(a) / b : 0; }

Json CountersJson(const Counters& c, double duration_s, const LatencyHistogram& latency) {
  Json j;
  j["queries"] = c.arrived;
  j["completed"] = c.completed;
  j["on_time"] = c.on_time;
  j["late"] = c.late;
  j["dropped"] = c.dropped;
  j["rejected"] = c.rejected;
  j["throughput_qps"] = Round(duration_s > 0 ? c.completed / duration_s : 0, 1e3);
  j["goodput_qps"] = Round(duration_s > 0 ? c.on_time / duration_s : 0, 1e3);
  j["slo_violation_ratio"] = Round(Ratio(c.violations(), c.arrived));
  j["effective_accuracy"] = Round(c.completed > 0 ? c.accuracy_sum / c.completed : 0);
  j["below_min_accuracy"] = c.below_min_accuracy;
  j["latency_ms"] = {{"p50", Round(ToMillis(latency.Percentile(50)), 1e3)},
                     {"p90", Round(ToMillis(latency.Percentile(90)), 1e3)},
                     {"p99", Round(ToMillis(latency.Percentile(99)), 1e3)},
                     {"max", Round(ToMillis(latency.max()), 1e3)}};
  return j;
}

}  // namespace

std::string TimeseriesCsv(const Simulator& sim) {
  const SimulationSetup& setup = sim.setup();
  const std::vector<int> instances = InstancesByVariant(setup);
  std::string out =
      "second,demand,served,on_time,late,dropped,rejected,violations,accuracy,cost_dollars";
  for (size_t v = 0; v < setup.variants.size(); ++v) {
    absl::StrAppend(&out, ",instances:", VariantLabel(setup, setup.variants[v]));
  }
  out += '\n';
  const size_t seconds = ReportSeconds(sim);
  for (size_t s = 0; s < seconds; ++s) {
    Counters c = SecondAt(sim, s);
    absl::StrAppendFormat(&out, "%d,%d,%d,%d,%d,%d,%d,%d,", s, c.arrived, c.completed, c.on_time,
                          c.late, c.dropped, c.rejected, c.violations());
    if (c.completed > 0) absl::StrAppendFormat(&out, "%.6f", c.accuracy_sum / c.completed);
    absl::StrAppendFormat(&out, ",%.8f", sim.cost_per_second());
    for (int n : instances) absl::StrAppend(&out, ",", n);
    out += '\n';
  }
  return out;
}

std::string SummaryJson(const Simulator& sim, const std::string& name) {
  const SimulationSetup& setup = sim.setup();
  const SimMetrics& m = sim.metrics();
  const double duration_s = ToSeconds(setup.horizon);
  Json j;
  j["name"] = name;
  j["policies"] = {{"batching", setup.batching.policy}, {"routing", setup.routing}};
  j["duration_s"] = Round(duration_s, 1e3);
  j["simulated_s"] = Round(ToSeconds(m.end_time), 1e3);
  Json totals = CountersJson(m.total, duration_s, m.latency);
  for (auto& [key, value] : totals.items()) j[key] = value;
  j["cost_dollars"] = Round(sim.cost_per_second() * duration_s, 1e8);
  j["batches"] = m.batches;
  j["mean_batch_rows"] =
      Round(m.batches > 0 ? static_cast<double>(m.batch_rows) / m.batches : 0, 1e3);
  Json apps = Json::object();
  for (size_t a = 0; a < setup.apps.size(); ++a) {
    apps[setup.apps[a].name] = CountersJson(m.per_app[a], duration_s, m.latency_per_app[a]);
  }
  j["apps"] = apps;
  return j.dump(2) + "\n";
}

std::string PlotSvg(const Simulator& sim, const std::string& name) {
  const SimulationSetup& setup = sim.setup();
  const size_t seconds = ReportSeconds(sim);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  ChartSeries demand{"demand", "#1f77b4", {}}, served{"served", "#2ca02c", {}},
      on_time{"on time", "#98df8a", {}};
  ChartSeries violations{"violations", "#d62728", {}}, dropped{"dropped", "#ff7f0e", {}};
  ChartSeries accuracy{"effective accuracy", "#9467bd", {}};
  ChartSeries cost{"cost", "#8c564b", {}};
  for (size_t s = 0; s < seconds; ++s) {
    Counters c = SecondAt(sim, s);
    demand.y.push_back(c.arrived);
    served.y.push_back(c.completed);
    on_time.y.push_back(c.on_time);
    violations.y.push_back(c.violations());
    dropped.y.push_back(c.dropped);
    accuracy.y.push_back(c.completed > 0 ? c.accuracy_sum / c.completed : nan);
    cost.y.push_back(sim.cost_per_second() * 3600);
  }
  std::vector<ChartPanel> panels;
  panels.push_back({"Demand and served", "queries/s", {demand, served, on_time}, true});
  panels.push_back(
      {"SLO violations (late, dropped or rejected)", "queries/s", {violations, dropped}, true});
  panels.push_back({"Effective accuracy of served queries", "accuracy", {accuracy}, false});
  panels.push_back({"Cost", "$/hour", {cost}, true});
  ChartPanel inst{"Instances by variant", "instances", {}, true};
  const char* const palette[] = {"#17becf", "#bcbd22", "#e377c2", "#7f7f7f", "#1f77b4", "#ff7f0e"};
  const std::vector<int> counts = InstancesByVariant(setup);
  for (size_t v = 0; v < setup.variants.size(); ++v) {
    if (counts[v] == 0) continue;
    ChartSeries s{VariantLabel(setup, setup.variants[v]), palette[inst.series.size() % 6],
                  std::vector<double>(seconds, counts[v])};
    inst.series.push_back(std::move(s));
  }
  panels.push_back(std::move(inst));
  ChartOptions options;
  options.title = absl::StrCat(name, " (batching: ", setup.batching.policy, ")");
  return RenderLineChart(options, panels);
}

absl::Status WriteReports(const Simulator& sim, const std::string& name,
                          const std::string& out_dir) {
  if (auto s = MakeDirectories(out_dir); !s.ok()) return s;
  if (auto s = WriteFileAtomically(out_dir + "/timeseries.csv", TimeseriesCsv(sim)); !s.ok())
    return s;
  if (auto s = WriteFileAtomically(out_dir + "/summary.json", SummaryJson(sim, name)); !s.ok())
    return s;
  return WriteFileAtomically(out_dir + "/plot.svg", PlotSvg(sim, name));
}

}  // namespace maitre::sim
