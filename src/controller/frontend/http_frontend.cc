#include "controller/frontend/http_frontend.h"

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <optional>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "controller/frontend/http_query.h"
#include "controller/frontend/infer_codec.h"
#include "controller/frontend/model_views.h"
#include "controller/frontend/pipeline_routes.h"
#include "controller/frontend/status_http.h"
#include "controller/frontend/variant_views.h"
#include "http/multipart.h"

namespace maitre::controller {
namespace {

using nlohmann::json;

json SpecJson(const TensorSpec& spec) {
  return {{"name", spec.name},
          {"datatype", std::string(DataTypeName(spec.dtype))},
          {"shape", spec.shape}};
}

// An app's "defaults": what PUT /v2/apps/{app} sets, in the same flat shape
// (unset fields are left out), so a client can send back what it read.
json AppDefaultsJson(const Requirements& r, std::optional<double> max_accuracy_drop,
                     std::optional<double> sl_min) {
  json j = json::object();
  if (r.latency_ms) j["latency_ms"] = *r.latency_ms;
  if (r.min_accuracy) j["min_accuracy"] = *r.min_accuracy;
  if (r.max_cost) j["max_cost"] = *r.max_cost;
  if (max_accuracy_drop) j["max_accuracy_drop"] = *max_accuracy_drop;
  if (sl_min) j["sl_min"] = *sl_min;
  return j;
}

// How many things went with a deleted app. A failure is logged, not
// answered: the app itself is gone by then.
int CountOrLog(const absl::StatusOr<int>& forgotten, const char* doing, const std::string& app) {
  if (forgotten.ok()) return *forgotten;
  spdlog::error("{} of deleted app {}: {}", doing, app, forgotten.status().ToString());
  return 0;
}

// "model" or "model:variant" as the {model} path segment, plus an optional
// /versions/{version} which also names a variant.
ModelRef RefOf(const http::PathParams& params) {
  auto version = params.find("version");
  return ParseModelRef(params.find("model")->second,
                       version == params.end() ? "" : version->second);
}

InferTarget TargetOf(const http::PathParams& params) {
  ModelRef ref = RefOf(params);
  return InferTarget{"", ref.model, ref.variant};
}

json RegistrationJson(const Registration& r) {
  json j{{"app", r.app}, {"model", r.model}, {"unchanged", r.unchanged}, {"variants", json::array()}};
  for (const RegisteredVariant& v : r.variants) {
    j["variants"].push_back({{"variant", v.variant},
                             {"runtime", v.runtime},
                             {"accuracy", v.accuracy},
                             {"accuracy_source", v.accuracy_source},
                             {"state", v.state}});
  }
  return j;
}

class Frontend {
 public:
  explicit Frontend(const FrontendOptions& options) : o_(options) {}

  void Live(http::Responder respond) {
    std::move(respond)(http::Response::Json(200, R"({"live":true})"));
  }

  void Ready(http::Responder respond) {
    if (o_.cluster->worker_count() == 0) {
      std::move(respond)(http::Response::Json(
          503, R"({"ready":false,"error":"no worker has joined the controller yet"})"));
      return;
    }
    std::move(respond)(http::Response::Json(200, R"({"ready":true})"));
  }

  void ServerMetadata(http::Responder respond) {
    json j{{"name", "maitre"},
           {"version", o_.version},
           {"extensions",
            {"binary_tensor_data", "model_less_apps", "variants", "registration",
             "repository_index", "offline_jobs"}}};
    std::move(respond)(http::Response::Json(200, j.dump()));
  }

  void ModelMetadata(const http::PathParams& params, http::Responder respond) {
    auto m = DescribeModel(*o_.catalog->Get(), RefOf(params));
    if (!m.ok()) {
      std::move(respond)(ErrorResponse(m.status()));
      return;
    }
    json j{{"name", m->name},
           {"versions", m->versions},
           {"platform", m->platform},
           {"inputs", json::array()},
           {"outputs", json::array()}};
    for (const TensorSpec& t : m->inputs) j["inputs"].push_back(SpecJson(t));
    for (const TensorSpec& t : m->outputs) j["outputs"].push_back(SpecJson(t));
    std::move(respond)(http::Response::Json(200, j.dump()));
  }

  void ModelReady(const http::PathParams& params, http::Responder respond) {
    ModelRef ref = RefOf(params);
    auto readiness = ModelReadiness(*o_.catalog->Get(), *o_.cluster, ref);
    if (!readiness.ok()) {
      std::move(respond)(ErrorResponse(readiness.status()));
      return;
    }
    json j{{"name", ref.model}, {"ready", readiness->ready}};
    if (!readiness->ready) j["error"] = readiness->reason;
    std::move(respond)(http::Response::Json(readiness->ready ? 200 : 503, j.dump()));
  }

  void Infer(http::Request&& request, InferTarget target, http::Responder respond) {
    auto query = AcceptHttpQuery(request, o_.shedder, o_.in_flight, o_.metrics, o_.clock, respond);
    if (!query) return;
    // The dispatcher consumes the request; how to encode the answer is kept.
    std::vector<RequestedOutput> requested = query->request.outputs;
    bool all_binary = query->request.binary_outputs;
    o_.dispatcher->Infer(
        std::move(target), std::move(query->request), query->received,
        [respond = std::move(respond), requested = std::move(requested), all_binary,
         permit = std::move(query->permit)](absl::StatusOr<InferResponse> result) mutable {
          // The answer is the query's last use of the memory the permit
          // stands for (the request is gone, the response handed over).
          if (!result.ok()) {
            std::move(respond)(ErrorResponse(result.status()));
            permit.Release();
            return;
          }
          std::move(respond)(
              InferHttpResponse(WriteInferResponse(*result, requested, all_binary)));
          permit.Release();
        });
  }

  void Register(http::Request&& request, const http::PathParams& params,
                http::Responder respond) {
    absl::string_view content_type = request.GetHeader("Content-Type");
    if (!absl::StartsWithIgnoreCase(content_type, "multipart/form-data")) {
      std::move(respond)(http::Response::Error(
          400, "registration takes multipart/form-data with parts 'model' (the file), 'meta' "
               "(JSON) and optionally 'valset' (.npz) and 'onnx'"));
      return;
    }
    auto parts = http::ParseMultipart(content_type, request.body);
    if (!parts.ok()) {
      std::move(respond)(ErrorResponse(parts.status()));
      return;
    }
    Upload upload;
    upload.app = params.find("app")->second;
    upload.model = params.find("model")->second;
    for (http::Part& part : *parts) {
      if (part.name == "model") upload.model_bytes = std::move(part.data);
      else if (part.name == "meta") upload.meta_json = std::move(part.data);
      else if (part.name == "valset") upload.valset_bytes = std::move(part.data);
      else if (part.name == "onnx") upload.onnx_bytes = std::move(part.data);
    }
    // Registration takes seconds (validation runs on a worker): it must not
    // hold an I/O thread, so it runs on the control queue. With ?wait=false
    // the answer is 202 at once and progress is at .../registration.
    bool wait = request.QueryParam("wait") != "false";
    std::string progress_url =
        absl::StrCat("/v2/apps/", upload.app, "/models/", upload.model, "/registration");
    auto shared_respond = std::make_shared<http::Responder>(std::move(respond));
    if (!wait) {
      o_.registrar->Queued(upload);  // before the 202: the client asks for progress next
      std::move (*shared_respond)(http::Response::Json(
          202, json{{"app", upload.app}, {"model", upload.model}, {"progress", progress_url}}
                   .dump()));
    }
    o_.control->Post([this, upload = std::move(upload), shared_respond, wait] {
      auto result = o_.registrar->Register(upload);
      if (!wait) return;
      if (!result.ok()) {
        std::move (*shared_respond)(ErrorResponse(result.status()));
        return;
      }
      std::move (*shared_respond)(
          http::Response::Json(result->unchanged ? 200 : 201, RegistrationJson(*result).dump()));
    });
  }

  // DELETE /v2/apps/{app}[/models/{model}][?force=true]. On the control
  // queue: it writes the registry and deletes files. A conflict (a
  // registration under way, live jobs) is 409.
  void Delete(const http::Request& request, const http::PathParams& params,
              http::Responder respond) {
    std::string app = params.find("app")->second;
    auto model = params.find("model");
    std::string name = model == params.end() ? "" : model->second;
    const std::string force = std::string(request.QueryParam("force"));
    if (!force.empty() && force != "true" && force != "false") {
      std::move(respond)(http::Response::Error(400, "force must be true or false"));
      return;
    }
    auto shared_respond = std::make_shared<http::Responder>(std::move(respond));
    o_.control->Post([this, app, name, force = force == "true", shared_respond] {
      absl::StatusOr<Removal> removal = name.empty() ? o_.remover->DeleteApp(app, force)
                                                     : o_.remover->DeleteModel(app, name, force);
      if (!removal.ok()) {
        const absl::Status& s = removal.status();
        std::move (*shared_respond)(http::Response::Error(
            absl::IsFailedPrecondition(s) ? 409 : HttpStatusFor(s), s.message()));
        return;
      }
      // A deleted app's keys go with it: whoever registers the name next
      // is not reached by them; and so do its pipelines.
      int keys_revoked = 0, pipelines_deleted = 0;
      if (removal->app_removed && o_.keys != nullptr) {
        keys_revoked = CountOrLog(o_.keys->ForgetApp(app), "revoking the keys", app);
      }
      if (removal->app_removed && o_.pipelines != nullptr) {
        pipelines_deleted =
            CountOrLog(o_.pipelines->DeleteApp(app), "deleting the pipelines", app);
      }
      json j{{"app", removal->app},         {"app_deleted", removal->app_removed},
             {"models", removal->models},   {"variants", removal->variants},
             {"unloading", removal->unloaded}, {"cancelled_jobs", removal->cancelled_jobs},
             {"blobs_removed", removal->blobs_removed}, {"bytes_freed", removal->bytes_freed},
             {"keys_revoked", keys_revoked}, {"pipelines_deleted", pipelines_deleted}};
      std::move (*shared_respond)(http::Response::Json(200, j.dump()));
    });
  }

  void SetAppDefaults(http::Request&& request, const http::PathParams& params,
                      http::Responder respond) {
    auto defaults = o_.registrar->SetAppDefaults(params.find("app")->second, request.body);
    if (!defaults.ok()) {
      std::move(respond)(ErrorResponse(defaults.status()));
      return;
    }
    const json stored =
        AppDefaultsJson(defaults->defaults, defaults->max_accuracy_drop, defaults->sl_min);
    std::move(respond)(
        http::Response::Json(200, json{{"name", defaults->name}, {"defaults", stored}}.dump()));
  }

  void RegistrationStatus(const http::PathParams& params, http::Responder respond) {
    auto progress =
        o_.registrar->Progress(params.find("app")->second, params.find("model")->second);
    if (!progress.ok()) {
      std::move(respond)(ErrorResponse(progress.status()));
      return;
    }
    json j{{"step", progress->step},
           {"steps", progress->steps},
           {"phase", progress->phase},
           {"done", progress->done}};
    if (progress->done && !progress->error.ok()) {
      j["error"] = std::string(progress->error.message());
      j["status"] = HttpStatusFor(progress->error);
    }
    std::move(respond)(http::Response::Json(200, j.dump()));
  }

  // GET /v2/profiles?app=A: the profile CSV; POST /v2/profiles imports one.
  void ExportProfiles(const http::Request& request, const Principal& caller,
                      http::Responder respond) {
    const std::string app = request.QueryParam("app");
    absl::Status allowed = app.empty() ? CheckAdminAccess(caller, "every app's profiles")
                                       : CheckAppAccess(caller, app);
    if (!allowed.ok()) {
      std::move(respond)(AccessRefusal(allowed));
      return;
    }
    http::Response response = http::Response::Text(200, VariantProfileCsv(*o_.catalog->Get(), app));
    response.content_type = "text/csv";
    std::move(respond)(std::move(response));
  }

  void ImportProfiles(http::Request&& request, http::Responder respond) {
    auto shared_respond = std::make_shared<http::Responder>(std::move(respond));
    o_.control->Post([this, body = std::move(request.body), shared_respond] {
      auto imported = o_.registrar->ImportProfiles(body);
      if (!imported.ok()) {
        std::move (*shared_respond)(ErrorResponse(imported.status()));
        return;
      }
      std::move (*shared_respond)(
          http::Response::Json(200, json{{"imported", *imported}}.dump()));
    });
  }

  void Metrics(http::Responder respond) {
    http::Response response = http::Response::Text(200, o_.metrics->metric_set().Render());
    response.content_type = metrics::MetricSet::kContentType;
    std::move(respond)(std::move(response));
  }

  void ListApps(const Principal& caller, http::Responder respond) {
    auto catalog = o_.catalog->Get();
    json apps = json::array();
    for (const auto& [name, app] : catalog->apps) {
      if (!CheckAppAccess(caller, name).ok()) continue;
      apps.push_back(
          {{"name", name},
           {"defaults", AppDefaultsJson(app.defaults, app.max_accuracy_drop, app.sl_min)},
           {"models", app.models}});
    }
    std::move(respond)(http::Response::Json(200, json{{"apps", apps}}.dump()));
  }

  void GetApp(const http::Request& request, const http::PathParams& params,
              http::Responder respond) {
    auto catalog = o_.catalog->Get();
    const std::string& name = params.find("app")->second;
    const CatalogApp* app = catalog->FindApp(name);
    if (app == nullptr) {
      std::move(respond)(http::Response::Error(
          404, absl::StrCat("no app named '", name, "'; GET /v2/apps lists them")));
      return;
    }
    // The people's view: one row per variant and worker type.
    std::string format = request.QueryParam("format");
    if (format == "table") {
      std::move(respond)(
          http::Response::Text(200, VariantTable(*catalog, name, o_.cluster->types())));
      return;
    }
    if (format == "csv") {
      http::Response response = http::Response::Text(200, VariantProfileCsv(*catalog, name));
      response.content_type = "text/csv";
      std::move(respond)(std::move(response));
      return;
    }
    json models = json::array();
    for (const std::string& model_name : app->models) {
      const CatalogModel* model = catalog->FindModel(model_name);
      if (model != nullptr) models.push_back(ModelJson(*model));
    }
    json j{{"name", app->name},
           {"defaults", AppDefaultsJson(app->defaults, app->max_accuracy_drop, app->sl_min)},
           {"models", models}};
    std::move(respond)(http::Response::Json(200, j.dump()));
  }

  // An app key sees its app's models and no workers: those are the
  // operator's business.
  void RepositoryIndex(const Principal& caller, http::Responder respond) {
    auto catalog = o_.catalog->Get();
    std::vector<WorkerView> workers = o_.cluster->Snapshot();
    json models = json::array();
    for (const auto& [name, model] : catalog->models) {
      if (!CheckAppAccess(caller, model.app).ok()) continue;
      for (const CatalogVariant& v : model.variants) {
        models.push_back({{"name", model.name},
                          {"version", v.spec.key.variant},
                          {"app", model.app},
                          {"state", v.ready() ? "READY" : "UNAVAILABLE"},
                          {"reason", v.detail},
                          {"instances", InstancesJson(workers, v.spec.key)}});
      }
    }
    // Instances of variants that were deleted, until their workers have
    // let them go (docs/api.md, "Deleting models and apps").
    std::set<VariantKey> leaving;
    for (const WorkerView& w : workers) {
      if (!caller.admin) break;  // whose they were is gone with the catalog
      for (const InstanceView& inst : w.instances) {
        const CatalogModel* model = catalog->FindModel(inst.key.model);
        if (model == nullptr || model->FindVariant(inst.key.variant) == nullptr) {
          leaving.insert(inst.key);
        }
      }
    }
    for (const VariantKey& key : leaving) {
      models.push_back({{"name", key.model},
                        {"version", key.variant},
                        {"app", ""},
                        {"state", "UNAVAILABLE"},
                        {"reason", "deleted; unloading"},
                        {"instances", InstancesJson(workers, key)}});
    }
    json worker_list = json::array();
    for (const WorkerView& w : workers) {
      if (!caller.admin) break;
      worker_list.push_back({{"id", w.id},
                             {"type", w.type.name},
                             {"address", w.address},
                             {"cpu_utilisation", w.cpu_utilisation},
                             {"memory_mb", w.memory_mb}});
    }
    std::move(respond)(
        http::Response::Json(200, json{{"models", models}, {"workers", worker_list}}.dump()));
  }

 private:
  static json InstancesJson(const std::vector<WorkerView>& workers, const VariantKey& key) {
    json instances = json::array();
    for (const WorkerView& w : workers) {
      for (const InstanceView& inst : w.instances) {
        if (!(inst.key == key)) continue;
        instances.push_back({{"worker", w.id},
                             {"worker_type", w.type.name},
                             {"phase", std::string(InstancePhaseName(inst.phase))},
                             {"state", std::string(policy::InstanceStateName(inst.state))},
                             {"replicas", inst.stats.replicas},
                             {"queue_length", inst.stats.queue_length},
                             {"arrival_qps", inst.stats.arrival_qps},
                             {"served_qps", inst.stats.served_qps},
                             {"latency_p50_ms", inst.stats.latency_p50_ms},
                             {"latency_p99_ms", inst.stats.latency_p99_ms},
                             {"in_flight", inst.outstanding},
                             {"error", inst.error}});
      }
    }
    return instances;
  }

  json ModelJson(const CatalogModel& model) const {
    json variants = json::array();
    for (const CatalogVariant& v : model.variants) {
      json profiles = json::object();
      for (const auto& [type_name, profile] : v.profiles) {
        const WorkerType* type = o_.cluster->types().Find(type_name);
        json points = json::array();
        for (const LatencyPoint& p : profile.points()) {
          points.push_back({{"batch", p.batch}, {"p50_ms", p.p50_ms}, {"p99_ms", p.p99_ms}});
        }
        double best_qps = 0;
        for (const LatencyPoint& p : profile.points()) {
          best_qps = std::max(best_qps, profile.ThroughputAt(p.batch));
        }
        profiles[type_name] = {{"load_ms", profile.load_ms()},
                               {"memory_mb", profile.memory_mb()},
                               {"p50_batch1_ms", profile.LatencyAt(1)},
                               {"max_throughput_qps", best_qps},
                               // In force now: a spot type's follows its trace.
                               {"price_per_hour", type ? type->PriceAt(o_.clock->Now()) : 0.0},
                               {"sweeps_left", v.SweepsLeftOn(type_name)},
                               {"points", points}};
      }
      variants.push_back({{"variant", v.spec.key.variant},
                          {"runtime", std::string(RuntimeName(v.spec.runtime))},
                          {"accuracy", v.accuracy},
                          {"accuracy_source", std::string(AccuracySourceName(v.accuracy_source))},
                          {"state", std::string(registry::VariantStateName(v.state))},
                          {"detail", v.detail},
                          {"profiles", profiles}});
    }
    json inputs = json::array(), outputs = json::array();
    for (const TensorSpec& t : model.spec.inputs) inputs.push_back(SpecJson(t));
    for (const TensorSpec& t : model.spec.outputs) outputs.push_back(SpecJson(t));
    return {{"name", model.name},
            {"format", std::string(ModelFormatName(model.spec.format))},
            {"inputs", inputs},
            {"outputs", outputs},
            {"variants", variants}};
  }

  const FrontendOptions o_;
};

}  // namespace

void AddHttpRoutes(const FrontendOptions& options, http::Router& router) {
  // The router keeps its handlers for the server's lifetime; the frontend
  // is shared by them all.
  auto f = std::make_shared<Frontend>(options);
  const HttpAccess& access = *options.access;
  using http::PathParams;
  using http::Request;
  using http::Responder;
  auto add = [&](const char* method, absl::string_view pattern, Reach reach,
                 GuardedHandler handler) {
    router.Add(method, pattern, access.Guard(reach, std::move(handler)));
  };
  add("GET", "/v2/health/live", Reach::kPublic,
      [f](Request&&, const PathParams&, const Principal&, Responder r) { f->Live(std::move(r)); });
  add("GET", "/v2/health/ready", Reach::kPublic,
      [f](Request&&, const PathParams&, const Principal&, Responder r) { f->Ready(std::move(r)); });
  add("GET", "/v2", Reach::kPublic, [f](Request&&, const PathParams&, const Principal&, Responder r) {
    f->ServerMetadata(std::move(r));
  });
  for (const char* base : {"/v2/models/{model}", "/v2/models/{model}/versions/{version}"}) {
    add("GET", base, Reach::kModel,
        [f, options](Request&&, const PathParams& p, const Principal&, Responder r) {
          if (options.pipelines != nullptr && p.count("version") == 0) {
            if (auto pipeline = options.pipelines->Find(p.find("model")->second)) {
              std::move(r)(PipelineMetadata(*pipeline));
              return;
            }
          }
          f->ModelMetadata(p, std::move(r));
        });
    add("GET", absl::StrCat(base, "/ready"), Reach::kModel,
        [f, options](Request&&, const PathParams& p, const Principal&, Responder r) {
          if (options.pipelines != nullptr && p.count("version") == 0) {
            if (auto pipeline = options.pipelines->Find(p.find("model")->second)) {
              std::move(r)(PipelineReady(options, *pipeline));
              return;
            }
          }
          f->ModelReady(p, std::move(r));
        });
    // The Open Inference Protocol reaches a pipeline by its name as it
    // does a model (a pipeline has no versions).
    add("POST", absl::StrCat(base, "/infer"), Reach::kModel,
        [f, options](Request&& q, const PathParams& p, const Principal&, Responder r) {
          if (options.pipelines != nullptr && p.count("version") == 0) {
            if (auto pipeline = options.pipelines->Find(p.find("model")->second)) {
              ServePipelineQuery(options, std::move(pipeline), std::move(q), std::move(r));
              return;
            }
          }
          f->Infer(std::move(q), TargetOf(p), std::move(r));
        });
  }
  // Model-less: Maitre picks the model, variant and worker.
  add("POST", "/v2/apps/{app}/infer", Reach::kApp,
      [f](Request&& q, const PathParams& p, const Principal&, Responder r) {
        f->Infer(std::move(q), InferTarget{p.find("app")->second, "", ""}, std::move(r));
      });
  add("POST", "/v2/apps/{app}/models/{model}", Reach::kApp,
      [f](Request&& q, const PathParams& p, const Principal&, Responder r) {
        f->Register(std::move(q), p, std::move(r));
      });
  add("GET", "/v2/apps", Reach::kAnyKey,
      [f](Request&&, const PathParams&, const Principal& caller, Responder r) {
        f->ListApps(caller, std::move(r));
      });
  add("GET", "/v2/apps/{app}", Reach::kApp,
      [f](Request&& q, const PathParams& p, const Principal&, Responder r) {
        f->GetApp(q, p, std::move(r));
      });
  add("PUT", "/v2/apps/{app}", Reach::kApp,
      [f](Request&& q, const PathParams& p, const Principal&, Responder r) {
        f->SetAppDefaults(std::move(q), p, std::move(r));
      });
  add("DELETE", "/v2/apps/{app}", Reach::kApp,
      [f](Request&& q, const PathParams& p, const Principal&, Responder r) {
        f->Delete(q, p, std::move(r));
      });
  add("DELETE", "/v2/apps/{app}/models/{model}", Reach::kApp,
      [f](Request&& q, const PathParams& p, const Principal&, Responder r) {
        f->Delete(q, p, std::move(r));
      });
  add("GET", "/v2/apps/{app}/models/{model}/registration", Reach::kApp,
      [f](Request&&, const PathParams& p, const Principal&, Responder r) {
        f->RegistrationStatus(p, std::move(r));
      });
  add("GET", "/v2/profiles", Reach::kAnyKey,
      [f](Request&& q, const PathParams&, const Principal& caller, Responder r) {
        f->ExportProfiles(q, caller, std::move(r));
      });
  // Imported profiles steer every app's selection: the operator's to load.
  add("POST", "/v2/profiles", Reach::kAdmin,
      [f](Request&& q, const PathParams&, const Principal&, Responder r) {
        f->ImportProfiles(std::move(q), std::move(r));
      });
  add("POST", "/v2/repository/index", Reach::kAnyKey,
      [f](Request&&, const PathParams&, const Principal& caller, Responder r) {
        f->RepositoryIndex(caller, std::move(r));
      });
  if (options.pipelines != nullptr) AddPipelineRoutes(options, router);
  add("GET", "/metrics", Reach::kAdmin,
      [f](Request&&, const PathParams&, const Principal&, Responder r) {
        f->Metrics(std::move(r));
      });
}

}  // namespace maitre::controller
