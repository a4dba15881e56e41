#include "controller/frontend/pipeline_routes.h"

#include <nlohmann/json.hpp>

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "controller/frontend/http_query.h"
#include "controller/frontend/model_views.h"
#include "controller/pipelines/pipeline_run.h"

namespace maitre::controller {
namespace {

using nlohmann::json;

json TensorJson(const std::string& name, const TensorSpec& t) {
  return json{{"name", name}, {"datatype", std::string(DataTypeName(t.dtype))},
              {"shape", t.shape}};
}

// The answer for a pipeline whose stored spec no longer validates.
http::Response Stale(const ServedPipeline& p) {
  return http::Response::Error(409, absl::StrCat("pipeline '", p.name, "' no longer validates (",
                                                 p.error, "); register it again"));
}

// What served traffic says (docs/pipelines.md, "Measured branch
// probabilities"): rows per stage, each stage's share of the pipeline's
// rows (s_m), and each edge's probability, its target's rows over its
// source's, for a target with that one in-edge.
json MeasuredJson(const pipeline::ValidatedPipeline& pipeline, const StageRows::Counts& counts) {
  json stages = json::object(), branches = json::object();
  auto rows_of = [&](const std::string& vertex) -> int64_t {
    auto it = counts.stages.find(vertex);
    return it == counts.stages.end() ? 0 : it->second;
  };
  for (const pipeline::Vertex& v : pipeline.spec.vertices) {
    json s{{"rows", rows_of(v.name)}};
    if (counts.rows > 0) s["scale_factor"] = static_cast<double>(rows_of(v.name)) / counts.rows;
    stages[v.name] = s;
  }
  for (const pipeline::Edge& e : pipeline.edges) {
    int in_edges = 0;
    for (const pipeline::Edge& other : pipeline.edges) in_edges += other.to == e.to;
    if (in_edges != 1 || rows_of(e.from) == 0) continue;
    branches[absl::StrCat(e.from, "->", e.to)] =
        static_cast<double>(rows_of(e.to)) / rows_of(e.from);
  }
  json measured = {{"rows", counts.rows}, {"stages", stages}, {"branches", branches}};
  if (counts.stage_overhead_ms.has_value()) {
    measured["stage_overhead_ms"] = *counts.stage_overhead_ms;
    measured["stage_overhead_queries"] = counts.overhead_queries;
  }
  return measured;
}

json PipelineJson(const ServedPipeline& p) {
  json j{{"name", p.name},
         {"app", p.app},
         {"created_unix_ms", p.created_unix_ms},
         {"ready", p.validated != nullptr}};
  auto spec = json::parse(p.spec_json, nullptr, /*allow_exceptions=*/false);
  j["spec"] = spec.is_discarded() ? json(p.spec_json) : spec;
  if (!p.plan_json.empty() || !p.plan_error.empty()) {
    auto plan = json::parse(p.plan_json, nullptr, /*allow_exceptions=*/false);
    j["plan"] = plan.is_discarded() ? json(p.plan_json) : plan;
    if (!p.plan_error.empty()) j["plan_error"] = p.plan_error;
  }
  if (p.validated == nullptr) {
    j["error"] = p.error;
    return j;
  }
  json order = json::array();
  for (int32_t v : p.validated->order) order.push_back(p.validated->spec.vertices[v].name);
  j["order"] = order;
  json inputs = json::array(), outputs = json::array();
  for (const TensorSpec& t : p.validated->inputs) inputs.push_back(TensorJson(t.name, t));
  for (const auto& [name, t] : p.validated->outputs) outputs.push_back(TensorJson(name, t));
  j["inputs"] = inputs;
  j["outputs"] = outputs;
  j["measured"] = MeasuredJson(*p.validated, p.stage_rows->Get());
  return j;
}

// The answer's JSON header with its parameters replaced by the pipeline's:
// the total time, the stages that ran with their timings, those skipped.
EncodedResponse WithStages(EncodedResponse encoded, const PipelineAnswer& answer) {
  const size_t header_size =
      encoded.json_length >= 0 ? static_cast<size_t>(encoded.json_length) : encoded.body.size();
  json header = json::parse(encoded.body.substr(0, header_size), nullptr,
                            /*allow_exceptions=*/false);
  // The codec writes valid JSON; should it ever not, the answer goes out
  // without the stages rather than taking the server down.
  if (header.is_discarded()) return encoded;
  json stages = json::array();
  for (const StageRun& s : answer.stages) {
    stages.push_back({{"vertex", s.vertex},
                      {"model", s.model},
                      {"variant", s.variant},
                      {"worker", s.worker},
                      {"rows", s.rows},
                      {"started_us", s.started_us},
                      {"finished_us", s.finished_us},
                      {"queue_us", s.queue_us},
                      {"compute_us", s.compute_us}});
  }
  header["parameters"] = {{"pipeline", answer.response.model_name},
                          {"total_us", answer.response.timings.total_us},
                          {"stages", stages},
                          {"skipped", answer.skipped}};
  std::string body = header.dump();
  if (encoded.json_length >= 0) {
    encoded.json_length = static_cast<int64_t>(body.size());
    body.append(encoded.body, header_size, std::string::npos);
  }
  encoded.body = std::move(body);
  return encoded;
}

std::string PipelineName(const http::PathParams& params) {
  return params.find("pipeline")->second;
}

http::Response NoPipeline(const std::string& app, const std::string& name) {
  return http::Response::Error(
      404, absl::StrCat("app '", app, "' has no pipeline named '", name,
                        "'; GET /v2/apps/", app, "/pipelines lists them"));
}

}  // namespace

http::Response PipelineMetadata(const ServedPipeline& pipeline) {
  absl::StatusOr<ModelMetadata> m = DescribePipeline(pipeline);
  if (!m.ok()) return Stale(pipeline);
  json j{{"name", m->name},
         {"versions", json::array()},
         {"platform", m->platform},
         {"inputs", json::array()},
         {"outputs", json::array()}};
  for (const TensorSpec& t : m->inputs) j["inputs"].push_back(TensorJson(t.name, t));
  for (const TensorSpec& t : m->outputs) j["outputs"].push_back(TensorJson(t.name, t));
  return http::Response::Json(200, j.dump());
}

http::Response PipelineReady(const FrontendOptions& options, const ServedPipeline& pipeline) {
  absl::StatusOr<Readiness> readiness =
      PipelineReadiness(*options.catalog->Get(), *options.cluster, pipeline);
  if (!readiness.ok()) {
    return pipeline.validated == nullptr ? Stale(pipeline) : ErrorResponse(readiness.status());
  }
  json j{{"name", pipeline.name}, {"ready", readiness->ready}};
  if (!readiness->ready) j["error"] = readiness->reason;
  return http::Response::Json(readiness->ready ? 200 : 503, j.dump());
}

void ServePipelineQuery(const FrontendOptions& options,
                        std::shared_ptr<const ServedPipeline> pipeline, http::Request&& request,
                        http::Responder respond) {
  if (pipeline->validated == nullptr) {
    std::move(respond)(Stale(*pipeline));
    return;
  }
  auto query = AcceptHttpQuery(request, options.shedder, options.in_flight, options.metrics,
                               options.clock, respond);
  if (!query) return;
  // The tuner's envelopes are drawn on these (docs/policies.md).
  if (pipeline->arrivals != nullptr) pipeline->arrivals->Record(query->received);
  std::vector<RequestedOutput> requested = query->request.outputs;
  bool all_binary = query->request.binary_outputs;
  Dispatcher* dispatcher = options.dispatcher;
  RunPipeline(
      pipeline->validated, std::move(query->request), query->received, options.clock,
      [dispatcher, pipeline](InferTarget target, InferRequest stage, Nanos received,
                             InferDone done) {
        target.variant = PlannedVariant(*pipeline, target.model);
        dispatcher->Infer(std::move(target), std::move(stage), received, std::move(done));
      },
      [respond = std::move(respond), requested = std::move(requested), all_binary,
       permit = std::move(query->permit), metrics = options.metrics, clock = options.clock,
       received = query->received, name = pipeline->name,
       stage_rows = pipeline->stage_rows](absl::StatusOr<PipelineAnswer> answer) mutable {
        if (metrics != nullptr) {
          metrics->RecordPipelineQuery(name, answer.status(), clock->Now() - received);
        }
        if (!answer.ok()) {
          std::move(respond)(ErrorResponse(answer.status()));
        } else {
          stage_rows->Record(*answer);
          std::move(respond)(InferHttpResponse(WithStages(
              WriteInferResponse(answer->response, requested, all_binary), *answer)));
        }
        permit.Release();
      });
}

void AddPipelineRoutes(const FrontendOptions& options, http::Router& router) {
  const HttpAccess& access = *options.access;
  PipelineBook* book = options.pipelines;
  using http::PathParams;
  using http::Request;
  using http::Responder;
  auto add = [&](const char* method, absl::string_view pattern, Reach reach,
                 GuardedHandler handler) {
    router.Add(method, pattern, access.Guard(reach, std::move(handler)));
  };
  const char* one = "/v2/apps/{app}/pipelines/{pipeline}";
  // PUT and POST both register (or replace) the pipeline: 201 when new.
  for (const char* method : {"PUT", "POST"}) {
    add(method, one, Reach::kApp,
        [book](Request&& q, const PathParams& p, const Principal&, Responder r) {
          auto put = book->Register(p.find("app")->second, PipelineName(p), q.body);
          if (!put.ok()) {
            std::move(r)(ErrorResponse(put.status()));
            return;
          }
          std::move(r)(http::Response::Json(put->created ? 201 : 200,
                                            PipelineJson(*put->pipeline).dump()));
        });
  }
  add("GET", one, Reach::kApp,
      [book](Request&&, const PathParams& p, const Principal&, Responder r) {
        const std::string& app = p.find("app")->second;
        auto found = book->Find(PipelineName(p));
        if (found == nullptr || found->app != app) {
          std::move(r)(NoPipeline(app, PipelineName(p)));
          return;
        }
        std::move(r)(http::Response::Json(200, PipelineJson(*found).dump()));
      });
  add("DELETE", one, Reach::kApp,
      [book](Request&&, const PathParams& p, const Principal&, Responder r) {
        const std::string& app = p.find("app")->second;
        absl::Status deleted = book->Delete(app, PipelineName(p));
        if (!deleted.ok()) {
          std::move(r)(ErrorResponse(deleted));
          return;
        }
        std::move(r)(http::Response::Json(
            200, json{{"app", app}, {"pipeline", PipelineName(p)}, {"deleted", true}}.dump()));
      });
  // The plan to provision and tune (docs/api.md, "Pipelines"): what
  // `maitre plan --json` prints.
  add("PUT", absl::StrCat(one, "/plan"), Reach::kApp,
      [book](Request&& q, const PathParams& p, const Principal&, Responder r) {
        auto applied = book->ApplyPlan(p.find("app")->second, PipelineName(p), q.body);
        if (!applied.ok()) {
          const absl::Status& s = applied.status();
          std::move(r)(absl::IsFailedPrecondition(s) ? http::Response::Error(409, s.message())
                                                     : ErrorResponse(s));
          return;
        }
        std::move(r)(http::Response::Json(200, PipelineJson(**applied).dump()));
      });
  add("GET", "/v2/apps/{app}/pipelines", Reach::kApp,
      [book](Request&&, const PathParams& p, const Principal&, Responder r) {
        json list = json::array();
        for (const auto& pipeline : book->List(p.find("app")->second)) {
          list.push_back(PipelineJson(*pipeline));
        }
        std::move(r)(http::Response::Json(200, json{{"pipelines", list}}.dump()));
      });
  // Every pipeline the caller's key reaches.
  add("GET", "/v2/pipelines", Reach::kAnyKey,
      [book](Request&&, const PathParams&, const Principal& caller, Responder r) {
        json list = json::array();
        for (const auto& pipeline : book->List("")) {
          if (CheckAppAccess(caller, pipeline->app).ok()) list.push_back(PipelineJson(*pipeline));
        }
        std::move(r)(http::Response::Json(200, json{{"pipelines", list}}.dump()));
      });
  add("POST", absl::StrCat(one, "/infer"), Reach::kApp,
      [options, book](Request&& q, const PathParams& p, const Principal&, Responder r) {
        const std::string& app = p.find("app")->second;
        auto found = book->Find(PipelineName(p));
        if (found == nullptr || found->app != app) {
          std::move(r)(NoPipeline(app, PipelineName(p)));
          return;
        }
        ServePipelineQuery(options, std::move(found), std::move(q), std::move(r));
      });
}

}  // namespace maitre::controller
