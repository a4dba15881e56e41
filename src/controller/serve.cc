#include "controller/serve.h"

#include <unistd.h>

#include <algorithm>
#include <memory>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "control/allocator.h"
#include "control/mark_allocator.h"
#include "control/query_router.h"
#include "controller/access/auth_mode.h"
#include "controller/access/http_access.h"
#include "controller/access/key_ring.h"
#include "controller/access/key_routes.h"
#include "controller/frontend/model_views.h"
#include "controller/models/catalog.h"
#include "controller/dataplane/cluster.h"
#include "controller/dataplane/dispatcher.h"
#include "controller/dataplane/backlog_shedder.h"
#include "controller/dataplane/in_flight_limit.h"
#include "controller/frontend/grpc_frontend.h"
#include "controller/frontend/http_frontend.h"
#include "controller/jobs/job_http.h"
#include "controller/jobs/job_runner.h"
#include "controller/frontend/cluster_routes.h"
#include "controller/dataplane/burst_pool_spec.h"
#include "controller/provision/app_usage.h"
#include "controller/provision/cost_meter.h"
#include "controller/provision/cost_metrics.h"
#include "controller/provision/local_provider.h"
#include "controller/dataplane/placer.h"
#include "controller/models/model_removal.h"
#include "controller/models/registrar.h"
#include "controller/pipelines/pipeline_book.h"
#include "controller/registry/blob_store.h"
#include "controller/registry/registry.h"
#include "controller/provision/membership_service.h"
#include "controller/scaling/scaling_loop.h"
#include "controller/dataplane/selection_catalogue.h"
#include "controller/serve_flags.h"
#include "controller/serving_metrics.h"
#include "core/stop_signal.h"
#include "controller/models/variant_pipeline.h"
#include "core/file_util.h"
#include "core/sandbox.h"
#include "core/secret_token.h"
#include "core/clock.h"
#include "core/status_macros.h"
#include "core/work_queue.h"
#include "http/server.h"
#include "core/logging.h"

namespace maitre::controller {
namespace {

constexpr Nanos kReportInterval = 500 * kMillisecond;
constexpr Nanos kCostSaveInterval = 60 * kSecond;
constexpr char kVersion[] = "0.1.0";

}  // namespace

// Owns every component of a running controller, in dependency order so that
// destruction stops the front doors before what they use.
class Controller {
 public:
  // Builds and starts the components in dependency order: the stores, the
  // catalog and live cluster, the serving path, the model lifecycle and
  // jobs, the front doors, the local workers and the control loops. On an
  // error the destructor stops whatever had started.
  absl::Status Start(const ServeOptions& options) {
    std::string data_dir = options.data_dir.empty() ? DefaultDataDir() : options.data_dir;
    MAITRE_RETURN_IF_ERROR(MakeDirectories(data_dir));
    WorkerTypeTable types = WorkerTypeTable::Default();
    if (!options.worker_types.empty()) {
      MAITRE_ASSIGN_OR_RETURN(types, WorkerTypeTable::Parse(options.worker_types));
    }
    MAITRE_ASSIGN_OR_RETURN(
        types, WithPriceTraces(options.price_traces, types, SteadyClock::Get()->Now()));
    // The default layout never pins two workers to one core: the
    // autoscalers count each worker's cores as its own.
    const std::string workers =
        options.workers == "auto"
            ? DefaultLocalWorkers(types, static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)))
            : options.workers;
    if (options.workers == "auto") spdlog::info("local workers: {} (--workers auto)", workers);
    MAITRE_ASSIGN_OR_RETURN(auto worker_counts, ParseWorkerCounts(workers, types));
    // Names are checked before anything starts.
    MAITRE_RETURN_IF_ERROR(control::CheckAllocatorName(options.allocator));
    if (options.allocator == "mark") {
      MAITRE_RETURN_IF_ERROR(control::ValidateMarkOptions(MarkOf(options)));
    }
    if (!options.router.empty()) {
      MAITRE_RETURN_IF_ERROR(control::CheckQueryRouterName(options.router));
    }
    std::optional<BurstPool::Options> burst;
    if (!options.burst_pool.empty()) {
      MAITRE_ASSIGN_OR_RETURN(burst, ParseBurstPoolSpec(options.burst_pool));
      if (types.Find(burst->type.name) != nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--worker-types names a type \"", burst->type.name, "\", the burst pool's own"));
      }
      if (worker_counts.empty()) {
        return absl::InvalidArgumentError(
            "--burst-pool needs local workers (--workers): the pool's workers are local too");
      }
    }
    MAITRE_ASSIGN_OR_RETURN(sandbox_mode_, ParseSandboxMode(options.sandbox));
    if (sandbox_mode_ != SandboxMode::kOff && LandlockAbi() == 0) {
      if (sandbox_mode_ == SandboxMode::kRequired) {
        return absl::FailedPreconditionError(
            "--sandbox required, but this kernel offers no Landlock to confine model code with");
      }
      spdlog::warn("sandbox: this kernel offers no Landlock; model code is confined only by "
                   "no_new_privs and the sandbox user");
    }

    MAITRE_ASSIGN_OR_RETURN(join_token_, options.join_token_file.empty()
                                             ? ReadOrCreateTokenFile(data_dir + "/join-token")
                                             : ReadTokenFile(options.join_token_file));
    MAITRE_RETURN_IF_ERROR(OpenStores(data_dir));
    MAITRE_RETURN_IF_ERROR(LoadKeys(options, data_dir));
    MAITRE_RETURN_IF_ERROR(LoadCatalog(options, types));
    if (!worker_counts.empty()) {
      std::vector<WorkerType> priced = types.types();
      if (burst.has_value()) priced.push_back(burst->type);
      cost_ = std::make_unique<CostMeter>(WorkerTypeTable(std::move(priced)));
    }
    MAITRE_RETURN_IF_ERROR(BuildServingPath(options, worker_counts, std::move(burst)));
    MAITRE_RETURN_IF_ERROR(BuildModelLifecycleAndJobs(options, data_dir));
    MAITRE_ASSIGN_OR_RETURN(std::string grpc_host, StartGrpc(options));
    std::string grpc_address = absl::StrCat(grpc_host, ":", grpc_port_);
    MAITRE_ASSIGN_OR_RETURN(std::string control_host, StartControl(options));
    // Before HTTP, whose cluster routes reach the provider and its costs.
    if (!worker_counts.empty()) {
      MAITRE_RETURN_IF_ERROR(
          StartLocalWorkers(options, types, worker_counts, data_dir, control_host));
    }
    MAITRE_RETURN_IF_ERROR(StartHttp(options));

    pipeline_->Start();
    jobs_->Start();  // resumes unfinished jobs
    pipeline_->Kick();  // resume whatever a previous run left unfinished
    MAITRE_RETURN_IF_ERROR(StartScalingLoop(options, types, worker_counts));
    StartMaintenance();
    return WriteEndpoints(options, data_dir, grpc_address,
                          absl::StrCat(control_host, ":", control_port_));
  }

  ~Controller() {
    if (jobs_ != nullptr) jobs_->Stop();  // before what its chunks use
    stopping_.Request();
    if (maintenance_.joinable()) maintenance_.join();
    scaling_.reset();
    if (http_server_ != nullptr) http_server_->Stop();
    if (provider_ != nullptr) provider_->Stop();
    SaveCost();  // the workers have ended
    if (grpc_server_ != nullptr) {
      grpc_server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    }
    if (control_server_ != nullptr) {
      control_server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    }
    control_.reset();  // finishes queued control work while the rest exists
  }

  int http_port() const { return http_server_->port(); }
  int grpc_port() const { return grpc_port_; }

  // See ControllerHandle::BeginDrain. Offline jobs stop sending chunks:
  // theirs are durable and sent again after a restart. The allocator goes
  // on: its unloads and retired workers answer what they hold first.
  void BeginDrain() {
    jobs_->Stop();
    http_server_->BeginDrain();
    grpc_frontend_->BeginDrain();
  }

  int Unanswered() const { return http_server_->open_connections() + grpc_frontend_->in_flight(); }

 private:
  using WorkerCounts = std::vector<std::pair<std::string, int>>;

  // The durable stores under the data dir: the registry and the model files.
  absl::Status OpenStores(const std::string& data_dir) {
    MAITRE_ASSIGN_OR_RETURN(registry_,
                            registry::Registry::Open({absl::StrCat(data_dir, "/registry.db")}));
    MAITRE_ASSIGN_OR_RETURN(blobs_, registry::BlobStore::Open({absl::StrCat(data_dir, "/blobs")}));
    return absl::OkStatus();
  }

  // The API keys, and whether clients must present one (docs/operations.md,
  // "API keys"). A server that requires keys and has no admin key makes
  // one into <data_dir>/admin-key.
  absl::Status LoadKeys(const ServeOptions& options, const std::string& data_dir) {
    MAITRE_ASSIGN_OR_RETURN(bool required, KeysRequired(options.auth, {options.http, options.grpc}));
    keys_ = std::make_unique<KeyRing>(KeyRing::Options{&registry_->keys(), required});
    const std::string admin_key_file = absl::StrCat(data_dir, "/admin-key");
    MAITRE_ASSIGN_OR_RETURN(bool made, keys_->EnsureAdminKey(admin_key_file));
    if (made) spdlog::info("auth: the first admin key is in {} (mode 0600)", admin_key_file);
    spdlog::info("auth: clients {} an API key", required ? "need" : "do not need");
    access_ = std::make_unique<HttpAccess>(
        keys_.get(), [this](const http::PathParams& params) -> std::optional<std::string> {
          auto version = params.find("version");
          ModelRef ref = ParseModelRef(params.find("model")->second,
                                       version == params.end() ? "" : version->second);
          const CatalogModel* model = catalog_.Get()->FindModel(ref.model);
          if (model != nullptr) return model->app;
          // /v2/models/{name}/infer reaches a pipeline by name too.
          if (auto pipeline = pipelines_ ? pipelines_->Find(ref.model) : nullptr) {
            return pipeline->app;
          }
          return std::nullopt;
        });
    return absl::OkStatus();
  }

  // The live cluster, and the catalog read from the registry; every catalog
  // change rebuilds the selection index (off the data path).
  absl::Status LoadCatalog(const ServeOptions& options, const WorkerTypeTable& types) {
    Cluster::Options cluster_options;
    cluster_options.types = types;
    const std::string router =
        options.router.empty() ? control::DefaultRouterFor(options.allocator) : options.router;
    MAITRE_ASSIGN_OR_RETURN(
        cluster_options.router,
        control::CreateQueryRouter(router, control::SelectionOptionsFor(options.allocator)));
    // Workers connect after start-up, once metrics_ is set.
    cluster_options.connect = [this](const std::string& address, const std::string& token) {
      return NewGrpcWorkerApi(address, token,
                              [this](int queries) { metrics_->RecordWorkerCall(queries); });
    };
    cluster_ = std::make_unique<Cluster>(cluster_options);
    catalog_.OnReload([this, types](const std::shared_ptr<const CatalogSnapshot>& snapshot) {
      auto previous = cluster_->selection_index();
      auto index = BuildSelectionIndex(*snapshot, types, previous.get());
      if (!index.ok()) {
        spdlog::error("rebuilding the selection index: {}", index.status().message());
        return;
      }
      cluster_->SetSelectionIndex(std::make_shared<const policy::SelectionIndex>(*std::move(index)),
                                  ModelSloMs(*snapshot));
    });
    MAITRE_RETURN_IF_ERROR(catalog_.Reload(*registry_));
    // Pipelines are validated against the catalog, so they are read after it.
    std::vector<std::string> type_names;
    for (const WorkerType& t : types.types()) type_names.push_back(t.name);
    PipelineBook::Options book{&registry_->pipelines(), &catalog_,
                               [] { return absl::ToUnixMillis(absl::Now()); }, type_names};
    // The instances already serving a stage take the batch in force now:
    // an applied plan's, or none once the plan is removed.
    book.plan_changed = [this](std::shared_ptr<const pipeline::AppliedPlan> plan) {
      std::shared_ptr<const CatalogSnapshot> catalog = catalog_.Get();
      for (const pipeline::AppliedStage& stage : plan->stages) {
        const CatalogModel* model = catalog->FindModel(stage.model);
        const CatalogVariant* variant = model ? model->FindVariant(stage.variant) : nullptr;
        if (variant != nullptr && placer_ != nullptr) placer_->Refresh(*variant);
      }
    };
    pipelines_ = std::make_unique<PipelineBook>(std::move(book));
    const int broken = pipelines_->Load();
    spdlog::info("pipelines: {} registered, {} no longer validate",
                 pipelines_->List("").size(), broken);
    return absl::OkStatus();
  }

  // What one query goes through: control work queue, metrics, placer and
  // dispatcher.
  absl::Status BuildServingPath(const ServeOptions& options, const WorkerCounts& worker_counts,
                                std::optional<BurstPool::Options> burst) {
    // Two control threads: a long validation must not hold up every load.
    control_ = std::make_unique<WorkQueue>(2);
    if (burst.has_value()) {
      burst->control = control_.get();
      burst->cost = cost_.get();
      burst->connect = [this](const std::string& address, const std::string& token) {
        return NewGrpcWorkerApi(address, token,
                                [this](int queries) { metrics_->RecordWorkerCall(queries); });
      };
      burst_pool_ = std::make_unique<BurstPool>(*std::move(burst));
    }
    shedder_ = std::make_unique<BacklogShedder>(
        BacklogShedder::Options{.target = FromMillis(options.shed_target_ms)});
    MAITRE_ASSIGN_OR_RETURN(metrics_, ServingMetrics::Create(&metric_set_, cluster_.get(),
                                                             burst_pool_.get(), shedder_.get()));
    if (cost_ != nullptr) {
      MAITRE_ASSIGN_OR_RETURN(cost_metrics_,
                              CostMetrics::Create(&metric_set_, cost_.get(), &app_usage_));
    }
    Placer::Options placer{cluster_.get(), control_.get()};
    placer.planned_batch = [this](const VariantKey& key) {
      return pipelines_ != nullptr ? pipelines_->PlannedBatch(key) : 0;
    };
    placer_ = std::make_unique<Placer>(std::move(placer));
    Dispatcher::Options dispatcher_options;
    dispatcher_options.catalog = &catalog_;
    dispatcher_options.cluster = cluster_.get();
    dispatcher_options.placer = placer_.get();
    dispatcher_options.metrics = metrics_.get();
    dispatcher_options.refused = &refused_;
    dispatcher_options.service_level = &service_level_;
    dispatcher_options.default_timeout = FromSeconds(options.default_timeout_s);
    dispatcher_options.serving_allowance = FromMillis(options.serving_allowance_ms);
    dispatcher_options.burst_pool = burst_pool_.get();
    // Counted only where there is a cost to split (local workers).
    if (cost_ != nullptr) dispatcher_options.app_usage = &app_usage_;
    // The local provider replaces a lost worker: queries wait for it.
    for (const auto& [type, count] : worker_counts) dispatcher_options.min_workers += count;
    dispatcher_ = std::make_unique<Dispatcher>(dispatcher_options);
    in_flight_ = std::make_unique<InFlightLimit>(
        options.max_in_flight > 0 ? options.max_in_flight : InFlightLimit::DefaultLimit());
    spdlog::info("at most {} queries in flight (--max-in-flight)", in_flight_->limit());
    return absl::OkStatus();
  }

  // The offline job runner, the variant pipeline and the registrar; none of
  // them starts work yet.
  absl::Status BuildModelLifecycleAndJobs(const ServeOptions& options,
                                          const std::string& data_dir) {
    // Offline jobs run through the dispatcher like online queries, and
    // yield to online load seen in the cluster's live view.
    jobs::JobRunner::Options jobs_options;
    jobs_options.store = &registry_->jobs();
    jobs_options.catalog = &catalog_;
    jobs_options.jobs_dir = options.jobs_dir.empty() ? data_dir + "/jobs" : options.jobs_dir;
    jobs_options.infer = [this](InferTarget target, InferRequest request, Nanos received,
                                InferDone done) {
      dispatcher_->Infer(std::move(target), std::move(request), received, std::move(done));
    };
    jobs_options.cluster = [this] { return cluster_->Snapshot(); };
    MAITRE_ASSIGN_OR_RETURN(jobs_, jobs::JobRunner::Create(std::move(jobs_options)));
    VariantPipeline::Options pipeline_options;
    pipeline_options.registry = registry_.get();
    pipeline_options.blobs = blobs_.get();
    pipeline_options.catalog = &catalog_;
    pipeline_options.cluster = cluster_.get();
    pipeline_options.generators = PythonGenerators(absl::StrCat(data_dir, "/generator"),
                                                   sandbox_mode_, options.sandbox_user);
    pipeline_options.measurement_mu = &measurement_mu_;
    pipeline_options.profiling.sweeps = SweepRule::ForMinimum(options.profile_sweeps);
    pipeline_options.profiling.sweeps.settle_within = FromSeconds(options.profile_settle_s);
    pipeline_options.profiling.sweep_spacing = FromSeconds(options.profile_sweep_spacing_s);
    pipeline_ = std::make_unique<VariantPipeline>(pipeline_options);
    Registrar::Options registrar_options;
    registrar_options.registry = registry_.get();
    registrar_options.blobs = blobs_.get();
    registrar_options.catalog = &catalog_;
    registrar_options.cluster = cluster_.get();
    registrar_options.on_registered = [this] { pipeline_->Kick(); };
    registrar_options.measurement_mu = &measurement_mu_;
    registrar_options.is_pipeline = [this](const std::string& name) {
      return pipelines_ != nullptr && pipelines_->Find(name) != nullptr;
    };
    registrar_ = std::make_unique<Registrar>(registrar_options);
    ModelRemover::Options remover_options;
    remover_options.registry = registry_.get();
    remover_options.blobs = blobs_.get();
    remover_options.catalog = &catalog_;
    remover_options.cluster = cluster_.get();
    remover_options.placer = placer_.get();
    remover_options.registrar = registrar_.get();
    remover_options.pipelines_using = [this](const std::string& app, const std::string& model) {
      return pipelines_ != nullptr ? pipelines_->PipelinesUsing(app, model)
                                   : std::vector<std::string>{};
    };
    remover_options.live_jobs = [this](const std::string& app, const std::string& model) {
      std::vector<std::string> ids;
      for (const jobs::JobStatus& job : jobs_->List()) {
        if (jobs::IsTerminal(job.state) || job.record.app != app) continue;
        // A model-less job may pick any model of its app.
        if (model.empty() || job.record.model.empty() || job.record.model == model) {
          ids.push_back(job.record.id);
        }
      }
      return ids;
    };
    remover_options.cancel_job = [this](const std::string& id) {
      return jobs_->Cancel(id).status();
    };
    remover_ = std::make_unique<ModelRemover>(std::move(remover_options));
    return absl::OkStatus();
  }

  // gRPC for clients: the inference service. Returns the host part of the
  // listen address (the port is grpc_port_).
  absl::StatusOr<std::string> StartGrpc(const ServeOptions& options) {
    GrpcFrontend::Options grpc_frontend;
    grpc_frontend.catalog = &catalog_;
    grpc_frontend.cluster = cluster_.get();
    grpc_frontend.dispatcher = dispatcher_.get();
    grpc_frontend.metrics = metrics_.get();
    grpc_frontend.keys = keys_.get();
    grpc_frontend.in_flight = in_flight_.get();
    grpc_frontend.pipelines = pipelines_.get();
    grpc_frontend.version = kVersion;
    grpc_frontend_ = std::make_unique<GrpcFrontend>(grpc_frontend);
    grpc::ServerBuilder builder;
    builder.AddListeningPort(options.grpc, grpc::InsecureServerCredentials(), &grpc_port_);
    builder.SetMaxReceiveMessageSize(static_cast<int>(options.max_body_bytes));
    builder.SetMaxSendMessageSize(-1);
    builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, options.grpc_max_streams);
    grpc::ResourceQuota quota("maitre-clients");
    quota.Resize(static_cast<size_t>(options.grpc_memory_mb) << 20);
    builder.SetResourceQuota(quota);
    builder.RegisterService(grpc_frontend_.get());
    grpc_server_ = builder.BuildAndStart();
    if (grpc_server_ == nullptr || grpc_port_ == 0) {
      return absl::UnavailableError(absl::StrCat("cannot listen for gRPC on ", options.grpc));
    }
    return options.grpc.substr(0, options.grpc.rfind(':'));
  }

  // gRPC for workers: joining, reports and model files, on a server of its
  // own, so that client traffic can neither reach it through the public
  // port nor starve its threads (docs/operations.md, "Security"). Returns
  // the host part of the listen address (the port is control_port_).
  absl::StatusOr<std::string> StartControl(const ServeOptions& options) {
    MembershipService::Options membership_options;
    membership_options.cluster = cluster_.get();
    if (burst_pool_ != nullptr) membership_options.burst_cluster = &burst_pool_->cluster();
    membership_options.blobs = blobs_.get();
    membership_options.report_interval = kReportInterval;
    membership_options.batching_policy = options.batching;
    membership_options.join_token = join_token_;
    membership_options.on_join = [this](const std::string& id, const std::string& token) {
      if (provider_ != nullptr && !token.empty()) provider_->OnJoin(id, token);
      pipeline_->Kick();  // a new worker type may unblock profiling
    };
    membership_service_ = std::make_unique<MembershipService>(membership_options);
    grpc::ServerBuilder builder;
    builder.AddListeningPort(options.control, grpc::InsecureServerCredentials(), &control_port_);
    builder.SetMaxSendMessageSize(-1);
    builder.RegisterService(membership_service_.get());
    control_server_ = builder.BuildAndStart();
    if (control_server_ == nullptr || control_port_ == 0) {
      return absl::UnavailableError(
          absl::StrCat("cannot listen for workers on ", options.control));
    }
    return options.control.substr(0, options.control.rfind(':'));
  }

  // HTTP: the inference, management and job routes.
  absl::Status StartHttp(const ServeOptions& options) {
    http::Router router;
    FrontendOptions frontend;
    frontend.catalog = &catalog_;
    frontend.cluster = cluster_.get();
    frontend.dispatcher = dispatcher_.get();
    frontend.registrar = registrar_.get();
    frontend.remover = remover_.get();
    frontend.control = control_.get();
    frontend.metrics = metrics_.get();
    frontend.access = access_.get();
    frontend.keys = keys_.get();
    frontend.in_flight = in_flight_.get();
    frontend.shedder = shedder_.get();
    frontend.pipelines = pipelines_.get();
    frontend.version = kVersion;
    AddHttpRoutes(frontend, router);
    jobs::AddJobRoutes(router, jobs_.get(), *access_);
    AddKeyRoutes(router, keys_.get(), *access_);
    ClusterRoutesOptions cluster_routes{provider_.get(), cost_.get()};
    cluster_routes.history = &registry_->costs();
    cluster_routes.burst_pool = burst_pool_.get();
    if (cost_ != nullptr) cluster_routes.app_usage = &app_usage_;
    cluster_routes.run_started_unix_ms = run_started_unix_ms_;
    AddClusterRoutes(router, cluster_routes, *access_);
    http::ServerOptions http_options;
    http_options.address = options.http;
    http_options.threads = options.http_threads;
    http_options.max_body_bytes = options.max_body_bytes;
    http_options.max_connections = options.max_connections;
    http_options.header_timeout = FromSeconds(options.header_timeout_s);
    http_options.idle_timeout = FromSeconds(options.idle_timeout_s);
    MAITRE_ASSIGN_OR_RETURN(http_server_, http::Server::Create(http_options, std::move(router)));
    if (http_server_->max_connections() < options.max_connections) {
      spdlog::warn(
          "HTTP: at most {} open connections, half the descriptor limit (--max-connections "
          "asked for {}; raise the limit with ulimit -n)",
          http_server_->max_connections(), options.max_connections);
    }
    http_server_->Start();
    return absl::OkStatus();
  }

  // The local provider, keeping `worker_counts` worker processes running;
  // they join over gRPC at `control_host`:control_port_.
  absl::Status StartLocalWorkers(const ServeOptions& options, const WorkerTypeTable& types,
                                 const WorkerCounts& worker_counts, const std::string& data_dir,
                                 const std::string& control_host) {
    LocalProvider::Options provider_options;
    MAITRE_RETURN_IF_ERROR(ParseInjection(options.inject_interruption, &provider_options));
    provider_options.binary = options.binary.empty() ? SelfExecutable() : options.binary;
    // Workers reach the controller on loopback when it listens everywhere.
    provider_options.controller =
        absl::StrCat(control_host == "0.0.0.0" ? "127.0.0.1" : control_host, ":", control_port_);
    provider_options.log_dir = absl::StrCat(data_dir, "/logs");
    provider_options.cache_dir = absl::StrCat(data_dir, "/worker-cache");
    provider_options.sandbox = options.sandbox;
    provider_options.sandbox_user = options.sandbox_user;
    provider_options.join_token = join_token_;
    provider_ = std::make_unique<LocalProvider>(provider_options);
    provider_->OnEvent([this](const WorkerEvent& e) {
      cost_->Record(e);
      const bool ended = e.kind == WorkerEvent::Kind::kLost || e.kind == WorkerEvent::Kind::kRetired;
      if (ended && !e.worker_id.empty()) {
        cluster_->RemoveWorker(e.worker_id, "its process ended");
        if (burst_pool_ != nullptr) {
          burst_pool_->cluster().RemoveWorker(e.worker_id, "its process ended");
        }
      }
      // Nothing new goes to a worker that is leaving; what it holds is
      // answered before it stops, and its replacement is on its way.
      if (e.kind == WorkerEvent::Kind::kInterrupted) {
        cluster_->BeginLeaving(e.worker_id, e.stops_at);
      }
    });
    for (const auto& [type, count] : worker_counts) {
      provider_->SetDesired(*types.Find(type), count);
    }
    // A worker the cluster gave up on (silent) is killed so it is replaced.
    cluster_->OnWorkerRemoved([this](const WorkerView& w) { provider_->Kill(w.id); });
    if (burst_pool_ != nullptr) {
      burst_pool_->cluster().OnWorkerRemoved(
          [this](const WorkerView& w) { provider_->Kill(w.id); });
      burst_pool_->Start(provider_.get());  // its warm workers
    }
    provider_->Start();
    return absl::OkStatus();
  }

  // --inject-interruption AFTER_S[:LEAD_S].
  static absl::Status ParseInjection(const std::string& spec, LocalProvider::Options* options) {
    if (spec.empty()) return absl::OkStatus();
    std::vector<std::string> f = absl::StrSplit(spec, ':');
    double after_s = 0, lead_s = ToSeconds(options->inject_lead);
    if (f.size() > 2 || !absl::SimpleAtod(f[0], &after_s) || !(after_s >= 0) ||
        (f.size() == 2 && (!absl::SimpleAtod(f[1], &lead_s) || !(lead_s >= 0)))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--inject-interruption takes AFTER_S[:LEAD_S], seconds from 0 up, not \"", spec, "\""));
    }
    options->inject_after = FromSeconds(after_s);
    options->inject_lead = FromSeconds(lead_s);
    return absl::OkStatus();
  }

  // The model and cluster autoscalers. The cluster keeps at least the
  // --workers counts, and at most --max-workers or, without it, what this
  // machine's free cores allow.
  absl::Status StartScalingLoop(const ServeOptions& options, const WorkerTypeTable& types,
                                const WorkerCounts& worker_counts) {
    ScalingLoop::Options scaling;
    scaling.catalog = &catalog_;
    scaling.cluster = cluster_.get();
    scaling.placer = placer_.get();
    scaling.provider = provider_.get();
    scaling.metrics = metrics_.get();
    scaling.refused = &refused_;
    scaling.service_level = &service_level_;
    scaling.pipelines = pipelines_.get();
    scaling.allocator = options.allocator;
    control::AllocatorOptions& allocator = scaling.allocator_options;
    MAITRE_ASSIGN_OR_RETURN(allocator.model_scaling,
                            control::ParseModelScaling(options.model_autoscaler));
    allocator.cluster_scaling = options.cluster_autoscaler;
    allocator.migrate_interfered = options.migrate_interfered;
    allocator.mark = MarkOf(options);
    allocator.cluster.min_workers = 1;
    for (const auto& [type, n] : worker_counts) allocator.min_workers[type] = n;
    if (!options.max_workers.empty()) {
      MAITRE_ASSIGN_OR_RETURN(auto max_workers, ParseWorkerCounts(options.max_workers, types));
      for (const auto& [type, n] : max_workers) allocator.max_workers[type] = n;
    } else {
      int free_cores = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
      for (const auto& [type, n] : worker_counts) free_cores -= n * types.Find(type)->cores;
      for (const WorkerType& t : types.types()) {
        allocator.max_workers[t.name] =
            allocator.min_workers[t.name] + std::max(0, free_cores) / t.cores;
      }
    }
    MAITRE_ASSIGN_OR_RETURN(scaling_, ScalingLoop::Create(scaling));
    scaling_->Start();
    return absl::OkStatus();
  }

  // Drops workers that stopped reporting, once per report interval, and
  // saves what the workers cost once a minute.
  void StartMaintenance() {
    maintenance_ = std::thread([this] {
      const Clock* clock = SteadyClock::Get();
      Nanos next_save = clock->Now() + kCostSaveInterval;
      while (!clock->SleepUntil(clock->Now() + kReportInterval, &stopping_)) {
        cluster_->RemoveSilentWorkers();
        if (burst_pool_ != nullptr) {
          burst_pool_->Maintain();
          PrewarmBurstPool();
        }
        if (clock->Now() >= next_save) {
          SaveCost();
          next_save = clock->Now() + kCostSaveInterval;
        }
      }
    });
  }

  // The burst pool holds what the provisioned cluster serves now, so that a
  // step's overflow does not wait for its load (BurstPool::Prewarm).
  void PrewarmBurstPool() {
    std::shared_ptr<const CatalogSnapshot> catalog = catalog_.Get();
    std::vector<const CatalogVariant*> served;
    for (const WorkerView& w : cluster_->Snapshot()) {
      for (const InstanceView& inst : w.instances) {
        if (inst.phase != InstancePhase::kReady) continue;
        const CatalogModel* model = catalog->FindModel(inst.key.model);
        const CatalogVariant* variant = model ? model->FindVariant(inst.key.variant) : nullptr;
        if (variant != nullptr &&
            std::find(served.begin(), served.end(), variant) == served.end()) {
          served.push_back(variant);
        }
      }
    }
    burst_pool_->Prewarm(served);
  }

  // Saves this run's cost by worker type (registry/cost_store.h), so that
  // GET /v2/cluster/cost after a restart counts it; a crash loses at most
  // the last minute's.
  void SaveCost() {
    if (cost_ == nullptr) return;
    const CostReport report = cost_->At(SteadyClock::Get()->Now());
    std::vector<registry::CostRunLine> lines;
    for (const CostLine& l : report.lines) {
      lines.push_back({l.type, l.market, l.cost, l.running + l.ended});
    }
    if (absl::Status saved = registry_->costs().SaveRun(run_started_unix_ms_, lines);
        !saved.ok()) {
      spdlog::warn("saving what the workers cost: {}", saved.ToString());
    }
  }

  // endpoints.json in the data dir tells clients and tests where this
  // controller listens.
  absl::Status WriteEndpoints(const ServeOptions& options, const std::string& data_dir,
                              const std::string& grpc_address,
                              const std::string& control_address) {
    nlohmann::json endpoints{{"http", absl::StrCat("http://", options.http.substr(
                                                                  0, options.http.rfind(':')),
                                                   ":", http_server_->port())},
                             {"grpc", grpc_address},
                             {"control", control_address},
                             {"pid", getpid()}};
    MAITRE_RETURN_IF_ERROR(
        WriteFileAtomically(absl::StrCat(data_dir, "/endpoints.json"), endpoints.dump()));
    spdlog::info("maitre serving: HTTP {} gRPC {} workers {} data {}",
                 endpoints["http"].get<std::string>(), grpc_address, control_address, data_dir);
    return absl::OkStatus();
  }

  std::unique_ptr<registry::Registry> registry_;
  // This run's name in the cost history (registry/cost_store.h).
  const int64_t run_started_unix_ms_ = absl::ToUnixMillis(absl::Now());
  std::unique_ptr<registry::BlobStore> blobs_;
  Catalog catalog_;
  std::unique_ptr<PipelineBook> pipelines_;  // read after the catalog
  std::unique_ptr<KeyRing> keys_;  // before the front-ends: they check keys with it
  std::unique_ptr<HttpAccess> access_;
  std::unique_ptr<Cluster> cluster_;
  std::unique_ptr<WorkQueue> control_;
  std::unique_ptr<CostMeter> cost_;  // with local workers
  std::unique_ptr<BurstPool> burst_pool_;  // --burst-pool
  AppUsage app_usage_;  // what each app used, to split cost_ among apps
  metrics::MetricSet metric_set_;
  std::unique_ptr<ServingMetrics> metrics_;
  std::unique_ptr<CostMetrics> cost_metrics_;  // with cost_
  RefusedDemand refused_;  // dispatcher counts, scaling loop takes
  ServiceLevel service_level_;  // the same
  std::unique_ptr<Placer> placer_;
  std::unique_ptr<Dispatcher> dispatcher_;
  std::unique_ptr<InFlightLimit> in_flight_;  // shared by both front-ends
  std::unique_ptr<BacklogShedder> shedder_;  // the HTTP front-end's
  std::unique_ptr<jobs::JobRunner> jobs_;  // before http_server_: its routes use it
  absl::Mutex measurement_mu_;  // one measurement on the workers at a time
  std::unique_ptr<VariantPipeline> pipeline_;
  std::unique_ptr<Registrar> registrar_;
  std::unique_ptr<ModelRemover> remover_;
  std::unique_ptr<MembershipService> membership_service_;
  std::unique_ptr<GrpcFrontend> grpc_frontend_;
  std::unique_ptr<grpc::Server> grpc_server_;
  std::unique_ptr<grpc::Server> control_server_;
  SandboxMode sandbox_mode_ = SandboxMode::kBestEffort;
  std::string join_token_;
  int grpc_port_ = 0;
  int control_port_ = 0;
  std::unique_ptr<http::Server> http_server_;
  std::unique_ptr<LocalProvider> provider_;
  std::unique_ptr<ScalingLoop> scaling_;
  StopSignal stopping_;
  std::thread maintenance_;
};

ControllerHandle::ControllerHandle(std::unique_ptr<Controller> controller)
    : controller_(std::move(controller)) {}
ControllerHandle::~ControllerHandle() = default;
int ControllerHandle::http_port() const { return controller_->http_port(); }
int ControllerHandle::grpc_port() const { return controller_->grpc_port(); }
void ControllerHandle::BeginDrain() { controller_->BeginDrain(); }
int ControllerHandle::Unanswered() const { return controller_->Unanswered(); }

absl::StatusOr<std::unique_ptr<ControllerHandle>> StartController(const ServeOptions& options) {
  auto controller = std::make_unique<Controller>();
  MAITRE_RETURN_IF_ERROR(controller->Start(options));
  return std::make_unique<ControllerHandle>(std::move(controller));
}

}  // namespace maitre::controller
