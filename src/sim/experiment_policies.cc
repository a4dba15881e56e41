// The `policies` section of the experiment YAML (experiment_yaml.h).
#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "control/allocator.h"
#include "control/mark_allocator.h"
#include "control/query_router.h"
#include "core/status_macros.h"
#include "policy/autoscaling_cluster.h"
#include "policy/autoscaling_model.h"
#include "policy/batching.h"
#include "sim/experiment_yaml.h"
#include "sim/router.h"

namespace maitre::sim::experiment_yaml {
namespace {

// policies.batching given as a mapping: the policy's name and parameters.
absl::Status ParseBatchingParameters(const YAML::Node& batching, const std::string& bp,
                                     policy::BatchingOptions& b) {
  MAITRE_RETURN_IF_ERROR(CheckMap(
      batching, bp,
      {"name", "max_batch", "max_queue_delay_ms", "slo_ms",
       "aimd_initial_batch", "aimd_step", "aimd_decrease", "aimd_signal", "plan_with",
       "demand_headroom"}));
  int64_t max_batch = b.max_batch, initial = b.aimd_initial_batch;
  std::string plan_with = "p99";
  MAITRE_RETURN_IF_ERROR(ReadString(batching, bp, "name", &b.policy, true));
  MAITRE_RETURN_IF_ERROR(ReadInt(batching, bp, "max_batch", &max_batch));
  MAITRE_RETURN_IF_ERROR(ReadMillis(batching, bp, "max_queue_delay_ms", &b.max_queue_delay));
  MAITRE_RETURN_IF_ERROR(ReadMillis(batching, bp, "slo_ms", &b.slo));
  MAITRE_RETURN_IF_ERROR(ReadInt(batching, bp, "aimd_initial_batch", &initial));
  MAITRE_RETURN_IF_ERROR(ReadNumber(batching, bp, "aimd_step", &b.aimd_step));
  MAITRE_RETURN_IF_ERROR(ReadNumber(batching, bp, "aimd_decrease", &b.aimd_decrease));
  MAITRE_RETURN_IF_ERROR(ReadString(batching, bp, "plan_with", &plan_with));
  MAITRE_RETURN_IF_ERROR(ReadNumber(batching, bp, "demand_headroom", &b.demand_headroom));
  std::string signal = "deadline-miss";
  MAITRE_RETURN_IF_ERROR(ReadString(batching, bp, "aimd_signal", &signal));
  if (signal != "deadline-miss" && signal != "batch-latency") {
    return Bad(Key(bp, "aimd_signal"), "expected deadline-miss or batch-latency");
  }
  b.aimd_batch_latency_signal = signal == "batch-latency";
  if (plan_with != "p99" && plan_with != "p50") {
    return Bad(Key(bp, "plan_with"), "expected p99 or p50");
  }
  if (max_batch < 1 || max_batch > 1 << 20) return Bad(Key(bp, "max_batch"), "must be >= 1");
  if (initial < 1 || initial > 1 << 20) return Bad(Key(bp, "aimd_initial_batch"), "must be >= 1");
  b.max_batch = static_cast<int32_t>(max_batch);
  b.aimd_initial_batch = static_cast<int32_t>(initial);
  b.plan_with_median = plan_with == "p50";
  return absl::OkStatus();
}

// Builds the batching policy once for every instance, and for every variant
// a managed cluster may load, so that an unknown name or a bad parameter is
// reported against policies.batching (`bp`).
absl::Status CheckBatchingBuilds(const SimulationSetup& setup, const std::string& bp) {
  const policy::BatchingOptions& b = setup.batching;
  for (const SimInstanceSpec& s : setup.instances) {
    policy::BatchingOptions options = b;  // as Simulator::Create will fill it
    if (options.slo == 0) options.slo = setup.apps[s.app].latency;
    auto p = policy::CreateBatchingPolicy(options, setup.variants[s.variant].profile);
    if (!p.ok()) return Bad(bp, p.status().message());
  }
  for (const SimApp& app : setup.apps) {
    for (const SimVariant& v : setup.variants) {
      if (std::find(app.models.begin(), app.models.end(), v.key.model) == app.models.end()) {
        continue;
      }
      policy::BatchingOptions options = b;
      if (options.slo == 0) options.slo = app.latency;
      auto p = policy::CreateBatchingPolicy(options, v.profile);
      if (!p.ok()) return Bad(bp, p.status().message());
    }
  }
  return absl::OkStatus();
}

// policies.batching: a policy name, or a mapping with its parameters.
absl::Status ParseBatching(const YAML::Node& batching, const std::string& bp,
                           SimulationSetup& setup) {
  if (batching.IsScalar()) {
    setup.batching.policy = batching.Scalar();
  } else {
    MAITRE_RETURN_IF_ERROR(ParseBatchingParameters(batching, bp, setup.batching));
  }
  return CheckBatchingBuilds(setup, bp);
}

// policies.routing: a router name, or "selection" for a managed cluster.
absl::Status ParseRouting(const YAML::Node& routing, const std::string& rp,
                          SimulationSetup& setup) {
  if (routing.IsScalar()) {
    setup.routing = routing.Scalar();
  } else {
    MAITRE_RETURN_IF_ERROR(CheckMap(routing, rp, {"name"}));
    MAITRE_RETURN_IF_ERROR(ReadString(routing, rp, "name", &setup.routing, true));
  }
  if (setup.routing != "selection") {
    auto r = CreateRouter(setup.routing);
    if (!r.ok()) {
      return Bad(rp, absl::StrCat(r.status().message(), " (or selection: the selection policy "
                                                        "and a managed cluster)"));
    }
  }
  return absl::OkStatus();
}

// policies.model_autoscaler: infaas, horizontal or off, by name or as a
// mapping with the autoscaler's parameters.
absl::Status ParseModelAutoscaler(const YAML::Node& m, const std::string& mp, bool selection,
                                  ControlSetup& c) {
  std::string name;
  policy::ModelAutoscalerOptions& o = c.model_autoscaler;
  if (m.IsScalar()) {
    name = m.Scalar();
  } else {
    MAITRE_RETURN_IF_ERROR(CheckMap(m, mp,
                                    {"name", "slack", "scale_down_headroom", "lambda_per_s",
                                     "min_scale_down_wait_s", "min_consolidation_wait_s",
                                     "min_replicas_per_model",
                                     "max_accuracy_drop", "interval_s", "capacity_tie_load_s",
                                     "capacity_switch_utilisation", "capacity_switch_gain"}));
    MAITRE_RETURN_IF_ERROR(ReadString(m, mp, "name", &name, true));
    int64_t min_replicas = o.min_replicas_per_model;
    MAITRE_RETURN_IF_ERROR(ReadNumber(m, mp, "slack", &o.slack));
    MAITRE_RETURN_IF_ERROR(ReadNumber(m, mp, "scale_down_headroom", &o.scale_down_headroom));
    MAITRE_RETURN_IF_ERROR(ReadNumber(m, mp, "lambda_per_s", &o.lambda_per_s));
    MAITRE_RETURN_IF_ERROR(ReadSeconds(m, mp, "min_scale_down_wait_s", &o.min_scale_down_wait));
    MAITRE_RETURN_IF_ERROR(
        ReadSeconds(m, mp, "min_consolidation_wait_s", &o.min_consolidation_wait));
    MAITRE_RETURN_IF_ERROR(ReadInt(m, mp, "min_replicas_per_model", &min_replicas));
    MAITRE_RETURN_IF_ERROR(ReadNumber(m, mp, "max_accuracy_drop", &o.max_accuracy_drop));
    MAITRE_RETURN_IF_ERROR(ReadSeconds(m, mp, "interval_s", &c.model_interval));
    MAITRE_RETURN_IF_ERROR(ReadNumber(m, mp, "capacity_tie_load_s", &o.capacity_tie_load_s));
    MAITRE_RETURN_IF_ERROR(
        ReadNumber(m, mp, "capacity_switch_utilisation", &o.capacity_switch_utilisation));
    MAITRE_RETURN_IF_ERROR(ReadNumber(m, mp, "capacity_switch_gain", &o.capacity_switch_gain));
    if (min_replicas < 0 || min_replicas > 1000) {
      return Bad(Key(mp, "min_replicas_per_model"), "must be in [0, 1000]");
    }
    o.min_replicas_per_model = static_cast<int>(min_replicas);
    if (c.model_interval <= 0) return Bad(Key(mp, "interval_s"), "must be > 0");
  }
  if (name == "infaas") {
    c.model_autoscaling = ModelAutoscaling::kInfaas;
  } else if (name == "horizontal") {
    c.model_autoscaling = ModelAutoscaling::kHorizontal;
  } else if (name == "off" || name == "false") {
    c.model_autoscaling = ModelAutoscaling::kOff;
  } else {
    return Bad(mp, absl::StrCat("unknown model autoscaler \"", name,
                                "\"; choose infaas, horizontal or off"));
  }
  if (c.model_autoscaling != ModelAutoscaling::kOff && !selection) {
    return Bad(mp, "needs routing: selection");
  }
  auto created = policy::ModelAutoscaler::Create(o);
  if (!created.ok()) return Bad(mp, created.status().message());
  return absl::OkStatus();
}

// policies.cluster_autoscaler: on or off, by name or as a mapping with the
// autoscaler's parameters; checked against the cluster's worker types.
absl::Status ParseClusterAutoscaler(const YAML::Node& k, const std::string& kp, bool selection,
                                    const std::vector<SimWorkerType>& worker_types,
                                    ControlSetup& c) {
  std::string name;
  policy::ClusterAutoscalerOptions& o = c.cluster_autoscaler;
  if (k.IsScalar()) {
    name = k.Scalar();
  } else {
    MAITRE_RETURN_IF_ERROR(CheckMap(
        k, kp,
        {"name", "utilisation_threshold", "overloaded_fraction", "add_cooldown_s",
         "idle_cooldown_s", "min_workers", "removal_utilisation_limit", "interval_s"}));
    MAITRE_RETURN_IF_ERROR(ReadString(k, kp, "name", &name, true));
    int64_t min_workers = o.min_workers;
    MAITRE_RETURN_IF_ERROR(ReadNumber(k, kp, "utilisation_threshold", &o.utilisation_threshold));
    MAITRE_RETURN_IF_ERROR(ReadNumber(k, kp, "overloaded_fraction", &o.overloaded_fraction));
    MAITRE_RETURN_IF_ERROR(ReadSeconds(k, kp, "add_cooldown_s", &o.add_cooldown));
    MAITRE_RETURN_IF_ERROR(ReadSeconds(k, kp, "idle_cooldown_s", &o.idle_cooldown));
    MAITRE_RETURN_IF_ERROR(ReadInt(k, kp, "min_workers", &min_workers));
    MAITRE_RETURN_IF_ERROR(
        ReadNumber(k, kp, "removal_utilisation_limit", &o.removal_utilisation_limit));
    MAITRE_RETURN_IF_ERROR(ReadSeconds(k, kp, "interval_s", &c.cluster_interval));
    if (min_workers < 0 || min_workers > 100000) {
      return Bad(Key(kp, "min_workers"), "must be >= 0");
    }
    o.min_workers = static_cast<int>(min_workers);
    if (c.cluster_interval <= 0) return Bad(Key(kp, "interval_s"), "must be > 0");
  }
  if (name == "on" || name == "true") {
    c.cluster_autoscaling = true;
  } else if (name == "off" || name == "false") {
    c.cluster_autoscaling = false;
  } else {
    return Bad(kp, absl::StrCat("expected on or off, not \"", name, "\""));
  }
  if (c.cluster_autoscaling && !selection) return Bad(kp, "needs routing: selection");
  policy::ClusterAutoscalerOptions check = o;
  for (const SimWorkerType& t : worker_types) check.types.push_back(t.type);
  auto created = policy::ClusterAutoscaler::Create(check);
  if (!created.ok()) return Bad(kp, created.status().message());
  return absl::OkStatus();
}

// The MArk allocator's keys in policies.allocator (control/mark_allocator.h).
absl::Status ParseMark(const YAML::Node& a, const std::string& ap, control::MarkOptions& m) {
  int64_t horizon = m.windows.horizon;
  MAITRE_RETURN_IF_ERROR(ReadString(a, ap, "predictor", &m.predictor));
  MAITRE_RETURN_IF_ERROR(ReadSeconds(a, ap, "unit_s", &m.windows.unit));
  MAITRE_RETURN_IF_ERROR(ReadInt(a, ap, "horizon_units", &horizon));
  MAITRE_RETURN_IF_ERROR(ReadSeconds(a, ap, "sample_s", &m.windows.sample));
  MAITRE_RETURN_IF_ERROR(ReadNumber(a, ap, "headroom", &m.headroom));
  MAITRE_RETURN_IF_ERROR(ReadSeconds(a, ap, "cool_down_s", &m.cool_down));
  MAITRE_RETURN_IF_ERROR(ReadSeconds(a, ap, "release_margin_s", &m.release_margin));
  MAITRE_RETURN_IF_ERROR(ReadNumber(a, ap, "sl_min", &m.sl_min));
  MAITRE_RETURN_IF_ERROR(ReadSeconds(a, ap, "slo_window_s", &m.slo_window));
  MAITRE_RETURN_IF_ERROR(ReadInt(a, ap, "slo_min_queries", &m.slo_min_queries));
  MAITRE_RETURN_IF_ERROR(ReadNumber(a, ap, "slo_step", &m.slo_step));
  MAITRE_RETURN_IF_ERROR(ReadNumber(a, ap, "slo_max_boost", &m.slo_max_boost));
  MAITRE_RETURN_IF_ERROR(ReadSeconds(a, ap, "slo_relax_after_s", &m.slo_relax_after));
  if (horizon < 1 || horizon > 100000) return Bad(Key(ap, "horizon_units"), "must be >= 1");
  m.windows.horizon = static_cast<int>(horizon);
  if (absl::Status valid = control::ValidateMarkOptions(m); !valid.ok()) {
    return Bad(ap, valid.message());
  }
  return absl::OkStatus();
}

// policies.allocator: the allocator's name (control/allocator.h), or a
// mapping with it and the INFaaS, Proteus or MArk allocator's own parameters.
absl::Status ParseAllocator(const YAML::Node& a, const std::string& ap, bool selection,
                            ControlSetup& c) {
  if (a.IsScalar()) {
    c.allocator = a.Scalar();
  } else {
    MAITRE_RETURN_IF_ERROR(CheckMap(
        a, ap,
        {"name", "min_instance_age_s", "observed_capacity_memory_s", "period_s", "band",
         "demand_window_s", "min_demand_qps", "max_accuracy_drop", "max_utilisation",
         "min_slowdown", "solve_time_limit_s", "migrate_interfered", "migrate_after_s",
         "spread_memory_s", "saturated_cpu_utilisation", "predictor", "unit_s",
         "horizon_units", "sample_s", "headroom", "cool_down_s", "release_margin_s", "sl_min",
         "slo_window_s", "slo_min_queries", "slo_step", "slo_max_boost", "slo_relax_after_s"}));
    MAITRE_RETURN_IF_ERROR(ReadString(a, ap, "name", &c.allocator, true));
    control::ProteusOptions& p = c.proteus;
    MAITRE_RETURN_IF_ERROR(ReadSeconds(a, ap, "period_s", &p.period));
    MAITRE_RETURN_IF_ERROR(ReadNumber(a, ap, "band", &p.band));
    MAITRE_RETURN_IF_ERROR(ReadSeconds(a, ap, "demand_window_s", &p.demand_window));
    MAITRE_RETURN_IF_ERROR(ReadNumber(a, ap, "min_demand_qps", &p.min_demand_qps));
    MAITRE_RETURN_IF_ERROR(ReadNumber(a, ap, "max_accuracy_drop", &p.max_accuracy_drop));
    MAITRE_RETURN_IF_ERROR(ReadNumber(a, ap, "max_utilisation", &p.max_utilisation));
    MAITRE_RETURN_IF_ERROR(ReadNumber(a, ap, "min_slowdown", &p.min_slowdown));
    MAITRE_RETURN_IF_ERROR(ReadNumber(a, ap, "solve_time_limit_s", &p.milp.time_limit_s));
    if (!(p.max_utilisation > 0 && p.max_utilisation <= 1)) {
      return Bad(Key(ap, "max_utilisation"), "must be in (0, 1]");
    }
    if (!(p.min_slowdown > 0 && p.min_slowdown <= 1)) {
      return Bad(Key(ap, "min_slowdown"), "must be in (0, 1]");
    }
    if (p.period <= 0) return Bad(Key(ap, "period_s"), "must be > 0");
    if (!(p.band > 0)) return Bad(Key(ap, "band"), "must be > 0");
    if (p.demand_window <= 0) return Bad(Key(ap, "demand_window_s"), "must be > 0");
    if (!(p.min_demand_qps > 0)) return Bad(Key(ap, "min_demand_qps"), "must be > 0");
    if (!(p.max_accuracy_drop >= 0 && p.max_accuracy_drop <= 1)) {
      return Bad(Key(ap, "max_accuracy_drop"), "must be in [0, 1]");
    }
    if (!(p.milp.time_limit_s > 0)) return Bad(Key(ap, "solve_time_limit_s"), "must be > 0");
    MAITRE_RETURN_IF_ERROR(ReadSeconds(a, ap, "min_instance_age_s", &c.min_instance_age));
    MAITRE_RETURN_IF_ERROR(
        ReadSeconds(a, ap, "observed_capacity_memory_s", &c.observed_capacity_memory));
    MAITRE_RETURN_IF_ERROR(ReadBool(a, ap, "migrate_interfered", &c.migrate_interfered));
    MAITRE_RETURN_IF_ERROR(ReadSeconds(a, ap, "migrate_after_s", &c.migration.migrate_after));
    if (c.migration.migrate_after < 0) return Bad(Key(ap, "migrate_after_s"), "must be >= 0");
    MAITRE_RETURN_IF_ERROR(
        ReadSeconds(a, ap, "spread_memory_s", &c.consolidation.spread_memory));
    MAITRE_RETURN_IF_ERROR(
        ReadNumber(a, ap, "saturated_cpu_utilisation", &c.saturated_cpu_utilisation));
    if (!(c.saturated_cpu_utilisation > 0)) {
      return Bad(Key(ap, "saturated_cpu_utilisation"), "must be > 0 (above 1: off)");
    }
    if (c.consolidation.spread_memory < 0) {
      return Bad(Key(ap, "spread_memory_s"), "must be >= 0 (0: no hysteresis)");
    }
    if (c.min_instance_age < 0) return Bad(Key(ap, "min_instance_age_s"), "must be >= 0");
    if (c.observed_capacity_memory < 0) {
      return Bad(Key(ap, "observed_capacity_memory_s"), "must be >= 0");
    }
    MAITRE_RETURN_IF_ERROR(ParseMark(a, ap, c.mark));
  }
  if (!selection) return Bad(ap, "needs routing: selection");
  if (absl::Status known = control::CheckAllocatorName(c.allocator); !known.ok()) {
    return Bad(ap, known.message());
  }
  return absl::OkStatus();
}

// The managed cluster's policies: selection, the allocator, the model and
// cluster autoscalers and the monitoring interval.
absl::Status ParseControl(const YAML::Node& n, SimulationSetup& setup) {
  const std::string path = "policies";
  ControlSetup& c = setup.control;
  const bool selection = setup.routing == "selection";
  MAITRE_RETURN_IF_ERROR(ReadSeconds(n, path, "report_interval_s", &c.report_interval));
  if (c.report_interval <= 0) return Bad(Key(path, "report_interval_s"), "must be > 0");
  if (YAML::Node sel = n["selection"]; Present(sel)) {
    const std::string sp = Key(path, "selection");
    if (!selection) return Bad(sp, "needs routing: selection");
    MAITRE_RETURN_IF_ERROR(
        CheckMap(sel, sp, {"router", "loads", "allow_degraded", "use_loading_instances"}));
    MAITRE_RETURN_IF_ERROR(ReadString(sel, sp, "router", &c.router));
    if (absl::Status known = control::CheckQueryRouterName(c.router); !known.ok()) {
      return Bad(Key(sp, "router"), known.message());
    }
    MAITRE_RETURN_IF_ERROR(ReadBool(sel, sp, "loads", &c.selection_loads));
    MAITRE_RETURN_IF_ERROR(ReadBool(sel, sp, "allow_degraded", &c.selection.allow_degraded));
    MAITRE_RETURN_IF_ERROR(
        ReadBool(sel, sp, "use_loading_instances", &c.selection.use_loading_instances));
  }
  if (YAML::Node a = n["allocator"]; Present(a)) {
    MAITRE_RETURN_IF_ERROR(ParseAllocator(a, Key(path, "allocator"), selection, c));
    // Unless the experiment names a router, the allocator's own.
    const YAML::Node sel = n["selection"];
    if (!Present(sel) || !Present(sel["router"])) c.router = control::DefaultRouterFor(c.allocator);
    c.selection.load_on_cold_start = control::SelectionOptionsFor(c.allocator).load_on_cold_start;
  }
  if (YAML::Node m = n["model_autoscaler"]; Present(m)) {
    MAITRE_RETURN_IF_ERROR(ParseModelAutoscaler(m, Key(path, "model_autoscaler"), selection, c));
  }
  if (YAML::Node k = n["cluster_autoscaler"]; Present(k)) {
    MAITRE_RETURN_IF_ERROR(ParseClusterAutoscaler(k, Key(path, "cluster_autoscaler"), selection,
                                                  setup.worker_types, c));
  }
  if (c.allocator == "mark" && !c.cluster_autoscaling) {
    return Bad(Key(path, "cluster_autoscaler"), "must be on for the mark allocator, which "
                                                "provisions workers");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ParsePolicies(const YAML::Node& n, SimulationSetup& setup) {
  const std::string path = "policies";
  if (!Present(n)) return absl::OkStatus();  // defaults: proteus batching, least-queued routing
  MAITRE_RETURN_IF_ERROR(CheckMap(n, path,
                                  {"batching", "routing", "selection", "allocator", "model_autoscaler",
                                   "cluster_autoscaler", "report_interval_s"}));
  if (YAML::Node batching = n["batching"]; Present(batching)) {
    MAITRE_RETURN_IF_ERROR(ParseBatching(batching, Key(path, "batching"), setup));
  }
  if (YAML::Node routing = n["routing"]; Present(routing)) {
    MAITRE_RETURN_IF_ERROR(ParseRouting(routing, Key(path, "routing"), setup));
  }
  return ParseControl(n, setup);
}

}  // namespace maitre::sim::experiment_yaml
