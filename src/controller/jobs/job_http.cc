#include "controller/jobs/job_http.h"

#include <cmath>
#include <memory>

#include "absl/strings/str_cat.h"
#include "controller/frontend/status_http.h"
#include "core/work_queue.h"

namespace maitre::jobs {
namespace {

using controller::ErrorResponse;
using nlohmann::json;

absl::StatusOr<std::optional<double>> OptionalNumber(const json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return std::optional<double>();
  if (!it->is_number() || !std::isfinite(it->get<double>())) {
    return absl::InvalidArgumentError(absl::StrCat("parameters.", key, " must be a number"));
  }
  return std::optional<double>(it->get<double>());
}

absl::StatusOr<std::string> StringField(const json& body, const char* key, bool required) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) {
    if (!required) return std::string();
    return absl::InvalidArgumentError(
        absl::StrCat("a job needs \"", key, "\": ",
                     std::string(key) == "input" ? "a .npz file or a directory of them"
                                                 : "the directory results are written to",
                     ", as an absolute path on the controller's filesystem"));
  }
  if (!it->is_string()) {
    return absl::InvalidArgumentError(absl::StrCat("\"", key, "\" must be a string"));
  }
  return it->get<std::string>();
}

// Holds what the handlers share for the router's lifetime.
struct Routes {
  JobRunner* runner;
  WorkQueue submissions{1};
};

}  // namespace

absl::StatusOr<JobSubmission> ParseJobSubmission(const std::string& app, const std::string& body) {
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError(
        "a job is a JSON object: {\"input\": PATH, \"output\": DIR, \"model\"?: NAME, "
        "\"parameters\"?: {\"latency_ms\", \"min_accuracy\", \"max_cost\"}, \"batch_size\"?: N}");
  }
  JobSubmission s;
  s.app = app;
  auto input = StringField(j, "input", true);
  if (!input.ok()) return input.status();
  s.input = *input;
  auto output = StringField(j, "output", true);
  if (!output.ok()) return output.status();
  s.output = *output;
  auto model = StringField(j, "model", false);
  if (!model.ok()) return model.status();
  s.model = *model;
  if (auto p = j.find("parameters"); p != j.end() && !p->is_null()) {
    if (!p->is_object()) return absl::InvalidArgumentError("\"parameters\" must be an object");
    for (auto [key, field] : {std::pair{"latency_ms", &s.requirements.latency_ms},
                              std::pair{"min_accuracy", &s.requirements.min_accuracy},
                              std::pair{"max_cost", &s.requirements.max_cost}}) {
      auto value = OptionalNumber(*p, key);
      if (!value.ok()) return value.status();
      *field = *value;
    }
  }
  if (auto b = j.find("batch_size"); b != j.end() && !b->is_null()) {
    if (!b->is_number_integer() || b->get<int64_t>() < 1 || b->get<int64_t>() > (1 << 20)) {
      return absl::InvalidArgumentError("\"batch_size\" must be a positive integer");
    }
    s.batch_size = static_cast<int32_t>(b->get<int64_t>());
  }
  return s;
}

json JobStatusJson(const JobStatus& s) {
  const registry::JobRecord& r = s.record;
  json parameters = json::object();
  if (r.requirements.latency_ms) parameters["latency_ms"] = *r.requirements.latency_ms;
  if (r.requirements.min_accuracy) parameters["min_accuracy"] = *r.requirements.min_accuracy;
  if (r.requirements.max_cost) parameters["max_cost"] = *r.requirements.max_cost;
  json files = json::array();
  for (const registry::JobFileRecord& f : r.files) {
    files.push_back({{"input", f.path},
                     {"output", ResultPath(r.output, f.path)},
                     {"rows", f.rows},
                     {"done", f.done_rows},
                     {"labelled", f.labelled}});
  }
  json j{{"id", r.id},
         {"app", r.app},
         {"state", std::string(JobStateName(s.state))},
         {"done", s.done},
         {"total", s.total},
         {"progress", s.progress()},
         {"files_done", s.files_done},
         {"files_total", r.files.size()},
         {"input", r.input},
         {"output", r.output},
         {"batch_size", r.batch_size},
         {"parameters", parameters},
         {"created_unix_ms", r.created_unix_ms},
         {"resumed_from", s.resumed_from},
         {"rows_sent", s.rows_sent},
         {"files", files}};
  if (!r.model.empty()) {
    j["model"] = r.variant.empty() ? r.model : absl::StrCat(r.model, ":", r.variant);
  }
  if (s.accuracy) {
    j["accuracy"] = *s.accuracy;
    j["labelled_done"] = s.labelled_done;
  }
  if (!r.error.empty()) j["error"] = r.error;
  if (!s.reason.empty()) j["reason"] = s.reason;
  if (r.started_unix_ms != 0) j["started_unix_ms"] = r.started_unix_ms;
  if (r.finished_unix_ms != 0) j["finished_unix_ms"] = r.finished_unix_ms;
  return j;
}

void AddJobRoutes(http::Router& router, JobRunner* runner,
                  const controller::HttpAccess& access) {
  auto routes = std::make_shared<Routes>();
  routes->runner = runner;
  using controller::Principal;
  using controller::Reach;
  using http::PathParams;
  using http::Request;
  using http::Responder;
  router.Add(
      "POST", "/v2/apps/{app}/jobs",
      access.Guard(Reach::kApp, [routes](Request&& q, const PathParams& p, const Principal&,
                                         Responder respond) {
        auto submission = ParseJobSubmission(p.find("app")->second, q.body);
        if (!submission.ok()) {
          std::move(respond)(ErrorResponse(submission.status()));
          return;
        }
        // Checking the inputs reads them: off the I/O thread.
        // The closure holds the runner, not `routes`: the queue lives in
        // `routes`, and must not be destroyed from its own thread.
        routes->submissions.Post([runner = routes->runner, submission = *std::move(submission),
                                  respond = std::move(respond)]() mutable {
          auto status = runner->Submit(submission);
          if (!status.ok()) {
            std::move(respond)(ErrorResponse(status.status()));
            return;
          }
          http::Response response = http::Response::Json(201, JobStatusJson(*status).dump());
          response.headers.push_back({"Location", absl::StrCat("/v2/jobs/", status->record.id)});
          std::move(respond)(std::move(response));
        });
      }));
  // Each caller sees the jobs of the apps its key reaches.
  router.Add("GET", "/v2/jobs",
             access.Guard(Reach::kAnyKey, [routes](Request&&, const PathParams&,
                                                   const Principal& caller, Responder respond) {
               json jobs = json::array();
               for (const JobStatus& s : routes->runner->List()) {
                 if (controller::CheckAppAccess(caller, s.record.app).ok()) {
                   jobs.push_back(JobStatusJson(s));
                 }
               }
               std::move(respond)(http::Response::Json(200, json{{"jobs", jobs}}.dump()));
             }));
  router.Add("GET", "/v2/jobs/{id}",
             access.Guard(Reach::kAnyKey, [routes](Request&&, const PathParams& p,
                                                   const Principal& caller, Responder respond) {
               auto status = routes->runner->Get(p.find("id")->second);
               if (status.ok()) {
                 if (absl::Status allowed = controller::CheckAppAccess(caller, status->record.app);
                     !allowed.ok()) {
                   std::move(respond)(controller::AccessRefusal(allowed));
                   return;
                 }
               }
               std::move(respond)(status.ok()
                                      ? http::Response::Json(200, JobStatusJson(*status).dump())
                                      : ErrorResponse(status.status()));
             }));
  router.Add("POST", "/v2/jobs/{id}/cancel",
             access.Guard(Reach::kAnyKey, [routes](Request&&, const PathParams& p,
                                                   const Principal& caller, Responder respond) {
               const std::string& id = p.find("id")->second;
               if (auto job = routes->runner->Get(id); job.ok()) {
                 if (absl::Status allowed = controller::CheckAppAccess(caller, job->record.app);
                     !allowed.ok()) {
                   std::move(respond)(controller::AccessRefusal(allowed));
                   return;
                 }
               }
               auto status = routes->runner->Cancel(id);
               if (!status.ok()) {
                 // A finished job cannot be cancelled: a conflict with its state.
                 int code = absl::IsFailedPrecondition(status.status())
                                ? 409
                                : controller::HttpStatusFor(status.status());
                 std::move(respond)(http::Response::Error(code, status.status().message()));
                 return;
               }
               std::move(respond)(http::Response::Json(200, JobStatusJson(*status).dump()));
             }));
}

}  // namespace maitre::jobs
