#include "cli/job_command.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <thread>

#include <CLI/CLI.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/api_client.h"
#include "core/text_table.h"

namespace maitre::cli {
namespace {

using nlohmann::json;

bool Finished(const std::string& state) {
  return state == "succeeded" || state == "failed" || state == "cancelled";
}

std::string Percent(double fraction) { return absl::StrFormat("%.1f%%", 100 * fraction); }

std::string Bar(double fraction, int width = 30) {
  int filled = static_cast<int>(std::clamp(fraction, 0.0, 1.0) * width);
  return absl::StrCat("[", std::string(filled, '#'), std::string(width - filled, '.'), "]");
}

// "[####.....] 45.2%  4520/10000 rows"
std::string ProgressLine(const json& job) {
  return absl::StrCat(Bar(job.value("progress", 0.0)), " ", Percent(job.value("progress", 0.0)),
                      "  ", job.value("done", int64_t{0}), "/", job.value("total", int64_t{0}),
                      " rows");
}

std::string AccuracyText(const json& job) {
  if (!job.contains("accuracy")) return "-";
  return Percent(job["accuracy"].get<double>());
}

void PrintJob(const json& job) {
  std::string model = job.value("model", "");
  std::cout << job.value("id", "") << "  " << job.value("state", "") << "\n"
            << "  app       " << job.value("app", "")
            << (model.empty() ? "" : absl::StrCat(" (model ", model, ")")) << "\n"
            << "  input     " << job.value("input", "") << " (" << job.value("files_total", 0)
            << " file(s))\n"
            << "  output    " << job.value("output", "") << "\n"
            << "  progress  " << ProgressLine(job) << "\n";
  if (job.contains("accuracy")) {
    std::cout << "  accuracy  " << AccuracyText(job) << " over "
              << job.value("labelled_done", int64_t{0}) << " labelled rows\n";
  }
  if (job.contains("reason")) {
    std::cout << "  waiting   " << job["reason"].get<std::string>() << "\n";
  }
  if (job.contains("error")) {
    std::cout << "  error     " << job["error"].get<std::string>() << "\n";
  }
}

// Polls the job until it ends, redrawing one status line on stderr.
absl::StatusOr<json> Follow(ApiClient& api, const std::string& id, bool quiet) {
  const bool tty = isatty(fileno(stderr));
  std::string last_state;
  while (true) {
    auto job = api.Get(absl::StrCat("/v2/jobs/", id));
    if (!job.ok()) return job.status();
    std::string state = job->value("state", "");
    if (!quiet) {
      std::string line = absl::StrCat(id, " ", state, " ", ProgressLine(*job));
      if (job->contains("reason")) {
        absl::StrAppend(&line, " (", (*job)["reason"].get<std::string>(), ")");
      }
      if (tty) {
        std::cerr << "\r" << line << "\033[K" << std::flush;
      } else if (state != last_state) {
        std::cerr << line << "\n";
      }
    }
    last_state = state;
    if (Finished(state)) {
      if (!quiet && tty) std::cerr << "\n";
      return job;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

}  // namespace

int RunJobSubmit(const JobSubmitArgs& args) {
  auto api = ApiClient::Connect(args.server);
  if (!api.ok()) return Fail(api.status());
  // As given: the server takes a relative path from its jobs directory.
  json body{{"input", args.input}, {"output", args.output}};
  if (!args.model.empty()) body["model"] = args.model;
  json parameters = json::object();
  if (args.latency_ms > 0) parameters["latency_ms"] = args.latency_ms;
  if (args.min_accuracy >= 0) parameters["min_accuracy"] = args.min_accuracy;
  if (args.max_cost >= 0) parameters["max_cost"] = args.max_cost;
  if (!parameters.empty()) body["parameters"] = parameters;
  if (args.batch_size > 0) body["batch_size"] = args.batch_size;
  auto job = api->Post(absl::StrCat("/v2/apps/", args.app, "/jobs"), body.dump());
  if (!job.ok()) return Fail(job.status());
  std::string id = job->value("id", "");
  if (!args.wait) {
    if (args.json) {
      std::cout << job->dump(2) << "\n";
    } else {
      std::cout << "job " << id << " " << job->value("state", "") << ": "
                << job->value("total", int64_t{0}) << " rows in " << job->value("files_total", 0)
                << " file(s), results to " << job->value("output", "") << "\n"
                << "follow it with: maitre job status " << id << "\n";
    }
    return 0;
  }
  auto final_state = Follow(*api, id, args.json);
  if (!final_state.ok()) return Fail(final_state.status());
  if (args.json) {
    std::cout << final_state->dump(2) << "\n";
  } else {
    PrintJob(*final_state);
  }
  return final_state->value("state", "") == "succeeded" ? 0 : 1;
}

int RunJobStatus(const JobQueryArgs& args) {
  auto api = ApiClient::Connect(args.server);
  if (!api.ok()) return Fail(api.status());
  auto job = api->Get(absl::StrCat("/v2/jobs/", args.id));
  if (!job.ok()) return Fail(job.status());
  if (args.json) {
    std::cout << job->dump(2) << "\n";
  } else {
    PrintJob(*job);
  }
  return 0;
}

int RunJobList(const JobQueryArgs& args) {
  auto api = ApiClient::Connect(args.server);
  if (!api.ok()) return Fail(api.status());
  auto list = api->Get("/v2/jobs");
  if (!list.ok()) return Fail(list.status());
  if (args.json) {
    std::cout << list->dump(2) << "\n";
    return 0;
  }
  Table table({"ID", "APP", "MODEL", "STATE", "PROGRESS", "ROWS", "ACCURACY", "OUTPUT"});
  for (const json& job : (*list)["jobs"]) {
    std::string model = job.value("model", "");
    table.Add({job.value("id", ""), job.value("app", ""), model.empty() ? "-" : model,
               job.value("state", ""), Percent(job.value("progress", 0.0)),
               absl::StrCat(job.value("done", int64_t{0}), "/", job.value("total", int64_t{0})),
               AccuracyText(job), job.value("output", "")});
  }
  std::cout << table.Render();
  return 0;
}

int RunJobCancel(const JobQueryArgs& args) {
  auto api = ApiClient::Connect(args.server);
  if (!api.ok()) return Fail(api.status());
  auto job = api->Post(absl::StrCat("/v2/jobs/", args.id, "/cancel"), "");
  if (!job.ok()) return Fail(job.status());
  std::cout << "job " << args.id << " " << job->value("state", "") << " after "
            << job->value("done", int64_t{0}) << " rows\n";
  return 0;
}

void AddJobCommands(CLI::App& app, int* exit_code, const std::string& default_server) {
  // CLI11 binds options to variables that must outlive parsing; the
  // callbacks own them.
  auto submit = std::make_shared<JobSubmitArgs>();
  auto query = std::make_shared<JobQueryArgs>();
  submit->server = default_server;
  query->server = default_server;

  CLI::App* job = app.add_subcommand("job", "Offline (batch) jobs: submit, status, list, cancel");
  job->require_subcommand(1);

  CLI::App* s = job->add_subcommand("submit", "Run a model over a set of inputs in the background");
  s->add_option("--server", submit->server, "Server URL")->capture_default_str();
  s->add_option("--app", submit->app, "App whose models serve the job")->required();
  s->add_option("--input", submit->input,
                ".npz (inputs, optional labels) or a directory of them, in the controller's "
                "jobs directory (a path relative to it, or beneath it)")
      ->required();
  s->add_option("--output", submit->output,
                "Directory for the result .npz files, in the controller's jobs directory")
      ->required();
  s->add_option("--model", submit->model, "Model, or model:variant (default: Maitre chooses)");
  s->add_option("--latency-ms", submit->latency_ms, "Latency objective of each chunk");
  s->add_option("--min-accuracy", submit->min_accuracy, "Minimum accuracy (fraction)");
  s->add_option("--max-cost", submit->max_cost, "Cost ceiling, $/h");
  s->add_option("--batch-size", submit->batch_size, "Rows per query (default 64)");
  s->add_flag("--wait", submit->wait, "Follow the job until it ends");
  s->add_flag("--json", submit->json, "Print JSON");
  s->callback([submit, exit_code] { *exit_code = RunJobSubmit(*submit); });

  CLI::App* st = job->add_subcommand("status", "A job's state and progress");
  st->add_option("id", query->id, "Job id")->required();
  st->add_option("--server", query->server, "Server URL")->capture_default_str();
  st->add_flag("--json", query->json, "Print JSON");
  st->callback([query, exit_code] { *exit_code = RunJobStatus(*query); });

  CLI::App* ls = job->add_subcommand("list", "Every job");
  ls->add_option("--server", query->server, "Server URL")->capture_default_str();
  ls->add_flag("--json", query->json, "Print JSON");
  ls->callback([query, exit_code] { *exit_code = RunJobList(*query); });

  CLI::App* c = job->add_subcommand("cancel", "Stop a job (finished result files stay)");
  c->add_option("id", query->id, "Job id")->required();
  c->add_option("--server", query->server, "Server URL")->capture_default_str();
  c->callback([query, exit_code] { *exit_code = RunJobCancel(*query); });
}

}  // namespace maitre::cli
