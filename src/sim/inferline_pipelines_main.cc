// inferline_pipelines: the simulated experiment of
// examples/experiments/inferline-pipelines (docs/experiments.md,
// "inferline-pipelines"). Four pipeline shapes after InferLine's Fig. 2
// with SYNTHETIC stage profiles; for each arrival process and objective,
// InferLine's planner against CG-Mean and CG-Peak (§6, §7.1, Fig. 5), each
// planned on one trace and measured by the estimator on another with the
// same rate and CV; then the tuner on traces whose rate, and then whose
// burstiness, changes (§7.2, Fig. 10 and 11 in shape), beside CG-Mean and
// CG-Peak tuned by AutoScale (§6, Fig. 7 in shape).
//
//   inferline_pipelines [--out summary.json] [--quick] [--tuner-only]
//
// --tuner-only runs the tuner's traces alone and puts them in place of
// those of the summary already at --out.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_format.h"
#include "core/rng.h"
#include "pipeline/coarse_grained.h"
#include "pipeline/coarse_grained_tuner.h"
#include "pipeline/planner.h"
#include "pipeline/tuner.h"
#include "sim/pipeline_estimator.h"
#include "sim/simulator.h"

namespace maitre::sim {
namespace {

using nlohmann::json;
using pipeline::Hardware;
using pipeline::PipelineConfig;
using pipeline::Plan;
using pipeline::PlanningProblem;
using pipeline::PlanningStage;

// Prices by §6's cost model (an instance's price split over its GPUs or
// vCPUs), with on-demand prices we assume: a K80 at $0.70/h, a vCPU at
// $0.05/h.
constexpr int32_t kGpu = 0, kCpu = 1;
std::vector<Hardware> Prices() { return {{"k80", 0.70}, {"cpu", 0.05}}; }

// p50 = base + per_row · batch, at batches 1..64 (p99 = p50: the estimator
// runs the p50).
Profile Linear(double base_ms, double per_row_ms) {
  std::vector<LatencyPoint> points;
  for (int b = 1; b <= 64; b *= 2) points.push_back({b, base_ms + per_row_ms * b,
                                                     base_ms + per_row_ms * b});
  return *Profile::Create(std::move(points), 0, 0);
}

// SYNTHETIC stage profiles, shaped like Fig. 3 and §2.1: preprocessing
// gains nothing from batching or a GPU; the CNNs batch on the GPU with
// diminishing returns and are one to two orders of magnitude slower on a
// CPU. ResNet152 is set to the paper's 50.6 qps on a K80 and 0.6 qps on a
// CPU at batch 1; the others are scaled from it by rough model size.
PlanningStage Preprocess(std::vector<pipeline::StageEdge> in) {
  return {"preprocess", std::move(in), {{kCpu, Linear(0, 3)}}};
}
PlanningStage Res152(std::string name, std::vector<pipeline::StageEdge> in) {
  return {std::move(name), std::move(in),
          {{kGpu, Linear(13.8, 6)}, {kCpu, Linear(66, 1600)}}};
}
PlanningStage Res50(std::string name, std::vector<pipeline::StageEdge> in) {
  return {std::move(name), std::move(in), {{kGpu, Linear(7, 2.5)}, {kCpu, Linear(30, 600)}}};
}

struct Shape {
  std::string name;
  PlanningProblem problem;
};

std::vector<Shape> Shapes() {
  std::vector<Shape> shapes;
  {  // Image processing: preprocess -> ResNet152.
    PlanningProblem p{Prices(), {}};
    p.stages = {Preprocess({}), Res152("res152", {{0, 1}})};
    shapes.push_back({"image-processing", p});
  }
  {  // Video monitoring: a detector, then vehicle and person branches.
    PlanningProblem p{Prices(), {}};
    p.stages = {{"yolo", {}, {{kGpu, Linear(25, 8)}, {kCpu, Linear(200, 2500)}}},
                Res50("vehicle", {{0, 0.6}}),
                {"alpr", {{1, 0.5}}, {{kCpu, Linear(5, 25)}}},
                Res50("person", {{0, 0.3}})};
    shapes.push_back({"video-monitoring", p});
  }
  {  // Social media: an image classifier beside language identification,
     // which translates the posts not in English.
    PlanningProblem p{Prices(), {}};
    p.stages = {Res152("image", {}),
                {"lang-id", {}, {{kGpu, Linear(5, 0.1)}, {kCpu, Linear(1, 2)}}},
                {"nmt", {{1, 0.3}}, {{kGpu, Linear(30, 6)}, {kCpu, Linear(100, 300)}}}};
    shapes.push_back({"social-media", p});
  }
  {  // TF cascade: a fast ResNet50, and the slow model when it is unsure.
    PlanningProblem p{Prices(), {}};
    p.stages = {Res50("fast", {}),
                {"slow", {{0, 0.3}}, {{kGpu, Linear(12, 4)}, {kCpu, Linear(60, 1000)}}}};
    shapes.push_back({"tf-cascade", p});
  }
  return shapes;
}

// Gamma inter-arrivals whose rate and CV may change over time. `cv2` is the
// paper's CV, σ²/µ² of the inter-arrival time (§2.1); the shape is 1/cv2.
std::vector<Nanos> Trace(const std::function<double(double)>& rate_at,
                         const std::function<double(double)>& cv2_at, double seconds,
                         uint64_t seed) {
  Rng rng(seed);
  std::vector<Nanos> out;
  double t = 0;
  while (true) {
    const double shape = 1 / cv2_at(t);
    t += rng.Gamma(shape, 1 / (shape * rate_at(t)));
    if (t >= seconds) break;
    out.push_back(FromSeconds(t));
  }
  return out;
}
std::vector<Nanos> Steady(double qps, double cv2, double seconds, uint64_t seed) {
  return Trace([qps](double) { return qps; }, [cv2](double) { return cv2; }, seconds, seed);
}

absl::StatusOr<PipelineEstimate> Measure(const PlanningProblem& p, const PipelineConfig& c,
                                         const std::vector<Nanos>& arrivals,
                                         std::vector<ReplicaChange> changes = {}) {
  PipelineEstimatorOptions o;
  o.changes = std::move(changes);
  return EstimatePipeline(p, c, arrivals, o);
}

double Attainment(const PipelineEstimate& e, double slo_ms, size_t from = 0,
                  size_t to = SIZE_MAX) {
  to = std::min(to, e.latency_ms.size());
  if (from >= to) return 1;
  size_t met = 0;
  for (size_t i = from; i < to; ++i) met += e.latency_ms[i] <= slo_ms;
  return static_cast<double>(met) / (to - from);
}

json PlanRow(const PlanningProblem& p, const absl::StatusOr<Plan>& plan,
             const std::vector<Nanos>& live, double slo_ms) {
  if (!plan.ok()) return {{"error", std::string(plan.status().message())}};
  auto e = Measure(p, plan->config, live);
  if (!e.ok()) return {{"error", std::string(e.status().message())}};
  return {{"config", pipeline::DescribeConfig(p, plan->config)},
          {"cost_per_hour", plan->cost_per_hour},
          {"planned_p99_ms", plan->p99_ms},
          {"measured_p99_ms", e->p99_ms},
          {"attainment", Attainment(*e, slo_ms)}};
}

// §7.1 / Fig. 5: the planner against the coarse-grained baselines.
json Fig5(bool quick) {
  json rows = json::array();
  const double seconds = quick ? 30 : 60;
  const std::vector<double> slos =
      quick ? std::vector<double>{150} : std::vector<double>{150, 300, 1000};
  std::printf("%-17s %5s %4s %6s | %-22s | %-22s | %-22s | %s\n", "pipeline", "qps", "CV",
              "SLO", "InferLine $/h P99 att", "CG-Mean $/h P99 att", "CG-Peak $/h P99 att",
              "Peak/IL");
  uint64_t seed = 100;
  for (const Shape& s : Shapes()) {
    for (double qps : {150.0, 300.0}) {
      for (double cv2 : {0.1, 1.0, 4.0}) {
        const std::vector<Nanos> sample = Steady(qps, cv2, seconds, ++seed);
        const std::vector<Nanos> live = Steady(qps, cv2, seconds, ++seed);
        for (double slo : slos) {
          const pipeline::LatencyOracle oracle = EstimatorOracle(s.problem, sample, slo);
          const pipeline::LatencyOracle full = EstimatorOracle(s.problem, sample);
          pipeline::PlannerOptions o;
          o.slo_ms = slo;
          o.max_batch = 64;
          o.max_replicas = 128;
          pipeline::Planner planner(s.problem, oracle, o);
          json row = {{"pipeline", s.name}, {"qps", qps}, {"cv", cv2}, {"slo_ms", slo}};
          row["inferline"] = PlanRow(s.problem, planner.MinimizeCost(), live, slo);
          row["cg_mean"] = PlanRow(
              s.problem, PlanCoarseGrained(s.problem, sample, o,
                                           pipeline::CoarseGrainedRate::kMean, full),
              live, slo);
          row["cg_peak"] = PlanRow(
              s.problem, PlanCoarseGrained(s.problem, sample, o,
                                           pipeline::CoarseGrainedRate::kPeak, full),
              live, slo);
          auto cell = [](const json& r) {
            if (r.contains("error")) return std::string("(none)");
            return absl::StrFormat("%6.2f %6.1f %6.2f%%", r["cost_per_hour"].get<double>(),
                                   r["measured_p99_ms"].get<double>(),
                                   100 * r["attainment"].get<double>());
          };
          std::string ratio = "-";
          if (!row["inferline"].contains("error") && !row["cg_peak"].contains("error")) {
            row["peak_over_inferline"] = row["cg_peak"]["cost_per_hour"].get<double>() /
                                         row["inferline"]["cost_per_hour"].get<double>();
            ratio = absl::StrFormat("%.2fx", row["peak_over_inferline"].get<double>());
          }
          std::printf("%-17s %5.0f %4.1f %6.0f | %-22s | %-22s | %-22s | %s\n", s.name.c_str(),
                      qps, cv2, slo, cell(row["inferline"]).c_str(), cell(row["cg_mean"]).c_str(),
                      cell(row["cg_peak"]).c_str(), ratio.c_str());
          std::fflush(stdout);
          rows.push_back(row);
        }
      }
    }
  }
  return rows;
}

// The tuner replayed over a trace: a decision every second (the control
// plane's cadence); replicas it adds serve 5 s later (§5's activation
// time); replicas it removes go at once. Returns the changes and the dollars
// paid (an added replica is paid from the decision).
struct Tuned {
  std::vector<ReplicaChange> changes;
  double dollars = 0;
  std::vector<std::vector<int32_t>> replicas_by_second;
  json decisions = json::array();  // the tuner's, those that changed something
};
Tuned ReplayTuner(const PlanningProblem& p, const PipelineConfig& plan,
                  const pipeline::TunerPlan& tuner_plan, const std::vector<Nanos>& live,
                  double seconds) {
  Tuned out;
  pipeline::Tuner tuner = *pipeline::Tuner::Create(tuner_plan, {}, 0);
  std::vector<int32_t> paid;
  for (const pipeline::StageConfig& c : plan) paid.push_back(c.replicas);
  size_t next = 0;
  for (Nanos now = kSecond; now <= FromSeconds(seconds); now += kSecond) {
    while (next < live.size() && live[next] < now) tuner.Observe(live[next++]);
    for (size_t m = 0; m < paid.size(); ++m) {
      out.dollars += paid[m] * p.hardware[p.stages[m].options[plan[m].option].hardware]
                                   .price_per_hour / 3600;
    }
    const pipeline::TunerDecision d = tuner.Decide(now);
    if (d.kind != pipeline::TunerDecision::Kind::kNone) {
      out.decisions.push_back({{"second", ToSeconds(now)}, {"reason", d.reason}});
    }
    for (size_t m = 0; m < paid.size(); ++m) {
      if (d.replicas[m] == paid[m]) continue;
      const Nanos at = d.replicas[m] > paid[m] ? now + 5 * kSecond : now;
      out.changes.push_back({at, static_cast<int32_t>(m), d.replicas[m]});
      paid[m] = d.replicas[m];
    }
    out.replicas_by_second.push_back(paid);
  }
  return out;
}

// The coarse-grained tuning (pipeline/coarse_grained_tuner.h) replayed in a
// closed loop, since it scales on the queries in the pipeline, which its own
// earlier decisions shape: every second the estimator serves the trace so
// far under the decisions made so far, and the tuner is shown the queries
// not yet answered at that moment. Units it adds serve 5 s later, as the
// tuner's replicas do; removed ones go at once.
Tuned ReplayCoarseGrained(const PlanningProblem& p, const PipelineConfig& start,
                          const pipeline::CoarseGrainedTunerOptions& options,
                          const std::vector<Nanos>& live, double seconds) {
  Tuned out;
  int32_t units = start[0].replicas;
  pipeline::CoarseGrainedTuner tuner = *pipeline::CoarseGrainedTuner::Create(options, units);
  PipelineConfig one_unit = start;
  for (pipeline::StageConfig& c : one_unit) c.replicas = 1;
  const double unit_per_second = pipeline::CostPerHour(p, one_unit) / 3600;
  size_t arrived = 0;
  for (Nanos now = kSecond; now <= FromSeconds(seconds); now += kSecond) {
    while (arrived < live.size() && live[arrived] < now) ++arrived;
    out.dollars += units * unit_per_second;
    PipelineEstimatorOptions o;
    o.changes = out.changes;
    const PipelineEstimate so_far =
        *EstimatePipeline(p, start, absl::MakeConstSpan(live.data(), arrived), o);
    int64_t in_system = 0;
    for (size_t i = 0; i < arrived; ++i) {
      in_system += live[i] + FromMillis(so_far.latency_ms[i]) > now;
    }
    const int32_t decided = tuner.Decide(now, in_system);
    if (decided != units) {
      const Nanos at = decided > units ? now + 5 * kSecond : now;
      for (size_t m = 0; m < start.size(); ++m) {
        out.changes.push_back({at, static_cast<int32_t>(m), decided});
      }
      units = decided;
    }
    out.replicas_by_second.push_back(std::vector<int32_t>(start.size(), units));
  }
  return out;
}

// The plan served in the simulator's data path (SimPipeline): each stage a
// stage app restricted to its planned hardware, one worker (one GPU or
// vCPU) per replica as §6 bills them, the plan's replicas loaded at the
// start, and the allocator the controller runs (whose pipeline part holds
// each stage at its tuner's replicas and asks for workers, which serve
// after §5's 5 s activation, launch and load together). The stages are
// provisioned by that alone: selection does not load, as InferLine
// provisions pipelines whole.
constexpr double kLoadMs = 1000;
absl::StatusOr<std::unique_ptr<Simulator>> ServeInSimulator(
    const PlanningProblem& p, const PipelineConfig& plan, const pipeline::TunerPlan& tuner_plan,
    double slo_ms, const std::vector<Nanos>& live, double seconds) {
  SimulationSetup s;
  const Nanos slo = FromMillis(slo_ms);
  std::vector<int32_t> planned_workers(p.hardware.size(), 0);
  for (size_t m = 0; m < plan.size(); ++m) {
    planned_workers[p.stages[m].options[plan[m].option].hardware] += plan[m].replicas;
  }
  for (size_t h = 0; h < p.hardware.size(); ++h) {
    SimWorkerType t;
    t.type = {p.hardware[h].name, 1, 1 << 20, p.hardware[h].price_per_hour};
    t.count = planned_workers[h];
    t.launch_delay = 5 * kSecond - FromMillis(kLoadMs);
    t.max_workers = 256;
    s.worker_types.push_back(t);
  }
  s.apps.push_back({"pipeline", slo, 0});
  SimPipeline pipe;
  pipe.name = "pipeline";
  pipe.app = 0;
  pipe.plan = tuner_plan;
  for (size_t m = 0; m < p.stages.size(); ++m) {
    const PlanningStage& stage = p.stages[m];
    for (const pipeline::StageOption& o : stage.options) {
      // A second to load and a gigabyte held: a load never answers a query
      // in time, so selection serves a busy replica rather than plan one.
      const Profile loaded = *Profile::Create(o.profile.points(), kLoadMs, 1024);
      s.variants.push_back({{stage.name, p.hardware[o.hardware].name}, o.hardware, 1, loaded});
    }
    const int32_t hardware = stage.options[plan[m].option].hardware;
    const std::string variant = p.hardware[hardware].name;
    SimApp app{stage.name + "-stage", slo, 0};
    app.models = {stage.name};
    app.variants = {stage.name + ":" + variant};
    s.apps.push_back(app);
    const int32_t stage_app = static_cast<int32_t>(s.apps.size()) - 1;
    const auto planned =
        std::find_if(s.variants.begin(), s.variants.end(), [&](const SimVariant& v) {
          return v.key.model == stage.name && v.worker_type == hardware;
        });
    for (int32_t r = 0; r < plan[m].replicas; ++r) {
      s.instances.push_back({stage_app, static_cast<int32_t>(planned - s.variants.begin())});
    }
    pipe.stages.push_back({stage.name, stage_app, stage.name, stage.in, hardware, variant,
                           plan[m].batch});
  }
  s.pipelines.push_back(pipe);
  s.routing = "selection";
  s.batching = PipelineEstimatorOptions::WorkConservingBatching();
  s.batching.max_batch = 64;
  s.control.selection_loads = false;
  s.control.cluster_autoscaling = true;
  s.horizon = FromSeconds(seconds);
  std::vector<Arrival> arrivals;
  for (Nanos t : live) arrivals.push_back({t, 0});
  auto sim =
      Simulator::Create(std::move(s), CreateReplay(std::move(arrivals), FromSeconds(seconds)));
  if (!sim.ok()) return sim.status();
  if (absl::Status run = (*sim)->Run(); !run.ok()) return run;
  return sim;
}

double StaticDollars(const PlanningProblem& p, const PipelineConfig& c, double seconds) {
  return pipeline::CostPerHour(p, c) * seconds / 3600;
}

// §7.2 / Fig. 10 and 11 in shape: the social-media pipeline planned for
// 150 qps at CV 1 and a 150 ms objective, then served a trace whose rate
// rises to 250 qps, and one whose burstiness rises to CV 4.
json TunerRuns(bool quick) {
  const Shape shape = Shapes()[2];
  const PlanningProblem& p = shape.problem;
  const double slo = 150, seconds = quick ? 120 : 240;
  const std::vector<Nanos> sample = Steady(150, 1, 60, 7);
  const pipeline::LatencyOracle oracle = EstimatorOracle(p, sample, slo);
  const pipeline::LatencyOracle full = EstimatorOracle(p, sample);
  pipeline::PlannerOptions o;
  o.slo_ms = slo;
  o.max_batch = 64;
  o.max_replicas = 128;
  pipeline::Planner planner(p, oracle, o);
  const Plan plan = *planner.MinimizeCost();
  const Plan peak = *PlanCoarseGrained(p, sample, o, pipeline::CoarseGrainedRate::kPeak, full);
  const Plan mean = *PlanCoarseGrained(p, sample, o, pipeline::CoarseGrainedRate::kMean, full);
  const pipeline::TunerPlan tuner_plan = *pipeline::MakeTunerPlan(p, plan.config, sample);
  pipeline::CoarseGrainedTunerOptions autoscale;
  autoscale.packing_factor =
      pipeline::SizeCoarseGrainedUnit(p, o, full, pipeline::CoarseGrainedRate::kPeak)
          ->PackingFactor(slo);
  autoscale.max_units = o.max_replicas;
  const double change_at = seconds / 4, ramp = 30;
  struct Case {
    const char* name;
    std::vector<Nanos> live;
  };
  const std::vector<Case> cases = {
      {"rate 150 -> 250 qps (CV 1)",
       Trace([&](double t) { return 150 + 100 * std::clamp((t - change_at) / ramp, 0.0, 1.0); },
             [](double) { return 1.0; }, seconds, 8)},
      {"CV 1 -> 4 (150 qps)",
       Trace([](double) { return 150.0; }, [&](double t) { return t < change_at ? 1.0 : 4.0; },
             seconds, 9)},
  };
  json out = {{"pipeline", shape.name}, {"slo_ms", slo},
              {"plan", pipeline::DescribeConfig(p, plan.config)},
              {"cg_mean", pipeline::DescribeConfig(p, mean.config)},
              {"cg_peak", pipeline::DescribeConfig(p, peak.config)},
              {"autoscale_packing_factor", autoscale.packing_factor},
              {"runs", json::array()}};
  std::printf("\ntuner: %s planned for 150 qps CV 1, %.0f ms: %s ($%.2f/h)\n", shape.name.c_str(),
              slo, pipeline::DescribeConfig(p, plan.config).c_str(), plan.cost_per_hour);
  for (const Case& c : cases) {
    const Tuned tuned = ReplayTuner(p, plan.config, tuner_plan, c.live, seconds);
    auto with_tuner = *Measure(p, plan.config, c.live, tuned.changes);
    auto planner_only = *Measure(p, plan.config, c.live);
    auto cg_peak = *Measure(p, peak.config, c.live);
    // Both baselines tuned by AutoScale from their planned units (Fig. 7).
    const Tuned mean_tuned = ReplayCoarseGrained(p, mean.config, autoscale, c.live, seconds);
    const Tuned peak_tuned = ReplayCoarseGrained(p, peak.config, autoscale, c.live, seconds);
    auto cg_mean_tuned = *Measure(p, mean.config, c.live, mean_tuned.changes);
    auto cg_peak_tuned = *Measure(p, peak.config, c.live, peak_tuned.changes);
    // Attainment before and after the change, and over the whole run.
    const size_t split = std::lower_bound(c.live.begin(), c.live.end(),
                                          FromSeconds(change_at)) - c.live.begin();
    auto arm = [&](const char* name, const PipelineEstimate& e, double dollars) {
      return json{{"arm", name}, {"attainment", Attainment(e, slo)},
                  {"attainment_before", Attainment(e, slo, 0, split)},
                  {"attainment_after", Attainment(e, slo, split)}, {"p99_ms", e.p99_ms},
                  {"dollars", dollars}};
    };
    json run = {{"trace", c.name}, {"tuner_changes", tuned.changes.size()},
                {"arms", {arm("InferLine (planner + tuner)", with_tuner, tuned.dollars),
                          arm("planner only", planner_only,
                              StaticDollars(p, plan.config, seconds)),
                          arm("CG-Peak (static)", cg_peak,
                              StaticDollars(p, peak.config, seconds)),
                          arm("CG-Mean + AutoScale", cg_mean_tuned, mean_tuned.dollars),
                          arm("CG-Peak + AutoScale", cg_peak_tuned, peak_tuned.dollars)}},
                {"autoscale_unit_changes",
                 {{"cg_mean", mean_tuned.changes.size() / p.stages.size()},
                  {"cg_peak", peak_tuned.changes.size() / p.stages.size()}}}};
    // The same plan and trace served in the simulator, the tuner run by the
    // controller's pipeline allocator.
    auto served = ServeInSimulator(p, plan.config, tuner_plan, slo, c.live, seconds);
    if (!served.ok()) {
      std::fprintf(stderr, "served in the simulator: %s\n", served.status().ToString().c_str());
    } else {
      const Simulator& sim = **served;
      const SimMetrics& m = sim.metrics();
      const int64_t split_s = static_cast<int64_t>(change_at);
      Counters before, after;
      for (size_t sec = 0; sec < m.per_second.size(); ++sec) {
        Counters& into = static_cast<int64_t>(sec) < split_s ? before : after;
        into.arrived += m.per_second[sec].arrived;
        into.on_time += m.per_second[sec].on_time;
      }
      auto share = [](const Counters& c) {
        return c.arrived > 0 ? static_cast<double>(c.on_time) / c.arrived : 1.0;
      };
      json decisions = json::array();
      int64_t workers_added = 0;
      for (const std::string& line : sim.control_log()) {
        if (line.find("pipeline-up") != std::string::npos ||
            line.find("pipeline-down") != std::string::npos) {
          decisions.push_back(line);
        }
        workers_added += line.find("pipeline-add-worker") != std::string::npos;
      }
      const Counters& all = m.per_app[0];
      run["arms"].push_back(
          {{"arm", "InferLine served in the simulator"},
           {"attainment", share(all)},
           {"attainment_before", share(before)},
           {"attainment_after", share(after)},
           {"p99_ms", ToMillis(m.latency_per_app[0].Percentile(99))},
           {"queries", all.arrived},
           {"dropped", all.dropped},
           {"refused_at_admission", all.rejected},
           {"dollars", sim.CostBetween(0, FromSeconds(seconds))}});
      run["simulator"] = {{"tuner_decisions", decisions}, {"workers_added", workers_added}};
      std::printf("  served in the simulator: %zu tuner decisions, %lld workers added\n",
                  decisions.size(), static_cast<long long>(workers_added));
      for (const json& d : decisions) std::printf("    %s\n", d.get<std::string>().c_str());
    }
    json timeline = json::array();
    for (size_t s = 0; s < tuned.replicas_by_second.size(); s += 10) {
      timeline.push_back({{"second", s + 1}, {"replicas", tuned.replicas_by_second[s]}});
    }
    run["replicas_every_10s"] = timeline;
    run["tuner_decisions"] = tuned.decisions;
    std::printf("  %s: %zu replica changes; AutoScale (packing %.1f) changed CG-Mean's units "
                "%zu times, CG-Peak's %zu\n",
                c.name, tuned.changes.size(), autoscale.packing_factor,
                mean_tuned.changes.size() / p.stages.size(),
                peak_tuned.changes.size() / p.stages.size());
    for (const json& d : tuned.decisions) {
      std::printf("    tuner at %3.0f s: %s\n", d["second"].get<double>(),
                  d["reason"].get<std::string>().c_str());
    }
    for (const json& a : run["arms"]) {
      std::printf("    %-28s attainment %6.2f%% (before %6.2f%%, after %6.2f%%), P99 %7.1f ms, "
                  "$%.4f\n",
                  a["arm"].get<std::string>().c_str(), 100 * a["attainment"].get<double>(),
                  100 * a["attainment_before"].get<double>(),
                  100 * a["attainment_after"].get<double>(), a["p99_ms"].get<double>(),
                  a["dollars"].get<double>());
    }
    out["runs"].push_back(run);
  }
  return out;
}

}  // namespace
}  // namespace maitre::sim

int main(int argc, char** argv) {
  std::string out_path;
  bool quick = false, tuner_only = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--out") == 0 && i + 1 < argc) {
      out_path = argv[++i];
    } else if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else if (std::strcmp(argv[i], "--tuner-only") == 0) {
      tuner_only = true;
    } else {
      std::fprintf(stderr,
                   "usage: inferline_pipelines [--out summary.json] [--quick] [--tuner-only]\n");
      return 2;
    }
  }
  if (tuner_only) {
    // The tuner's runs alone, put in place of those of the summary at
    // `out_path` (the planner's grid there is kept as it is).
    nlohmann::json summary = nlohmann::json::object();
    if (!out_path.empty()) {
      std::ifstream in(out_path);
      if (in) summary = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
      if (!summary.is_object()) summary = nlohmann::json::object();
    }
    summary["tuner"] = maitre::sim::TunerRuns(quick);
    if (!out_path.empty()) std::ofstream(out_path) << summary.dump(2) << "\n";
    return 0;
  }
  nlohmann::json summary = {
      {"note", "simulated; SYNTHETIC stage profiles shaped like InferLine's (Fig. 2, 3)"},
      {"cv_definition", "the paper's: variance over squared mean of the inter-arrival time"},
      {"planner_vs_baselines", maitre::sim::Fig5(quick)},
      {"tuner", maitre::sim::TunerRuns(quick)}};
  if (!out_path.empty()) std::ofstream(out_path) << summary.dump(2) << "\n";
  return 0;
}
