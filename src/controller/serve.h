// The `maitre serve` process: the controller with every component wired
// together (docs/architecture.md, "Controller components"), and its embedded
// defaults (docs/operations.md, "Running").
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace maitre::controller {

struct ServeOptions {
  // Where the registry (registry.db), model files (blobs/), worker logs and
  // caches live. Empty: $MAITRE_DATA_DIR, else ~/.local/share/maitre.
  std::string data_dir;
  std::string http = "127.0.0.1:8000";  // port 0 picks a free port
  std::string grpc = "127.0.0.1:8001";
  // Where workers join and report: a port apart from the clients' (loopback
  // by default; docs/operations.md, "Security", before opening it wider).
  std::string control = "127.0.0.1:8002";
  // Local workers to start and keep running, "type:count,...". "auto", the
  // embedded default, derives them from this machine's cores so that no two
  // workers share a core: one of each type when their cores fit, else the
  // smallest type on every core (DefaultLocalWorkers; two cpu-1 on a 2-core
  // machine). "" starts none (workers then join from elsewhere with
  // `maitre worker --controller`).
  std::string workers = "auto";
  // The worker-type table, "name:cores:memory_mb:price_per_hour,...".
  // Empty: cpu-1 and cpu-2 (see WorkerTypeTable::Default).
  std::string worker_types;
  // Spot price traces, "TYPE=FILE,...": each named spot type's price follows
  // its CSV of time_s,price_per_hour from the server's start (docs/
  // operations.md, "Spot prices"). A bad trace stops the server with the
  // file, line and problem.
  std::string price_traces;
  // The batching policy worker instances use.
  std::string batching = "proteus";
  size_t max_body_bytes = size_t{256} << 20;
  int http_threads = 1;
  // What one HTTP peer can hold (http::ServerOptions; docs/operations.md,
  // "Connection limits"): open connections at most (at most half the
  // descriptor limit), seconds a request's header may take to arrive, and
  // seconds a connection may wait on its peer without progress.
  int max_connections = 4096;
  double header_timeout_s = 10;
  double idle_timeout_s = 60;
  // On SIGTERM or SIGINT, seconds the requests already received may take to
  // be answered before the workers are stopped (docs/operations.md,
  // "Stopping"); a second signal cuts it short.
  double drain_grace_s = 5;
  double default_timeout_s = 30;
  // Queries in flight in the controller at most, over HTTP and gRPC
  // together; more are refused 429 before their body is decoded
  // (dataplane/in_flight_limit.h). 0: InFlightLimit::DefaultLimit(), from
  // the host's memory.
  int64_t max_in_flight = 0;
  // The wait a query may have had in the HTTP front-end's backlog (from its
  // head read to its handler) once that backlog stands; past it the query
  // is refused 429 before its body is decoded
  // (dataplane/backlog_shedder.h). 0: never shed.
  double shed_target_ms = 5;
  // Bounds on the public gRPC server below the front-end's own: calls one
  // client connection may have open at once (more wait at the client, as
  // HTTP/2 has them), and the memory gRPC may use for client traffic (past
  // it gRPC stops reading from connections instead of queueing what it
  // read). Without them a flood of calls piles up inside gRPC, before any
  // handler sees it (docs/experiments.md, "overload").
  int grpc_max_streams = 256;
  int grpc_memory_mb = 256;
  // The fewest sweeps per profile, a minute or more apart; it takes up to
  // twice as many until its fastest is seen twice (SweepRule). 1 measures
  // each profile at once, in rounds a second apart.
  int profile_sweeps = 3;
  // Seconds between two sweeps of one profile.
  double profile_sweep_spacing_s = 60;
  // A profile is final at the latest this many seconds after its first
  // sweep, whether or not two sweeps agreed: the bound on profiling a busy
  // host.
  double profile_settle_s = 600;
  // Added to a query's latency objective to make its deadline: the time the
  // front-end and network hops take, which profiles do not measure.
  double serving_allowance_ms = 2;
  // What chooses each query's instance (control/query_router.h): "infaas"
  // (the selection policy), "weighted" (the allocator's route weights) or
  // "uniform". Empty: the allocator's own (control::DefaultRouterFor).
  std::string router;
  // The allocator that owns what is loaded where and how many workers run
  // (control/allocator.h): "infaas", or for a fixed cluster that scales
  // accuracy "proteus" (and its baselines clipper-ht, clipper-ha,
  // sommelier, proteus-no-selection, infaas-accuracy), or "mark" (workers
  // provisioned ahead of predicted demand).
  std::string allocator = "infaas";
  // The mark allocator's predictor (policy::CreatePredictor's names) and
  // how long a local worker takes from launch to serving, which it launches
  // ahead of demand by.
  std::string mark_predictor = "ewma";
  double mark_launch_s = 10;
  // Its prediction unit P_u (MArk's minute: a unit's peak is what it plans
  // for, and launch times and paid time count in units) and the cool-down
  // before a worker the plan no longer uses is given back. A unit is a whole
  // multiple of the 5 s sample window.
  double mark_unit_s = 60;
  double mark_cool_down_s = 60;
  // Its SLO monitor's SL_min for every app: the share of queries it keeps
  // within their objective, in (0, 1].
  double mark_sl_min = 0.98;
  // The INFaaS allocator's model autoscaler: "infaas" (replicate, upgrade, downgrade, shrink),
  // "horizontal" (replicate and shrink only) or "off".
  std::string model_autoscaler = "infaas";
  // The cluster autoscaler adds and retires local workers; never fewer than
  // --workers asks for, never more than max_workers ("type:n,..."). Empty:
  // as many more as this machine has free cores for (more local processes
  // on busy cores add contention, not capacity).
  bool cluster_autoscaler = true;
  // The INFaaS allocator moves instances that stay Interfered to a
  // less-loaded worker (docs/policies.md, "Interference migration").
  bool migrate_interfered = true;
  std::string max_workers;
  // Offline jobs read their inputs and write their results beneath this
  // directory only. Empty: <data_dir>/jobs.
  std::string jobs_dir;
  // Whether clients need API keys (docs/operations.md, "API keys"): "auto"
  // (when HTTP or gRPC listens beyond loopback), "on" or "off" (refused
  // beyond loopback).
  std::string auth = "auto";
  // The file holding the secret workers join with (docs/operations.md,
  // "Security"). Empty: <data_dir>/join-token, made on first start.
  std::string join_token_file;
  // How uploaded model code is confined, in the workers and the variant
  // generators' children (core/sandbox.h; docs/operations.md, "Sandbox"):
  // "off", "best-effort" or "required". Started as root, both run as
  // `sandbox_user`.
  std::string sandbox = "best-effort";
  std::string sandbox_user = "nobody";
  // The maitre executable the local provider launches workers from.
  // Empty: this process's own executable.
  std::string binary;
  // Fault injection, "AFTER_S[:LEAD_S]": AFTER_S seconds after the start,
  // the oldest local spot worker gets an interruption notice LEAD_S (120)
  // seconds ahead (docs/operations.md, "Spot interruptions"). Empty: none.
  std::string inject_interruption;
  // MArk's burst pool (docs/operations.md, "The burst pool"): "on", or
  // key=value pairs (controller/dataplane/burst_pool_spec.h). Empty: none.
  // Needs local workers.
  std::string burst_pool;
};

class Controller;

// A running controller. Destroying it stops everything it started.
class ControllerHandle {
 public:
  explicit ControllerHandle(std::unique_ptr<Controller> controller);
  ~ControllerHandle();
  int http_port() const;
  int grpc_port() const;
  // The start of a graceful stop: the front doors take no new requests
  // (HTTP refuses new connections and answers 503, gRPC answers
  // UNAVAILABLE) and offline jobs stop; requests already received are
  // served as usual. Idempotent.
  void BeginDrain();
  // Requests received and not yet answered (HTTP connections still open,
  // which after BeginDrain() are those with a request in progress, and gRPC
  // inferences in flight): the drain is done at 0.
  int Unanswered() const;

 private:
  std::unique_ptr<Controller> controller_;
};

absl::StatusOr<std::unique_ptr<ControllerHandle>> StartController(const ServeOptions& options);

// Runs until SIGINT/SIGTERM; returns the process exit code.
int RunServe(const ServeOptions& options);

}  // namespace maitre::controller
