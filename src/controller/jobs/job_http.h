// The HTTP routes of offline jobs (docs/api.md, "Offline jobs"):
//   POST /v2/apps/{app}/jobs     submit  -> 201 with the job
//   GET  /v2/jobs                list    -> {"jobs": [...]}
//   GET  /v2/jobs/{id}           status
//   POST /v2/jobs/{id}/cancel    cancel  -> the job, now cancelled
// Submission reads the input files, so it runs on a queue of its own rather
// than on an I/O thread; the other routes only read the runner's memory.
//
// Thread-safety: the routes are thread-safe. The runner must outlive the
// router (the queue inside the routes finishes queued submissions when the
// router is destroyed).
#pragma once

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "controller/access/http_access.h"
#include "controller/jobs/job_runner.h"
#include "http/router.h"

namespace maitre::jobs {

// Each route admits the callers `access` lets reach the job's app
// (docs/operations.md, "API keys"); `access` outlives the router.
void AddJobRoutes(http::Router& router, JobRunner* runner, const controller::HttpAccess& access);

// The JSON a client sees for one job (also what `maitre job` reads).
nlohmann::json JobStatusJson(const JobStatus& status);

// Parses a submission body: {"input", "output", "model"?, "parameters"?:
// {"latency_ms", "min_accuracy", "max_cost"}, "batch_size"?}.
absl::StatusOr<JobSubmission> ParseJobSubmission(const std::string& app, const std::string& body);

}  // namespace maitre::jobs
