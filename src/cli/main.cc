// `maitre`: one binary, one subcommand per role (docs/api.md, "Command line").
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "cli/bench_command.h"
#include "cli/client_commands.h"
#include "cli/job_command.h"
#include "cli/key_command.h"
#include "cli/pipeline_command.h"
#include "cli/plan_command.h"
#include "cli/predict_command.h"
#include "controller/serve.h"
#include "core/malloc_tuning.h"
#include "sim/experiment.h"
#include "worker/worker_main.h"

namespace {

constexpr char kDefaultServer[] = "http://127.0.0.1:8000";

std::vector<int> ParseCores(const std::string& list) {
  std::vector<int> cores;
  for (absl::string_view c : absl::StrSplit(list, ',', absl::SkipEmpty())) {
    int core = 0;
    if (absl::SimpleAtoi(c, &core) && core >= 0) cores.push_back(core);
  }
  return cores;
}

// The variant pipeline's profiling schedule (ServeOptions::profile_*).
void AddProfilingOptions(CLI::App& serve_cmd, maitre::controller::ServeOptions& serve) {
  serve_cmd.add_option("--profile-sweeps", serve.profile_sweeps,
                       "Fewest sweeps per profile, a minute apart, keeping the fastest; up "
                       "to twice as many until the fastest is seen twice (1: measure at once)")
      ->check(CLI::Range(1, 10))
      ->capture_default_str();
  serve_cmd.add_option("--profile-sweep-spacing", serve.profile_sweep_spacing_s,
                       "Seconds between two sweeps of one profile")
      ->check(CLI::Range(0.0, 3600.0))
      ->capture_default_str();
  serve_cmd.add_option("--profile-settle", serve.profile_settle_s,
                       "Seconds after its first sweep by which a profile is final, whether or "
                       "not two sweeps agreed (the bound on profiling a busy host)")
      ->check(CLI::Range(0.0, 86400.0))
      ->capture_default_str();
}

// Process-wide settings, before any thread starts.
void SetUpProcess() {
  // Debian's Abseil is built with mutex deadlock detection on, which keeps a
  // lock graph on every acquisition (visible in profiles of the serving
  // path). Unit tests keep it; the shipped binary does not pay for it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  // Before any thread starts: a worker's forward passes, and the front-end's
  // large bodies, reuse heap memory instead of faulting it in anew each time
  // (core/malloc_tuning.h).
  maitre::TuneMalloc();
  // Logs go to stderr (spdlog's default is stdout), so that stdout carries
  // only what a command prints: `bench --json`, `variants --csv`, ...
  spdlog::set_default_logger(std::make_shared<spdlog::logger>(
      "", std::make_shared<spdlog::sinks::stderr_color_sink_mt>()));
}

// Each Add*Command below adds one subcommand (or a group) with its options
// and a callback that runs it and sets *exit_code. The parsed options live
// in a shared_ptr the callback holds, so they outlive the function.

void AddServeCommand(CLI::App& app, int* exit_code) {
  struct Flags {
    maitre::controller::ServeOptions serve;
    size_t max_body_mb = 0;
  };
  auto flags = std::make_shared<Flags>();
  maitre::controller::ServeOptions& serve = flags->serve;
  flags->max_body_mb = serve.max_body_bytes >> 20;
  CLI::App* serve_cmd = app.add_subcommand("serve", "Run the controller (and local workers)");
  serve_cmd->add_option("--data-dir", serve.data_dir,
                        "Registry and model store (default $MAITRE_DATA_DIR or "
                        "~/.local/share/maitre)");
  serve_cmd->add_option("--http", serve.http, "HTTP listen address")->capture_default_str();
  serve_cmd->add_option("--grpc", serve.grpc, "gRPC listen address")->capture_default_str();
  serve_cmd->add_option("--control", serve.control,
                        "Listen address for workers (joining, reports, model files)")
      ->capture_default_str();
  serve_cmd->add_option("--workers", serve.workers,
                        "Local workers to keep running, type:count,... (\"\" for none; auto: one "
                        "of each type when this machine's cores fit them all, else the "
                        "smallest type on every core, so that no two share a core)")
      ->capture_default_str();
  serve_cmd->add_option("--worker-types", serve.worker_types,
                        "Worker types, name:cores:memory_mb:price_per_hour,...");
  serve_cmd->add_option("--price-traces", serve.price_traces,
                        "Spot price traces, TYPE=FILE,...: a spot type's price follows the CSV "
                        "of time_s,price_per_hour (first row at 0, times increasing) from the "
                        "start; the last price holds after the last row");
  serve_cmd->add_option("--batching", serve.batching,
                        "Batching policy: proteus, clipper-aimd, nexus, timeout, mark")
      ->capture_default_str();
  serve_cmd->add_option("--max-body-mb", flags->max_body_mb, "Largest request body")
      ->capture_default_str();
  serve_cmd->add_option("--http-threads", serve.http_threads, "HTTP I/O threads")
      ->capture_default_str();
  serve_cmd->add_option("--max-connections", serve.max_connections,
                        "Most open HTTP connections (at most half the descriptor limit); one "
                        "more is answered 503 and closed")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  serve_cmd->add_option("--header-timeout", serve.header_timeout_s,
                        "Seconds an HTTP request's header may take to arrive")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  serve_cmd->add_option("--idle-timeout", serve.idle_timeout_s,
                        "Seconds an HTTP connection may wait on its client without progress")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  serve_cmd->add_option("--drain-grace", serve.drain_grace_s,
                        "On SIGTERM or SIGINT, seconds the requests already received may take "
                        "before the workers stop (a second signal stops at once)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  serve_cmd->add_option("--serving-allowance-ms", serve.serving_allowance_ms,
                        "Added to a latency objective to make the deadline (network hops)")
      ->capture_default_str();
  serve_cmd->add_option("--router", serve.router,
                        "What chooses each query's instance: infaas (the selection policy), "
                        "weighted or uniform; default: the allocator's");
  serve_cmd->add_option("--allocator", serve.allocator,
                        "What plans loads and workers: infaas, or on a fixed cluster proteus, "
                        "clipper-ht, clipper-ha, sommelier, proteus-no-selection, infaas-accuracy; "
                        "or mark, provisioning ahead of predicted demand (docs/policies.md)")
      ->capture_default_str();
  serve_cmd->add_option("--mark-predictor", serve.mark_predictor,
                        "--allocator mark's predictor: last, ewma[:ALPHA], "
                        "holt-winters[:SEASON_UNITS]")
      ->capture_default_str();
  serve_cmd->add_option("--mark-unit-s", serve.mark_unit_s,
                        "--allocator mark: the prediction unit P_u in seconds, a whole multiple "
                        "of the 5 s sample window; forecasts are per-unit peaks")
      ->capture_default_str()
      ->check(CLI::Range(5.0, 86400.0));
  serve_cmd->add_option("--mark-cool-down-s", serve.mark_cool_down_s,
                        "--allocator mark: how long a worker the plan no longer uses is kept "
                        "before it is given back")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 86400.0));
  serve_cmd->add_option("--mark-sl-min", serve.mark_sl_min,
                        "--allocator mark: the share of queries to keep within their objective, "
                        "in (0, 1]")
      ->capture_default_str();
  serve_cmd->add_option("--inject-interruption", serve.inject_interruption,
                        "fault injection, AFTER_S[:LEAD_S]: AFTER_S seconds after the start, the "
                        "oldest local spot worker gets an interruption notice LEAD_S (120) "
                        "seconds ahead");
  serve_cmd->add_option("--burst-pool", serve.burst_pool,
                        "a burst pool of worker processes for what the provisioned instances "
                        "cannot answer in time: \"on\" or key=value pairs, e.g. "
                        "warm=1,max=2,concurrency=32,price_per_request=4.31e-7 "
                        "(docs/operations.md)");
  serve_cmd->add_option("--mark-launch-s", serve.mark_launch_s,
                        "--allocator mark: seconds from launching a worker to it serving")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  serve_cmd->add_option("--model-autoscaler", serve.model_autoscaler,
                        "infaas, horizontal or off")
      ->capture_default_str();
  serve_cmd->add_option("--cluster-autoscaler", serve.cluster_autoscaler,
                        "Add and retire local workers with the load (true/false)")
      ->capture_default_str();
  serve_cmd->add_option("--migrate-interfered", serve.migrate_interfered,
                        "Move instances that stay Interfered to a less-loaded worker "
                        "(true/false)")
      ->capture_default_str();
  serve_cmd->add_option("--jobs-dir", serve.jobs_dir,
                        "Offline jobs read and write beneath this directory only (default: "
                        "<data-dir>/jobs)");
  serve_cmd->add_option("--auth", serve.auth,
                        "Whether clients need API keys: auto (when HTTP or gRPC listens beyond "
                        "loopback), on, or off (refused beyond loopback); docs/operations.md")
      ->capture_default_str();
  serve_cmd->add_option("--join-token-file", serve.join_token_file,
                        "File holding the secret workers join with (default: "
                        "<data-dir>/join-token, made on first start)");
  serve_cmd->add_option("--sandbox", serve.sandbox,
                        "Confinement of uploaded model code in workers and variant generators: "
                        "off, best-effort or required (docs/operations.md)")
      ->capture_default_str();
  serve_cmd->add_option("--sandbox-user", serve.sandbox_user,
                        "Unprivileged user model code runs as when started as root")
      ->capture_default_str();
  serve_cmd->add_option("--max-workers", serve.max_workers,
                        "Most local workers of each type, type:n,... (default: what the free "
                        "cores allow)");
  serve_cmd->add_option("--default-timeout", serve.default_timeout_s,
                        "Seconds a query without a latency objective may take")
      ->capture_default_str();
  serve_cmd->add_option("--max-in-flight", serve.max_in_flight,
                        "Queries in flight at most; more are refused 429 (default: from the "
                        "host's memory, 64 KiB per query in a sixteenth of it)");
  serve_cmd->add_option("--shed-target-ms", serve.shed_target_ms,
                        "Once the HTTP front-end's backlog stands, a query that waited longer "
                        "than this behind other requests is refused 429 before decoding (0: never)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  serve_cmd->add_option("--grpc-max-streams", serve.grpc_max_streams,
                        "gRPC calls one client connection may have open at once")
      ->capture_default_str();
  serve_cmd->add_option("--grpc-memory-mb", serve.grpc_memory_mb,
                        "Memory gRPC may use for client traffic before it stops reading")
      ->capture_default_str();
  AddProfilingOptions(*serve_cmd, serve);
  serve_cmd->callback([flags, exit_code] {
    flags->serve.max_body_bytes = flags->max_body_mb << 20;
    *exit_code = maitre::controller::RunServe(flags->serve);
  });
}

void AddWorkerCommand(CLI::App& app, int* exit_code) {
  struct Flags {
    maitre::worker::WorkerOptions worker;
    std::string cores;
  };
  auto flags = std::make_shared<Flags>();
  maitre::worker::WorkerOptions& worker = flags->worker;
  CLI::App* worker_cmd = app.add_subcommand("worker", "Run a worker process");
  worker_cmd->add_option("--controller", worker.controller,
                         "The controller's address for workers (maitre serve --control)")
      ->capture_default_str();
  worker_cmd->add_option("--type", worker.type, "Worker type")->capture_default_str();
  worker_cmd->add_option("--listen", worker.listen, "Listen address (port 0: any free port)")
      ->capture_default_str();
  worker_cmd->add_option("--advertise", worker.advertise_host,
                         "Host the controller should use to reach this worker");
  worker_cmd->add_option("--cores", flags->cores, "CPUs to pin to, e.g. 0,1");
  worker_cmd->add_option("--cache-dir", worker.cache_dir, "Where fetched model files are kept");
  worker_cmd->add_option("--host-speed-file", worker.host_speed_file,
                         "File keeping the profiler's host-speed baseline across restarts "
                         "(one per worker type and host)");
  worker_cmd->add_option("--join-token-file", worker.join_token_file,
                         "File holding the cluster's join token (the controller's data "
                         "directory has it, as join-token; default: $MAITRE_JOIN_TOKEN)");
  worker_cmd->add_option("--sandbox", worker.sandbox,
                         "Confinement of model code: off, best-effort or required")
      ->capture_default_str();
  worker_cmd->add_option("--sandbox-user", worker.sandbox_user,
                         "Unprivileged user model code runs as when started as root")
      ->capture_default_str();
  worker_cmd->add_option("--launch-token", worker.launch_token)->group("");
  worker_cmd->callback([flags, exit_code] {
    flags->worker.cores = ParseCores(flags->cores);
    *exit_code = maitre::worker::RunWorker(flags->worker);
  });
}

void AddRegisterCommand(CLI::App& app, int* exit_code) {
  auto reg = std::make_shared<maitre::cli::RegisterArgs>();
  reg->server = kDefaultServer;
  CLI::App* reg_cmd = app.add_subcommand("register", "Register a model with an app");
  reg_cmd->add_option("--server", reg->server, "Server URL")->capture_default_str();
  reg_cmd->add_option("--app", reg->app, "App that owns the model")->required();
  reg_cmd->add_option("--name", reg->name, "Model name")->required();
  reg_cmd->add_option("--model", reg->model, "TorchScript .pt or ONNX file")->required();
  reg_cmd->add_option("--valset", reg->valset, "Validation set .npz (inputs, labels)");
  reg_cmd->add_option("--onnx", reg->onnx, "ONNX export of a TorchScript model");
  reg_cmd->add_option("--meta", reg->meta, "Meta JSON file (format, inputs, outputs)");
  reg_cmd->add_option("--format", reg->format, "torchscript | onnx");
  reg_cmd->add_option("--input", reg->inputs, "NAME:DTYPE:SHAPE, e.g. input:FP32:-1,1,28,28");
  reg_cmd->add_option("--output", reg->outputs, "NAME:DTYPE:SHAPE, e.g. logits:FP32:-1,10");
  reg_cmd->add_option("--accuracy", reg->accuracy, "Declared accuracy when there is no valset");
  reg_cmd->add_flag("--json", reg->json, "Print JSON");
  reg_cmd->callback([reg, exit_code] { *exit_code = maitre::cli::RunRegister(*reg); });
}

void AddInferCommand(CLI::App& app, int* exit_code) {
  auto infer = std::make_shared<maitre::cli::InferArgs>();
  infer->server = kDefaultServer;
  CLI::App* infer_cmd = app.add_subcommand("infer", "Send one inference request");
  infer_cmd->add_option("--server", infer->server, "Server URL")->capture_default_str();
  infer_cmd->add_option("--model", infer->model, "Model, or model:variant");
  infer_cmd->add_option("--app", infer->app, "App (model-less query)");
  infer_cmd->add_option("--pipeline", infer->pipeline, "A registered pipeline");
  infer_cmd->add_option("--latency-ms", infer->latency_ms, "Latency objective");
  infer_cmd->add_option("--min-accuracy", infer->min_accuracy, "Minimum accuracy (fraction)");
  infer_cmd->add_option("--max-cost", infer->max_cost, "Cost ceiling, $/h");
  infer_cmd->add_option("--input", infer->input, ".npz arrays or a .json v2 request")->required();
  infer_cmd->add_flag("--json", infer->json, "Print the raw JSON response");
  infer_cmd->callback([infer, exit_code] { *exit_code = maitre::cli::RunInfer(*infer); });
}

// `variants`, and `profiles import|export`.
void AddVariantAndProfileCommands(CLI::App& app, int* exit_code) {
  auto variants = std::make_shared<maitre::cli::VariantsArgs>();
  variants->server = kDefaultServer;
  CLI::App* variants_cmd =
      app.add_subcommand("variants", "Variants with accuracy and profiles per worker type");
  variants_cmd->add_option("--server", variants->server, "Server URL")->capture_default_str();
  variants_cmd->add_option("--app", variants->app, "Only this app");
  variants_cmd->add_flag("--csv", variants->csv, "Print the profile CSV");
  variants_cmd->add_flag("--json", variants->json, "Print JSON");
  variants_cmd->callback(
      [variants, exit_code] { *exit_code = maitre::cli::RunVariants(*variants); });

  auto profiles = std::make_shared<maitre::cli::ProfilesArgs>();
  profiles->server = kDefaultServer;
  CLI::App* profiles_cmd = app.add_subcommand("profiles", "Move profiles between servers");
  profiles_cmd->require_subcommand(1);
  CLI::App* import_cmd = profiles_cmd->add_subcommand("import", "Import a profile CSV");
  import_cmd->add_option("file", profiles->file, "CSV file")->required();
  import_cmd->add_option("--server", profiles->server, "Server URL")->capture_default_str();
  import_cmd->callback(
      [profiles, exit_code] { *exit_code = maitre::cli::RunProfilesImport(*profiles); });
  CLI::App* export_cmd = profiles_cmd->add_subcommand("export", "Export the profile CSV");
  export_cmd->add_option("file", profiles->file, "Output file (default stdout)");
  export_cmd->add_option("--app", profiles->app, "Only this app");
  export_cmd->add_option("--server", profiles->server, "Server URL")->capture_default_str();
  export_cmd->callback(
      [profiles, exit_code] { *exit_code = maitre::cli::RunProfilesExport(*profiles); });
}

void AddSimCommand(CLI::App& app, int* exit_code) {
  struct Flags {
    std::string config, out;
  };
  auto flags = std::make_shared<Flags>();
  CLI::App* sim_cmd = app.add_subcommand("sim", "Run an experiment in the simulator");
  sim_cmd->add_option("--config", flags->config, "Experiment YAML")->required();
  sim_cmd->add_option("--out", flags->out, "Output directory")->required();
  sim_cmd->callback([flags, exit_code] {
    absl::Status s = maitre::sim::RunExperimentFile(flags->config, flags->out);
    if (!s.ok()) {
      std::fprintf(stderr, "maitre sim: %s\n", std::string(s.message()).c_str());
      *exit_code = 1;
    }
  });
}

// `apps` (which can also set an app's default requirements) and `models`.
void AddListCommands(CLI::App& app, int* exit_code) {
  auto list = std::make_shared<maitre::cli::ListArgs>();
  list->server = kDefaultServer;
  for (auto [name, help] : {std::pair{"apps", "List apps"}, {"models", "List models"}}) {
    CLI::App* cmd = app.add_subcommand(name, help);
    cmd->add_option("--server", list->server, "Server URL")->capture_default_str();
    cmd->add_option("--app", list->app, "Only this app");
    cmd->add_flag("--json", list->json, "Print JSON");
  }
  CLI::App* apps_cmd = app.get_subcommand("apps");
  apps_cmd->add_option("--latency-ms", list->latency_ms, "Set the app's default latency objective");
  apps_cmd->add_option("--min-accuracy", list->min_accuracy,
                       "Set the app's default accuracy floor");
  apps_cmd->add_option("--max-cost", list->max_cost, "Set the app's default cost ceiling ($/h)");
  apps_cmd->add_option("--max-accuracy-drop", list->max_accuracy_drop,
                       "Set the fraction (0-1) of the app's best accuracy that --allocator "
                       "proteus may give up");
  apps_cmd->add_option("--sl-min", list->sl_min,
                       "Set the share (0-1] of the app's queries --allocator mark keeps within "
                       "its latency objective");
  CLI::App* models_cmd = app.get_subcommand("models");
  // The listing runs unless a `delete` under the noun was given.
  apps_cmd->callback([list, apps_cmd, exit_code] {
    if (!apps_cmd->got_subcommand("delete")) *exit_code = maitre::cli::RunApps(*list);
  });
  models_cmd->callback([list, models_cmd, exit_code] {
    if (!models_cmd->got_subcommand("delete")) *exit_code = maitre::cli::RunModels(*list);
  });

  auto del = std::make_shared<maitre::cli::DeleteArgs>();
  del->server = kDefaultServer;
  CLI::App* app_delete = apps_cmd->add_subcommand(
      "delete", "Delete an app with its models, unloading them and removing their files");
  app_delete->add_option("app", del->app, "App")->required();
  CLI::App* model_delete = models_cmd->add_subcommand(
      "delete", "Delete a model, unloading it and removing its files");
  model_delete->add_option("app", del->app, "App that owns the model")->required();
  model_delete->add_option("model", del->model, "Model")->required();
  for (CLI::App* cmd : {app_delete, model_delete}) {
    cmd->add_option("--server", del->server, "Server URL")->capture_default_str();
    cmd->add_flag("--force", del->force, "Cancel the offline jobs that use it");
    cmd->add_flag("--json", del->json, "Print JSON");
    cmd->callback([del, exit_code] { *exit_code = maitre::cli::RunDelete(*del); });
  }
}

}  // namespace

int main(int argc, char** argv) {
  SetUpProcess();
  CLI::App app{"maitre: model-less inference serving"};
  app.require_subcommand(1);
  int exit_code = 0;
  AddServeCommand(app, &exit_code);
  AddWorkerCommand(app, &exit_code);
  AddRegisterCommand(app, &exit_code);
  AddInferCommand(app, &exit_code);
  AddVariantAndProfileCommands(app, &exit_code);
  AddSimCommand(app, &exit_code);
  AddListCommands(app, &exit_code);
  maitre::cli::AddBenchCommand(app, &exit_code);
  maitre::cli::AddJobCommands(app, &exit_code, kDefaultServer);
  maitre::cli::AddKeyCommands(app, &exit_code, kDefaultServer);
  maitre::cli::AddPipelineCommands(app, &exit_code, kDefaultServer);
  maitre::cli::AddPredictCommand(app, &exit_code);
  maitre::cli::AddPlanCommand(app, &exit_code);
  CLI11_PARSE(app, argc, argv);
  return exit_code;
}
