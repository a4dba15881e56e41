// The discrete-event simulator (docs/architecture.md, "Policies and one
// clock"): simulated workers whose instances run executors that take their
// service times from profiles, each instance with a deadline-ordered queue
// driven by the real batching policies exactly as the worker drives them, fed
// by an arrival stream through a router.
//
// The data path, per instance, as in the real worker (policy/batching.h and
// worker/instance.h):
//  - a query is queued in deadline order; a query whose deadline passes while
//    it is queued is dropped (answered DEADLINE_EXCEEDED) at that moment;
//  - whenever a replica is idle and something changed (an arrival, a
//    finished batch, a drop, a replica that finished loading, or the wake-up
//    time the policy asked for), the instance's policy is asked, and its
//    answer is carried out on the lowest-numbered idle replica; a finished
//    batch is reported to Observe();
//  - a batch of b rows runs for the profile's p50 at b, or, with noise on, a
//    lognormal draw with that median and the profile's p99 as its 99th
//    percentile.
//
// Two ways to run a cluster:
//  - static (routing "least-queued"): the setup's instances, one replica
//    each, one per worker, for the whole run; the Router picks the instance;
//  - managed (routing "selection"): the same policies as the real
//    controller and worker (docs/architecture.md, "Policies and one clock"):
//    the selection policy routes every query and asks for loads
//    (sim/selection_router.h keeps its LiveState as the controller does);
//    every `report_interval` each worker reports and each instance's state
//    moves by policy::NextInstanceState; the allocator the controller runs
//    (control/allocator.h) decides loads every `model_interval` and workers
//    every `cluster_interval` (added workers serve after their type's launch
//    delay). Loads take the profile's load_ms. Each
//    worker is billed its type's price from the moment it is asked for until
//    it is removed, in whole billing blocks when its type has them
//    (WorkerType::billing_unit: one removed within a block is paid to the
//    block's end; the trace's end stops every bill). The mechanism is in
//    simulator_control.cc; what the allocator sees and how its decisions
//    are carried out, in simulator_observe.cc.
//
// Events are ordered by (time in ns, sequence number); the simulator is an
// object with its own seeded random streams and no globals, so several can
// run in one process and the same inputs always give the same outputs.
//
// Thread-safety: not synchronised; one thread drives a Simulator. Separate
// simulators share nothing and can run on separate threads.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "control/allocator.h"
#include "control/leaving.h"
#include "core/profile.h"
#include "core/variant.h"
#include "core/worker_type.h"
#include "pipeline/problem.h"
#include "pipeline/tuner.h"
#include "policy/batching.h"
#include "policy/instance_state.h"
#include "policy/job_throttle.h"
#include "policy/selection.h"
#include "sim/event_queue.h"
#include "sim/metrics.h"
#include "core/rng.h"
#include "sim/router.h"
#include "core/arrivals.h"

namespace maitre::sim {

class SelectionRouter;
struct SimulationSetup;

struct SimWorkerType {
  WorkerType type;
  int32_t count = 0;  // workers of this type up (and paid for) from the start
  // Managed clusters: from the cluster autoscaler's add to the worker
  // serving (it is paid for meanwhile), and the most workers of this type
  // the cluster autoscaler may run.
  Nanos launch_delay = 0;
  int32_t max_workers = 8;
  // When > 0, the report also prices every ready replica of a variant on
  // this type by its memory footprint (profile memory_mb) at this rate, per
  // GB and second: INFaaS §6.2's cost of a running instance.
  double memory_cost_per_gb_s = 0;
};

// One variant's profile on one worker type.
struct SimVariant {
  VariantKey key;
  int32_t worker_type = 0;  // index into worker_types: the profile's hardware
  double accuracy = 0;
  Profile profile;
  // What one replica takes of its worker's cores (the model autoscaler's
  // resource model; an accelerator variant can claim the whole worker).
  double cores_per_replica = 1;
};

struct SimApp {
  std::string name;
  Nanos latency = 0;        // the app's latency objective (deadline = arrival + this)
  double min_accuracy = 0;  // the app's default minimum accuracy
  // The fraction of the app's best accuracy an allocator that scales
  // accuracy may give up for it (control::ModelOption); unset: its own.
  std::optional<double> max_accuracy_drop;
  // The share of its queries that must be answered within `latency`
  // (MArk's SL_min; control::ModelOption::sl_min); unset: the allocator's.
  std::optional<double> sl_min;
  // Managed clusters: the models whose variants serve the app (selection's
  // catalogue). Empty: the models of the app's instances.
  std::vector<std::string> models;
  // When not empty, only these variants ("model:variant") of those models
  // serve the app: a baseline restricted to one variant, say.
  std::vector<std::string> variants;
  // Rows in each of its queries (a request of several images).
  int32_t rows_per_query = 1;
};

// Whether `app` may use variant `key` (its allow-list, when it has one).
bool AppMayUse(const SimApp& app, const VariantKey& key);

// One instance loaded from the start: `variant` serving `app`, one replica,
// on a worker of the variant's type (one of its own unless `worker` says).
struct SimInstanceSpec {
  int32_t app = 0;
  int32_t variant = 0;
  // >= 0: on the type's worker of this index (from 0), which other
  // instances may share; -1: on the next worker of the type that holds none.
  int32_t worker = -1;
};

using ModelAutoscaling = control::ModelScaling;
inline absl::string_view ModelAutoscalingName(ModelAutoscaling m) {
  return control::ModelScalingName(m);
}

// The control plane of a managed cluster (routing "selection").
struct ControlSetup {
  policy::SelectionOptions selection;
  // What chooses each query's instance (control/query_router.h); an
  // experiment that names only an allocator gets its default router.
  std::string router = "infaas";
  // Whether the selection policy may load variants. Off (the static
  // baseline): workers report no room, so it never plans a load.
  bool selection_loads = true;
  policy::InstanceStateOptions instance_state;
  // The allocator (control/allocator.h) and the rules of the INFaaS one.
  std::string allocator = "infaas";
  Nanos min_instance_age = 30 * kSecond;
  Nanos observed_capacity_memory = 30 * kSecond;
  double saturated_cpu_utilisation = 0.85;  // AllocatorOptions'
  // Consolidation's hysteresis (policy/autoscaling_consolidation.h).
  policy::ConsolidationOptions consolidation;
  // Interference migration by the INFaaS allocator (policy/migration.h).
  bool migrate_interfered = true;
  policy::MigrationOptions migration;
  // The Proteus allocator's (and its baselines') rules.
  control::ProteusOptions proteus;
  // The MArk allocator's; a type without a launch time of its own there is
  // launched ahead by its `launch_delay`.
  control::MarkOptions mark;
  ModelAutoscaling model_autoscaling = ModelAutoscaling::kOff;
  // kHorizontal forces allow_upgrade = allow_downgrade = false.
  policy::ModelAutoscalerOptions model_autoscaler;
  bool cluster_autoscaling = false;
  // `types` and `max_workers` are filled from the worker types.
  policy::ClusterAutoscalerOptions cluster_autoscaler;
  // A worker under an interruption notice takes a query only while at
  // least this long, or the query's objective if longer, is left before it
  // stops (control/leaving.h; the controller's Cluster::Options').
  Nanos leaving_margin = control::kLeavingMarginFloor;
  Nanos report_interval = kSecond;
  Nanos model_interval = kSecond;
  Nanos cluster_interval = 2 * kSecond;
};

// A worker that dies at `at` (named as the simulator names workers,
// "<type>-<n>" in the order they were asked for): its instances, and the
// queries queued or running on them, are lost at once.
struct WorkerLoss {
  std::string worker;
  Nanos at = 0;
};

// Spot interruptions the simulator draws (managed clusters; docs/
// operations.md, "Spot interruptions"): each worker of a spot type, from
// when it is up, gets a notice after an exponential time of mean
// `mean_between` (a Poisson process per worker, drawn from the setup's seed),
// `lead` before it stops. On the notice the simulator does what the
// controller does on a real provider's (WorkerEvent::kInterrupted,
// Cluster::BeginLeaving), by the same rules (control/leaving.h): the worker
// takes no new load; it keeps taking its share of the queries, under any
// router and with its route weights kept, until max(the control setup's
// leaving_margin, the query's objective) before it stops, then drains; it is
// left out of the workers the allocator is shown, which sees what it is
// still offered in Observation::leaving_qps; and a replacement of its type
// is launched at once (as the local provider starts one)
// (docs/architecture.md, "The simulator's spot interruptions"). At the stop
// what is still queued or running there is lost, counted in
// ControlCounters::queries_lost_to_interruptions; the worker is paid for
// until then.
struct SpotInterruptions {
  bool enabled = false;
  Nanos mean_between = 0;
  Nanos lead = 120 * kSecond;  // AWS's two minutes (MArk §4.5)
};

// How co-located batches on one worker slow each other down
// (docs/architecture.md, "The simulator's interference model"). When a batch
// starts, u is the share of its worker's cores that running batches take,
// this one included (Σ cores per replica of busy replicas / the type's
// cores). With no other batch running its service time is the profile's;
// with others it is multiplied by
//   (1 + (slowdown_at_full − 1) · clamp((u − onset) / (1 − onset), 0, 1)) · max(1, u):
// nothing below `onset`, rising linearly to `slowdown_at_full` when every
// core is busy (shared caches and memory bandwidth), and time-shared beyond
// that (more batches than cores), times `oversubscribed_penalty` (what
// batches taking turns on a core lose beyond their turns: switches, caches
// the other flushed). The factor is fixed when the batch starts.
// The parameters of examples/experiments/infaas-interference were fitted to
// the zoo on the 2-core development VM; off, service times are the
// profiles' alone.
struct InterferenceModel {
  bool enabled = false;
  double onset = 0.5;
  double slowdown_at_full = 1.0;
  double oversubscribed_penalty = 1.0;
  // A batch taking `own_cores` of a worker with `worker_cores`, started
  // while other batches take `other_cores` of it.
  double Factor(double own_cores, double other_cores, double worker_cores) const;
};

// MArk's burst pool (§3.1, §4.1; docs/architecture.md, "The simulator's
// burst pool"): serverless instances that start in seconds and are paid per
// request at a premium, for what the workers cannot answer in time. Managed
// clusters only. The Bouncer: a query the router sends to an instance that
// cannot answer it within its objective (what is queued and running there,
// drained at the rate its ready replicas sustain within the objective, plus
// one query's time), or that no instance takes, goes to the pool at once.
// The pool serves each query alone in `service` on a warm instance; with
// none free, a new one starts and the query takes `cold_start` more. An
// instance idle for `keep_warm` is recycled. Beyond `concurrency` queries
// in flight the pool refuses, and the query goes where the router sent it
// (or is rejected). Queries sent there count as refused demand for the
// allocator: they reached no worker.
struct BurstPool {
  bool enabled = false;
  Nanos service = 0;
  Nanos cold_start = 0;
  Nanos keep_warm = 45 * 60 * kSecond;  // Lambda recycles after 45-60 min (§4.5)
  int32_t concurrency = 1000;
  double price_per_request = 0;  // dollars
};

// An offline job (managed clusters): `rows` rows for `app`'s models, sent
// from `at` in chunks of `chunk_rows`, one chunk in flight at a time, each a
// query with no objective of its own (its deadline an hour away), through
// the same routing as online queries. The job throttle
// (policy/job_throttle.h) pauses it on every report that finds a worker
// serving online traffic too busy, as the controller's job runner does.
// Jobs run one after the other in the order given. Their queries are not
// counted in the online figures.
struct SimJob {
  int32_t app = 0;
  int64_t rows = 0;
  int32_t chunk_rows = 64;
  Nanos at = 0;
};

// A pipeline served in a managed cluster (docs/pipelines.md, "Pipelines in
// the simulator"), as the controller serves a registered one:
//  - its queries are the arrivals of app `app`, an app with no models of
//    its own whose latency objective covers the whole pipeline;
//  - which stages a query visits is drawn per query from the branch
//    probabilities (pipeline::DrawVisits, as the estimator draws them);
//  - each stage it visits is a query of the stage's app, routed by the
//    selection policy like any other, with what remains of the one deadline;
//    a stage goes once every stage it takes rows from has answered, so
//    separate branches run at once;
//  - the pipeline query is answered when its last stage is, and fails at
//    the first stage that fails (dropped, or rejected when nothing took it).
// Only pipeline queries count in the online figures (under `app`), not
// their stages. With a plan, the allocator is shown the pipeline
// (control::ObservedPipeline) and the pipeline allocator tunes and
// provisions its stages (control/pipeline_allocator.h) exactly as in the
// controller. Stage queries skip the burst pool's Bouncer, as the
// controller's pipelines have no burst pool.
struct SimPipelineStage {
  std::string vertex;
  int32_t app = 0;    // the stage's app, which names `model` among its models
  std::string model;  // the stage's model
  std::vector<pipeline::StageEdge> in;  // from earlier stages; empty: every query
  // The plan's: the worker type (index; -1: none, only without a plan) and
  // the variant (VariantKey::variant; empty: the model's first profiled
  // there) it provisions, and the batch every instance of that variant
  // there runs at most (0: the setup's batching).
  int32_t worker_type = 0;
  std::string variant;
  int32_t batch = 0;
};
struct SimPipeline {
  std::string name;
  int32_t app = 0;
  std::vector<SimPipelineStage> stages;  // in topological order
  // The tuner's starting point, one stage per stage in the same order;
  // unset: the pipeline is served but nothing provisions it (no plan
  // applied).
  std::optional<pipeline::TunerPlan> plan;
};

// Whether `app`'s arrivals are a pipeline's queries.
bool IsPipelineApp(const SimulationSetup& setup, int32_t app);

struct SimulationSetup {
  std::vector<SimWorkerType> worker_types;
  std::vector<SimVariant> variants;
  std::vector<SimApp> apps;
  std::vector<SimInstanceSpec> instances;
  // The batching policy of every instance. When `batching.slo` is 0 each
  // instance gets its app's latency objective as its SLO.
  policy::BatchingOptions batching;
  // When set, makes instance i's policy instead of CreateBatchingPolicy
  // (tests inject fakes through it).
  std::function<std::unique_ptr<policy::BatchingPolicy>(int32_t instance)> policy_factory;
  std::string routing = "least-queued";  // or "selection": a managed cluster
  ControlSetup control;
  bool service_noise = false;
  InterferenceModel interference;
  std::vector<SimJob> jobs;
  policy::ThrottlePolicy job_throttle;
  std::vector<SimPipeline> pipelines;  // managed clusters
  std::vector<WorkerLoss> worker_losses;  // managed clusters
  BurstPool burst_pool;                   // managed clusters
  SpotInterruptions interruptions;        // managed clusters
  uint64_t seed = 1;
  // The trace's length: reports cover at least this much time, and workers
  // are billed up to it.
  Nanos horizon = 0;
};

// Per worker type (by index): how many workers the setup's instances need.
std::vector<int32_t> WorkersNeeded(const SimulationSetup& setup);

// What the control plane did, for the reports and tests.
struct ControlCounters {
  int64_t loads_by_selection = 0;    // instances loaded for kLoadAndServe / kServeAndLoad
  int64_t loads_by_selection_for_capacity = 0;  // of those, chosen under load (LoadRule::kCapacity)
  int64_t loads_by_autoscaler = 0;   // replicas loaded by the model autoscaler here
  int64_t loads_by_placement = 0;    // replicas placed elsewhere for kNeedsPlacement
  int64_t loads_refused = 0;         // a worker without the cores for a selection load
  int64_t replicas_removed = 0;
  int64_t vacated = 0;  // (worker, model) pairs given up by consolidation
  int64_t migrations = 0;          // Interfered instances moved to another worker
  int64_t migrations_retired = 0;  // Interfered copies unloaded, another serving Active
  int64_t model_actions[6] = {0, 0, 0, 0, 0, 0};  // by ModelScaleAction::Kind
  // Model autoscaler moves whose variant was chosen for capacity
  // (ModelScaleAction::Cause::kCapacity): capacity switches, and scale-ups or
  // placements the capacity tie decided.
  int64_t capacity_moves = 0;
  int64_t workers_added = 0;
  int64_t workers_removed = 0;
  int64_t workers_lost = 0;
  int64_t workers_interrupted = 0;  // spot interruption notices drawn
  int64_t queries_lost_to_interruptions = 0;  // queued or running at a stop
  int64_t state_changes = 0;
};

// A change in the cluster's shape at a time: for the per-second reports.
struct ShapeChange {
  Nanos at = 0;
  int32_t variant = -1;      // >= 0: ready replicas of this variant changed by delta
  int32_t worker_type = -1;  // >= 0: workers of this type up or starting changed by delta
  int32_t delta = 0;
};

class Simulator {
 public:
  // Checks the setup (indices, instance counts per worker type, policies) and
  // builds the workers and instances. Takes ownership of the arrival stream.
  static absl::StatusOr<std::unique_ptr<Simulator>> Create(SimulationSetup setup,
                                                           std::unique_ptr<ArrivalSource> arrivals);
  ~Simulator();

  // Runs every event at or before `until`. An error means a policy broke its
  // contract (e.g. a batching policy dispatched an expired query); the run
  // stops.
  absl::Status RunUntil(Nanos until);
  // Runs until no event is left: the trace is over and every query resolved.
  absl::Status Run() { return RunUntil(kInfiniteFuture); }

  bool finished() const { return !has_arrival_ && events_.empty(); }
  Nanos now() const { return now_; }
  const SimMetrics& metrics() const { return metrics_; }
  const SimulationSetup& setup() const { return setup_; }
  int64_t events_processed() const { return events_processed_; }
  bool managed() const { return router_ == nullptr; }

  // Dollars per simulated second for the workers paid for at time `t`.
  double CostRateAt(Nanos t) const;
  // Dollars for [from, to): each worker's price times its paid time in it.
  double CostBetween(Nanos from, Nanos to) const;
  // Total worker-seconds of each type paid for in [0, horizon).
  std::vector<double> WorkerSeconds() const;
  // The cluster's shape over time, in time order (initial shape at 0).
  const std::vector<ShapeChange>& shape_changes() const { return shape_; }
  const ControlCounters& control_counters() const { return control_; }
  // Managed clusters: one line per control-plane decision that changed
  // something (loads, unloads, state changes, workers), with its reason.
  const std::vector<std::string>& control_log() const { return log_; }

  // Offline jobs: each one's progress, and the throttle's view at every
  // report (the busiest online worker's utilisation, and whether jobs were
  // paused from then on).
  struct JobProgress {
    int64_t rows = 0;
    int64_t done_rows = 0;
    Nanos started = -1;   // -1: not yet
    Nanos finished = -1;  // -1: not yet
  };
  struct JobSample {
    Nanos at = 0;
    double online_utilisation = 0;  // the busiest worker serving online traffic
    double utilisation = 0;         // the busiest worker's whole utilisation
    bool paused = false;
    int64_t done_rows = 0;  // all jobs
  };
  const std::vector<JobProgress>& jobs() const { return job_progress_; }
  const std::vector<JobSample>& job_samples() const { return job_samples_; }

  // Views of the managed cluster, for tests and reports.
  struct WorkerInfo {
    int32_t type = 0;
    bool up = false;       // serving
    bool removed = false;  // given back
    Nanos paid_from = 0;
    Nanos paid_until = kInfiniteFuture;
    // Under a spot interruption notice: when it stops, the queries sent to
    // it since the notice and when the last of them came (-1: none).
    std::optional<Nanos> stops_at;
    int64_t queries_under_notice = 0;
    Nanos last_query_under_notice = -1;
  };
  struct InstanceInfo {
    int32_t app = 0;
    int32_t variant = 0;
    int32_t worker = 0;
    bool alive = false;     // not yet unloaded
    bool draining = false;  // unloading: finishing its queue, takes no queries
    int32_t ready = 0;      // replicas serving (retiring ones excluded)
    int32_t loading = 0;    // replicas loading
    int32_t queued = 0;     // queries waiting
    int32_t running = 0;    // queries in batches now executing
    policy::InstanceState state = policy::InstanceState::kInactive;
  };
  std::vector<WorkerInfo> Workers() const;
  std::vector<InstanceInfo> Instances() const;
  // Managed clusters: checks that the selection policy's live view agrees
  // with the simulated cluster (workers, instances, states, queries in
  // flight). For tests.
  absl::Status CheckLiveState() const;

 private:
  enum EventKind : uint32_t {
    kBatchDone,
    kWake,
    kExpiry,
    kLoadDone,
    kWorkerUp,
    kControl,
    kDemand,
    kWorkerLost,
    kBurstDone,
    kInterruptionNotice,
    kInterruptionStop,
  };

  struct Tag {
    int32_t app;
    bool below_min_accuracy;
    // The policy dropped it while it could still meet its deadline: it is
    // served as soon as possible instead (policy::ServeDroppedBestEffort).
    bool best_effort = false;
    // A chunk of an offline job (its rows), not an online query.
    int32_t job_rows = 0;
    // The Bouncer's estimate of its answer, from its arrival, when the
    // Bouncer judged it (0: not judged): compared with the answer in
    // SimMetrics::bouncer.
    Nanos bouncer_estimate = 0;
    // A stage of a pipeline query: its slot in pipeline_queries_ and the
    // stage (-1: not a stage).
    int32_t pipeline_query = -1;
    int32_t stage = -1;
  };
  struct InFlight {
    Nanos arrival;
    Nanos deadline;
    Tag tag;
  };
  // One executor of an instance: runs one batch at a time.
  struct Replica {
    int32_t instance = 0;
    bool ready = false;     // loaded
    bool retiring = false;  // to be unloaded when its batch ends
    bool gone = false;
    bool busy = false;
    Nanos batch_start = 0;
    int32_t batch_rows = 0;
    std::vector<InFlight> batch;
    int32_t transition = -1;  // the allocator's move waiting for this load, if any
  };
  struct SimInstance {
    std::unique_ptr<policy::BatchingPolicy> policy;
    // Live queue = [head, size): ordered by deadline; `tags` runs parallel.
    std::vector<policy::QueuedQuery> queue;
    std::vector<Tag> tags;
    size_t head = 0;
    size_t with_objective = 0;  // queued queries not best-effort
    int32_t app = 0;
    int32_t variant = 0;
    int32_t worker = 0;
    std::vector<int32_t> replicas;  // ids of its replicas not yet gone
    int32_t idle = 0;               // ready, not retiring, not busy
    int32_t ready = 0;              // ready and not retiring
    int32_t loading = 0;
    int32_t running_rows = 0;
    bool alive = true;
    bool draining = false;
    Nanos wake_armed = kInfiniteFuture;
    Nanos expiry_armed = kInfiniteFuture;
    // Service time by rows: median (ns) and lognormal sigma.
    std::vector<double> median_ns;
    std::vector<double> sigma;
    Rng noise{0};
    // Rows that arrived since the last demand tick (every cluster).
    int64_t demand_rows = 0;
    // Managed clusters: this monitoring interval's figures and the state
    // machine's history.
    int64_t interval_arrivals = 0;
    int64_t interval_job_arrivals = 0;  // of those, job chunks
    int64_t interval_served = 0;
    int64_t interval_batches = 0;
    int64_t interval_rows = 0;
    std::vector<Nanos> interval_compute;
    policy::InstanceHistory history;
    // The last report's figures.
    double arrival_qps = 0;
    double online_qps = 0;  // arrivals that were not job chunks
    double served_qps = 0;
    double mean_batch = 1;
    double compute_p50_ms = 0;
    Nanos ready_since = 0;  // when a load last finished here
    // The most rows one batch holds (the batching cap, or the planned
    // batch), reported as a worker reports its own.
    int32_t max_batch = 0;
  };
  struct Worker {
    int32_t type = 0;
    std::string id;
    bool up = false;
    bool removed = false;
    Nanos paid_from = 0;
    Nanos paid_until = kInfiniteFuture;
    std::vector<int32_t> instances;  // alive instances here
    Nanos busy_core_ns = 0;  // this interval: Σ batch time × cores per replica
    double running_cores = 0;  // Σ cores per replica of the batches running now
    Nanos job_busy_core_ns = 0;  // this interval: the job chunks' share of busy_core_ns
    double job_utilisation = 0;  // the last report's job share of its cores
    double utilisation = 0;          // the last report's
    std::optional<Nanos> idle_since;
    bool active_this_interval = false;  // a query arrived or was served here
    // Under a spot interruption notice: when it stops. It takes no load,
    // takes queries only until their leaving margin (control/leaving.h),
    // and the allocator no longer sees it.
    std::optional<Nanos> stops_at;
    int64_t queries_under_notice = 0;  // sent here since the notice
    Nanos last_query_under_notice = -1;
  };
  // A load the allocator asked for: once its replicas are ready, its
  // removals happen (make before break) and the allocator is told.
  struct Transition {
    int32_t worker = 0;
    int32_t pending_loads = 0;
    std::vector<std::pair<int32_t, int32_t>> removals;  // (variant, replicas)
    std::function<void()> done;
  };
  class ControlSink;

  Simulator(SimulationSetup setup, std::unique_ptr<ArrivalSource> arrivals);

  // Offline jobs (simulator_jobs.cc).
  void RunJobs();                // every report: the throttle, then the next chunk
  void SendJobChunk();           // the head job's next chunk, when one may go
  void OnJobChunkDone(int32_t rows);
  void OnJobChunkLost();  // dropped or lost with its worker: sent again

  // Pipelines (simulator_pipelines.cc; SimPipeline).
  struct PipelineQuery {
    int32_t pipeline = 0;
    Nanos arrival = 0;
    Nanos deadline = 0;
    std::vector<uint8_t> visits;      // per stage
    std::vector<int32_t> waiting_on;  // per stage: its sources not yet answered
    int32_t unanswered = 0;           // visited stages not answered yet
    int32_t in_flight = 0;            // stage queries sent and not yet resolved
    bool failed = false;
  };
  struct PipelineState {
    std::vector<std::vector<pipeline::StageEdge>> in_edges;  // per stage
    std::vector<std::vector<int32_t>> next;  // per stage: those with an edge from it
    Rng paths{0};
    std::vector<Nanos> arrivals;  // since the last model round
    // Rows of answered queries, and per stage the rows that visited it: the
    // measured scale factors, as the controller counts them from answers.
    int64_t answered = 0;
    std::vector<int64_t> visited;
  };
  static absl::Status CheckPipelines(const SimulationSetup& setup);
  void SetUpPipelines();
  void StartPipelineQuery(int32_t pipeline, Nanos deadline);
  // Sends the stage; a refusal fails the query.
  void SendStage(int32_t query, int32_t stage);
  void OnStageAnswered(int32_t query, int32_t stage, double accuracy);
  void OnStageFailed(int32_t query, bool rejected);
  // The query's slot is freed once nothing of it is in flight.
  void MaybeRelease(int32_t query);
  void ObservePipelines(bool take_arrivals, control::Observation& o);

  // Data path (simulator.cc).
  void FetchArrival();
  void OnArrival(const Arrival& a);
  void Enqueue(int32_t i, const policy::QueuedQuery& q, const Tag& tag);
  void OnBatchDone(int32_t replica);
  void OnWake(int32_t i, Nanos at);
  void OnExpiry(int32_t i, Nanos at);
  void RunDecisions(int32_t i);
  void StartBatch(int32_t i, int32_t count);
  void DropPrefix(int32_t i, int32_t count);
  // The policy dropped the first `count` queued: those that may still meet
  // their deadline stay, best-effort; the rest are dropped.
  void OnPolicyDrop(int32_t i, int32_t count);
  void Pop(SimInstance& inst, int32_t count);  // the first `count` leave the queue
  void ArmExpiry(int32_t i);
  void Reject(int32_t app, Counters& second);
  // An online query answered now: counted on time or late, and its
  // latency recorded. Returns whether it was on time.
  bool Complete(int32_t app, Nanos arrival, Nanos deadline, double accuracy,
                bool below_min_accuracy, Counters& second);
  Nanos ServiceTime(SimInstance& inst, int32_t rows);
  Counters& Second(Nanos t);
  void Fail(absl::Status status);
  absl::StatusOr<int32_t> AddInstance(int32_t app, int32_t variant, int32_t worker);
  // The steps of Create: refuse an inconsistent setup; choose the app each
  // variant serves (variant_app_); start the workers paid for from the start
  // and the static instances on them, ready.
  static absl::Status CheckSetup(const SimulationSetup& setup);
  void AssignVariantApps();
  absl::Status StartInitialCluster();

  // The burst pool (simulator_burst.cc).
  // The Bouncer: whether instance i can answer `request` within its deadline.
  // Whether the Bouncer admits `request` to instance `i`; `*estimate` is
  // its estimate of the answer when it could make one (0 otherwise).
  bool Admits(int32_t i, const RouteRequest& request, Nanos* estimate) const;
  // Sends `request` to the pool; false when it is at its concurrency limit.
  bool SendToBurstPool(const RouteRequest& request);
  void OnBurstDone(int32_t slot);
  // Routes a managed cluster's query through the Bouncer: the instance, or
  // -1 when the pool took it or nothing did (`*bounced` says which).
  int32_t RouteWithBouncer(const RouteRequest& request, bool* bounced, Nanos* estimate);

  // The simulated control-plane mechanism (simulator_control.cc).
  absl::Status SetUpControl();
  int32_t Route(const RouteRequest& request);
  int32_t StartWorker(int32_t type, Nanos ready_at);
  void OnWorkerUp(int32_t w);
  void RemoveWorker(int32_t w);
  // setup_.worker_losses[loss] happens: the worker dies with what it holds.
  void OnWorkerLost(int32_t loss);
  // Worker w dies now with what it holds (dropped, counted as such).
  void LoseWorker(int32_t w);

  // Drawn spot interruptions (simulator_spot.cc; SpotInterruptions).
  // Draws worker w's next notice, if it is spot and notices are drawn.
  void DrawInterruption(int32_t w);
  void OnInterruptionNotice(int32_t w);
  void OnInterruptionStop(int32_t w);
  // Loads `count` replicas of `variant` on worker `w` (making the instance
  // if needed); returns the instance, or -1 when the variant has no app.
  int32_t StartLoad(int32_t w, int32_t variant, int32_t count, int32_t transition);
  void OnLoadDone(int32_t replica);
  // Unloads `count` ready replicas of instance i; all of them unloads the
  // instance, which first answers what it has queued.
  void RemoveReplicas(int32_t i, int32_t count);
  void DropReplica(int32_t replica);
  void UnloadInstance(int32_t i);
  void MaybeFinishDraining(int32_t i);
  void CancelLoads(int32_t i);
  void OnControl();
  // Every report interval, in every cluster: tells each instance's batching
  // policy the rows per second it was sent, as a real worker's report does.
  void OnDemand();
  void Report(int32_t w, Nanos interval);
  // The cluster as the allocator sees it (simulator_observe.cc); the model
  // round also takes the refused rows.
  control::Observation Observe(bool take_refused);
  // The models and variants the allocator may load (fixed by the setup).
  std::vector<control::ModelOption> ModelOptions() const;
  // One of a transition's loads ended (ready, or cancelled with its worker).
  void EndTransitionLoad(int32_t transition, bool ready);
  int32_t WorkerById(const std::string& id) const;
  double UsedCores(const Worker& w) const;
  double UsedMemory(const Worker& w) const;
  double FreeMemoryForSelection(const Worker& w) const;
  int32_t InstanceOf(int32_t w, int32_t variant) const;
  int32_t VariantOnType(const std::string& model, const std::string& variant, int32_t type) const;
  bool ControlWanted() const;
  void RecordShape(int32_t variant, int32_t type, int32_t delta);
  void Log(std::string line);

  SimulationSetup setup_;
  std::unique_ptr<ArrivalSource> arrivals_;
  std::unique_ptr<Router> router_;                     // static clusters
  std::unique_ptr<SelectionRouter> selection_;         // managed clusters
  std::unique_ptr<control::Allocator> allocator_;   // managed clusters
  std::unique_ptr<ControlSink> sink_;
  std::vector<control::ModelOption> models_;         // what the allocator may load
  std::vector<SimInstance> instances_;
  std::vector<Replica> replicas_;
  std::vector<Worker> workers_;
  std::vector<Transition> transitions_;
  std::vector<int32_t> variant_app_;  // the app a variant serves (-1: none)
  std::vector<PipelineState> pipelines_;       // per setup pipeline
  std::vector<int32_t> pipeline_of_app_;       // per app: the pipeline it is, or -1
  std::vector<PipelineQuery> pipeline_queries_;  // by slot
  std::vector<int32_t> free_pipeline_queries_;
  std::vector<int32_t> planned_batch_;  // per variant: a plan's cap on its batch (0: none)
  std::vector<int64_t> refused_;      // per app, since the last model round: kUnavailable rows
  std::vector<Counters> service_taken_;  // per app: the totals the last model round saw
  std::vector<double> min_replica_cores_;  // per worker type
  std::vector<InstanceView> views_;
  std::vector<std::vector<int32_t>> by_app_;
  std::vector<ShapeChange> shape_;
  EventQueue events_;
  Arrival arrival_;  // the next arrival, fetched ahead
  uint64_t arrival_seq_ = 0;
  bool has_arrival_ = false;
  Nanos now_ = 0;
  Nanos last_report_ = 0;
  Nanos next_model_round_ = 0;
  Nanos next_cluster_round_ = 0;
  int64_t in_system_ = 0;  // queries queued or running, managed clusters
  int64_t events_processed_ = 0;
  SimMetrics metrics_;
  ControlCounters control_;
  std::vector<JobProgress> job_progress_;
  size_t job_head_ = 0;          // the job running now (or next)
  bool job_chunk_in_flight_ = false;
  policy::ThrottleState job_throttle_;
  std::vector<JobSample> job_samples_;
  std::vector<std::string> log_;
  struct BurstQuery {
    Nanos arrival = 0;
    Nanos deadline = 0;
    int32_t app = 0;
  };
  std::vector<BurstQuery> burst_;          // in flight, by slot
  std::vector<int32_t> burst_free_slots_;
  std::deque<Nanos> burst_warm_;           // idle warm instances: when each was freed, oldest first
  int32_t burst_in_flight_ = 0;
  Rng interruption_draws_{0};  // seeded from the setup's in Create
  absl::Status status_;
};

}  // namespace maitre::sim
