#include "sim/report.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
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

// The cluster's shape at the end of each second: ready replicas by variant
// and workers (up or starting) by type.
struct Shape {
  std::vector<std::vector<int>> replicas;  // [second][variant]
  std::vector<std::vector<int>> workers;   // [second][worker type]
};

Shape ShapeBySecond(const Simulator& sim, size_t seconds) {
  const SimulationSetup& setup = sim.setup();
  Shape shape;
  std::vector<int> replicas(setup.variants.size(), 0), workers(setup.worker_types.size(), 0);
  const std::vector<ShapeChange>& changes = sim.shape_changes();
  size_t next = 0;
  for (size_t s = 0; s < seconds; ++s) {
    const Nanos end = static_cast<Nanos>(s + 1) * kSecond;
    for (; next < changes.size() && changes[next].at < end; ++next) {
      const ShapeChange& c = changes[next];
      if (c.variant >= 0) replicas[c.variant] += c.delta;
      if (c.worker_type >= 0) workers[c.worker_type] += c.delta;
    }
    shape.replicas.push_back(replicas);
    shape.workers.push_back(workers);
  }
  return shape;
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
  std::string out =
      "second,demand,served,on_time,late,dropped,rejected,violations,accuracy,cost_dollars";
  for (size_t v = 0; v < setup.variants.size(); ++v) {
    absl::StrAppend(&out, ",instances:", VariantLabel(setup, setup.variants[v]));
  }
  for (const SimWorkerType& t : setup.worker_types) absl::StrAppend(&out, ",workers:", t.type.name);
  out += '\n';
  const size_t seconds = ReportSeconds(sim);
  const Shape shape = ShapeBySecond(sim, seconds);
  for (size_t s = 0; s < seconds; ++s) {
    Counters c = SecondAt(sim, s);
    absl::StrAppendFormat(&out, "%d,%d,%d,%d,%d,%d,%d,%d,", s, c.arrived, c.completed, c.on_time,
                          c.late, c.dropped, c.rejected, c.violations());
    if (c.completed > 0) absl::StrAppendFormat(&out, "%.6f", c.accuracy_sum / c.completed);
    const Nanos from = static_cast<Nanos>(s) * kSecond;
    absl::StrAppendFormat(&out, ",%.8f", sim.CostBetween(from, from + kSecond));
    for (int n : shape.replicas[s]) absl::StrAppend(&out, ",", n);
    for (int n : shape.workers[s]) absl::StrAppend(&out, ",", n);
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
  if (sim.managed()) {
    j["policies"]["allocator"] = setup.control.allocator;
    j["policies"]["router"] = setup.control.router;
    j["policies"]["selection_loads"] = setup.control.selection_loads;
    j["policies"]["model_autoscaler"] = ModelAutoscalingName(setup.control.model_autoscaling);
    j["policies"]["cluster_autoscaler"] = setup.control.cluster_autoscaling ? "on" : "off";
  }
  j["duration_s"] = Round(duration_s, 1e3);
  j["simulated_s"] = Round(ToSeconds(m.end_time), 1e3);
  Json totals = CountersJson(m.total, duration_s, m.latency);
  for (auto& [key, value] : totals.items()) j[key] = value;
  // The workers' paid time, and the burst pool's requests.
  const double cost = sim.CostBetween(0, setup.horizon) + m.burst_cost;
  j["cost_dollars"] = Round(cost, 1e8);
  if (setup.burst_pool.enabled) {
    j["burst_pool"] = {
        {"requests", m.burst_requests},
        {"share_of_requests", Round(Ratio(m.burst_requests, m.total.arrived))},
        {"cold_starts", m.burst_cold_starts},
        {"cost_dollars", Round(m.burst_cost, 1e8)},
        {"share_of_cost", Round(cost > 0 ? m.burst_cost / cost : 0)}};
    // How the Bouncer's estimates compared with the answers of the
    // queries it admitted (policy::EstimateTally): answer ÷ estimate.
    const policy::EstimateTally& b = m.bouncer;
    j["burst_pool"]["bouncer"] = {
        {"admitted_on_estimate", b.count()},
        {"answer_over_estimate_p10", Round(b.Quantile(0.1))},
        {"answer_over_estimate_p50", Round(b.Quantile(0.5))},
        {"answer_over_estimate_p90", Round(b.Quantile(0.9))},
        {"answer_over_estimate_p99", Round(b.Quantile(0.99))},
        {"late", b.late()}};
  }
  j["cost_per_hour"] = Round(duration_s > 0 ? cost / duration_s * 3600 : 0, 1e6);
  if (setup.interruptions.enabled) {
    const ControlCounters& c = sim.control_counters();
    j["interruptions"] = {{"notices", c.workers_interrupted},
                          {"queries_lost", c.queries_lost_to_interruptions}};
  }
  // Workers by type: paid worker-seconds, the most at once, and at the end.
  const size_t seconds = ReportSeconds(sim);
  const Shape shape = ShapeBySecond(sim, seconds);
  const std::vector<double> worker_seconds = sim.WorkerSeconds();
  Json workers = Json::object();
  for (size_t t = 0; t < setup.worker_types.size(); ++t) {
    int most = 0;
    for (const auto& row : shape.workers) most = std::max(most, row[t]);
    workers[setup.worker_types[t].type.name] = {
        {"worker_seconds", Round(worker_seconds[t], 1e3)},
        {"mean", Round(duration_s > 0 ? worker_seconds[t] / duration_s : 0, 1e3)},
        {"max", most},
        {"at_end", shape.workers.empty() ? 0 : shape.workers.back()[t]}};
  }
  j["workers"] = workers;
  // INFaaS §6.2's cost: every ready replica priced by its memory footprint,
  // second by second, on the types that set a rate.
  bool memory_priced = false;
  for (const SimWorkerType& t : setup.worker_types) memory_priced |= t.memory_cost_per_gb_s > 0;
  if (memory_priced) {
    std::vector<double> by_type(setup.worker_types.size(), 0);
    for (const auto& row : shape.replicas) {
      for (size_t v = 0; v < setup.variants.size(); ++v) {
        const SimVariant& variant = setup.variants[v];
        by_type[variant.worker_type] += row[v] * variant.profile.memory_mb() / 1024.0 *
                                        setup.worker_types[variant.worker_type].memory_cost_per_gb_s;
      }
    }
    Json memory = Json::object();
    double total = 0;
    for (size_t t = 0; t < by_type.size(); ++t) {
      memory[setup.worker_types[t].type.name] = Round(by_type[t], 1e6);
      total += by_type[t];
    }
    j["instance_memory_cost"] = {{"total", Round(total, 1e6)}, {"by_type", memory}};
  }
  if (!setup.jobs.empty()) {
    // Offline jobs: their progress, and the throttle's view at each report.
    Json jobs = Json::array();
    for (const Simulator::JobProgress& p : sim.jobs()) {
      jobs.push_back({{"rows", p.rows},
                      {"done_rows", p.done_rows},
                      {"started_s", p.started >= 0 ? Json(Round(ToSeconds(p.started), 1e3)) : Json()},
                      {"finished_s",
                       p.finished >= 0 ? Json(Round(ToSeconds(p.finished), 1e3)) : Json()}});
    }
    Json samples = Json::array();
    double paused_s = 0;
    const auto& all = sim.job_samples();
    for (size_t k = 0; k < all.size(); ++k) {
      const Simulator::JobSample& x = all[k];
      if (x.paused && k + 1 < all.size()) paused_s += ToSeconds(all[k + 1].at - x.at);
      samples.push_back({Round(ToSeconds(x.at), 1e3), Round(x.online_utilisation, 1e4),
                         Round(x.utilisation, 1e4), x.paused ? 1 : 0, x.done_rows});
    }
    j["jobs"] = {{"jobs", jobs},
                 {"paused_s", Round(paused_s, 1e3)},
                 {"samples_columns", {"t_s", "online_utilisation", "utilisation", "paused",
                                      "done_rows"}},
                 {"samples", samples}};
  }
  j["batches"] = m.batches;
  j["mean_batch_rows"] =
      Round(m.batches > 0 ? static_cast<double>(m.batch_rows) / m.batches : 0, 1e3);
  Json apps = Json::object();
  for (size_t a = 0; a < setup.apps.size(); ++a) {
    apps[setup.apps[a].name] = CountersJson(m.per_app[a], duration_s, m.latency_per_app[a]);
  }
  j["apps"] = apps;
  if (sim.managed()) {
    const ControlCounters& c = sim.control_counters();
    Json actions = Json::object();
    using Kind = policy::ModelScaleAction::Kind;
    for (Kind k : {Kind::kReplicate, Kind::kAddVariant, Kind::kUpgrade, Kind::kDowngrade,
                   Kind::kRemoveReplica, Kind::kNeedsPlacement}) {
      actions[std::string(policy::ModelScaleActionKindName(k))] =
          c.model_actions[static_cast<int>(k)];
    }
    j["control"] = {{"model_actions", actions},
                    {"loads_by_selection", c.loads_by_selection},
                    {"loads_by_selection_for_capacity", c.loads_by_selection_for_capacity},
                    {"capacity_moves", c.capacity_moves},
                    {"loads_by_autoscaler", c.loads_by_autoscaler},
                    {"loads_by_placement", c.loads_by_placement},
                    {"loads_refused", c.loads_refused},
                    {"replicas_removed", c.replicas_removed},
                    {"vacated", c.vacated},
                    {"migrations", c.migrations},
                    {"migrations_retired", c.migrations_retired},
                    {"workers_added", c.workers_added},
                    {"workers_removed", c.workers_removed},
                    {"workers_lost", c.workers_lost},
                    {"state_changes", c.state_changes}};
  }
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
    const Nanos from = static_cast<Nanos>(s) * kSecond;
    cost.y.push_back(sim.CostBetween(from, from + kSecond) * 3600);
  }
  std::vector<ChartPanel> panels;
  panels.push_back({"Demand and served", "queries/s", {demand, served, on_time}, true});
  panels.push_back(
      {"SLO violations (late, dropped or rejected)", "queries/s", {violations, dropped}, true});
  panels.push_back({"Effective accuracy of served queries", "accuracy", {accuracy}, false});
  panels.push_back({"Cost", "$/hour", {cost}, true});
  const char* const palette[] = {"#17becf", "#bcbd22", "#e377c2", "#7f7f7f", "#1f77b4", "#ff7f0e"};
  const Shape shape = ShapeBySecond(sim, seconds);
  ChartPanel inst{"Replicas by variant", "replicas", {}, true};
  for (size_t v = 0; v < setup.variants.size(); ++v) {
    ChartSeries s{VariantLabel(setup, setup.variants[v]), palette[inst.series.size() % 6], {}};
    bool any = false;
    for (size_t t = 0; t < seconds; ++t) {
      s.y.push_back(shape.replicas[t][v]);
      any |= shape.replicas[t][v] > 0;
    }
    if (any) inst.series.push_back(std::move(s));
  }
  panels.push_back(std::move(inst));
  if (sim.managed()) {
    ChartPanel workers{"Workers by type (up or starting)", "workers", {}, true};
    for (size_t w = 0; w < setup.worker_types.size(); ++w) {
      ChartSeries s{setup.worker_types[w].type.name, palette[(workers.series.size() + 3) % 6], {}};
      bool any = false;
      for (size_t t = 0; t < seconds; ++t) {
        s.y.push_back(shape.workers[t][w]);
        any |= shape.workers[t][w] > 0;
      }
      if (any) workers.series.push_back(std::move(s));
    }
    panels.push_back(std::move(workers));
  }
  ChartOptions options;
  options.title = absl::StrCat(name, " (batching: ", setup.batching.policy, ")");
  if (sim.managed()) {
    absl::StrAppend(&options.title, ", selection, model autoscaler ",
                    ModelAutoscalingName(setup.control.model_autoscaling), ", cluster autoscaler ",
                    setup.control.cluster_autoscaling ? "on" : "off");
  }
  return RenderLineChart(options, panels);
}

absl::Status WriteReports(const Simulator& sim, const std::string& name,
                          const std::string& out_dir) {
  if (auto s = MakeDirectories(out_dir); !s.ok()) return s;
  if (auto s = WriteFileAtomically(out_dir + "/timeseries.csv", TimeseriesCsv(sim)); !s.ok())
    return s;
  if (auto s = WriteFileAtomically(out_dir + "/summary.json", SummaryJson(sim, name)); !s.ok())
    return s;
  if (auto s = WriteFileAtomically(out_dir + "/plot.svg", PlotSvg(sim, name)); !s.ok()) return s;
  if (!sim.managed()) return absl::OkStatus();
  return WriteFileAtomically(out_dir + "/control.log",
                             absl::StrJoin(sim.control_log(), "\n") + "\n");
}

}  // namespace maitre::sim
