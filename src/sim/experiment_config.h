// Experiment files (docs/api.md, "Files"): a YAML document naming the cluster,
// the profiles, the apps and their requirements, the trace and a policy per
// kind, parsed into a SimulationSetup plus an arrival stream. Errors name the
// offending key (e.g. "apps[0].latency_ms: expected a number").
//
//   name: proteus-batching
//   cluster:
//     worker_types:            # optional; default: the embedded cpu-1, cpu-2
//       - {name: cpu-1, cores: 1, memory_mb: 4096, price_per_hour: 0.0425,
//          launch_s: 0, max_workers: 8,   # managed clusters: launch delay, limit
//          billing_s: 0,                  # bills in whole blocks of this (0: by the second)
//          memory_cost_per_gb_s: 0,       # > 0: also price instances by memory
//          market: on-demand,             # or spot (interrupted, see simulation)
//          price_trace: spot.csv}         # spot only: time_s,price_per_hour, covering
//                                         # the run (docs/operations.md, "Spot prices")
//     workers: {cpu-1: 1}      # how many of each type the cluster pays for (from the start)
//     replica_cores:           # optional: cores one replica takes (default 1)
//       - {variant: "m:v", worker_type: cpu-1, cores: 1}
//   profiles:
//     - csv: profile.csv       # the profile CSV format, relative to this file
//     - model: m               # or inline
//       variant: v
//       worker_type: cpu-1
//       accuracy: 0.76
//       points: [[1, 6.0, 6.6], [8, 20.0, 22.0]]   # [batch, p50_ms, p99_ms]
//   apps:
//     - name: classify
//       latency_ms: 40
//       min_accuracy: 0.7      # optional
//       max_accuracy_drop: 0.1 # optional, in [0, 1]: of the app's best accuracy,
//                              # what the proteus allocator may give up
//       sl_min: 0.98           # optional, in (0, 1]: the share of its queries
//                              # the mark allocator keeps within latency_ms
//       share: 1               # share of a generated trace (default 1)
//       rows_per_query: 1      # rows in each of its queries
//       models: [m]            # managed clusters: the models serving it
//       variants: ["m:v"]      # optional: only these of their variants
//       instances:             # loaded from the start, one per worker
//         - {variant: "m:v", worker_type: cpu-1, count: 1}
//         - {variant: "m:w", worker: 0}  # on the type's worker 0, shared
//   trace:
//     generator: poisson       # uniform | poisson | gamma | mmpp | diurnal | piecewise
//     # diurnal: amplitude, period_s, phase, spikes: [{at_s, duration_s,
//     # multiplier}], app_phases: [one per app, in periods]
//     rate_qps: 348
//     duration_s: 600
//     seed: 1
//     # file: trace.csv        # instead of a generator
//   policies:
//     batching: {name: proteus, max_batch: 32}
//       # also: max_queue_delay_ms, slo_ms (default: the app's latency_ms),
//       # aimd_initial_batch, aimd_step,
//       # aimd_decrease, aimd_signal: deadline-miss | batch-latency,
//       # plan_with: p99 | p50, demand_headroom (proteus; 0 = off)
//     routing: least-queued    # or selection: a managed cluster, which also takes
//     selection: {router: infaas, loads: true, allow_degraded: true,
//                 use_loading_instances: true}
//     allocator: infaas       # a name from control/allocator.h, or {name,
//       # min_instance_age_s, observed_capacity_memory_s, migrate_interfered,
//       # migrate_after_s, spread_memory_s, saturated_cpu_utilisation (above
//       # 1: off)} (the infaas one's),
//       # or {name, period_s, band, demand_window_s, min_demand_qps,
//       # max_accuracy_drop, max_utilisation, min_slowdown (1: never scale
//       # profiles by observed overload), solve_time_limit_s} (proteus and
//       # its baselines), or {name: mark, predictor, unit_s, horizon_units,
//       # sample_s, headroom, cool_down_s, release_margin_s, sl_min,
//       # slo_window_s, slo_min_queries, slo_step, slo_max_boost,
//       # slo_relax_after_s} (mark, which needs cluster_autoscaler: on;
//       # predictor oracle reads this trace)
//     model_autoscaler: infaas # | horizontal | off, or {name, slack,
//       # scale_down_headroom, lambda_per_s, min_scale_down_wait_s,
//       # min_consolidation_wait_s, min_replicas_per_model,
//       # max_accuracy_drop, interval_s, capacity_tie_load_s,
//       # capacity_switch_utilisation, capacity_switch_gain}
//     cluster_autoscaler: on   # | off, or {name, utilisation_threshold,
//       # overloaded_fraction, add_cooldown_s, idle_cooldown_s, min_workers,
//       # removal_utilisation_limit, interval_s}
//     report_interval_s: 1     # worker reports and instance states
//   pipelines:                 # managed clusters (SimPipeline, docs/pipelines.md)
//     - name: cascade
//       app: cascade           # an app with no models: its queries are the pipeline's,
//                              # its latency_ms the end-to-end objective
//       stages:                # in topological order
//         - {vertex: fast, model: fast}
//         - {vertex: slow, model: slow, from: [{vertex: fast, probability: 0.3}]}
//       plan: plan.json        # optional: what `maitre plan --json` printed; the
//                              # pipeline allocator then tunes and provisions it
//     # each stage's queries go under an app "<name>/<vertex>" the parser adds
//   simulation:
//     service_noise: lognormal # or none
//     worker_losses: [{worker: small-0, at_s: 50}]  # workers that die then
//     interference: {onset: 0.5, slowdown_at_full: 1.0, oversubscribed_penalty: 1.13}
//       # co-located batches slow each other down (sim/simulator.h)
//     jobs: [{app: a, rows: 50000, chunk_rows: 64, at_s: 0}]  # offline jobs
//       # (managed clusters), throttled as the controller's (SimJob)
//     burst_pool: {service_ms: 29, price_per_request: 4.3e-7,  # MArk's Lambda
//                  cold_start_ms: 0, keep_warm_s: 2700, concurrency: 1000}
//       # (managed clusters; BurstPool): what an instance cannot answer in
//       # time goes there
//     interruptions: {mean_between_s: 3600, lead_s: 120}  # notices for spot
//       # workers (managed clusters; SpotInterruptions)
//
// Thread-safety: pure functions (they read files named by the YAML).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sim/simulator.h"
#include "core/arrivals.h"

namespace maitre::sim {

struct Experiment {
  std::string name;
  SimulationSetup setup;
  // Either a generator or the rows of a trace file.
  bool trace_from_file = false;
  GeneratorSpec generator;
  std::vector<Arrival> trace_rows;

  // A fresh arrival stream for one run (an Experiment can be run many times).
  absl::StatusOr<std::unique_ptr<ArrivalSource>> MakeArrivals() const;
};

// `base_dir` resolves relative paths in the YAML (profile CSVs, trace files).
absl::StatusOr<Experiment> ParseExperiment(absl::string_view yaml, const std::string& base_dir);

absl::StatusOr<Experiment> LoadExperimentFile(const std::string& yaml_path);

}  // namespace maitre::sim
