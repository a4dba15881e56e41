#include "cli/pipeline_command.h"

#include <iostream>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/api_client.h"
#include "core/file_util.h"
#include "core/text_table.h"

namespace maitre::cli {
namespace {

using nlohmann::json;

struct PipelineArgs {
  std::string server;
  std::string app;   // list: only this app's; put, delete: the owner
  std::string name;  // put, delete
  std::string spec;  // put: the JSON spec's file
  bool json = false;
};

int RunList(const PipelineArgs& args) {
  auto api = ApiClient::Connect(args.server);
  if (!api.ok()) return Fail(api.status());
  auto listed = api->Get(args.app.empty() ? std::string("/v2/pipelines")
                                          : absl::StrCat("/v2/apps/", args.app, "/pipelines"));
  if (!listed.ok()) return Fail(listed.status());
  if (args.json) {
    std::cout << listed->dump(2) << "\n";
    return 0;
  }
  Table table({"PIPELINE", "APP", "STAGES", "READY"});
  for (const json& p : listed->value("pipelines", json::array())) {
    std::vector<std::string> order = p.value("order", std::vector<std::string>{});
    table.Add({p.value("name", ""), p.value("app", ""), absl::StrJoin(order, " -> "),
               p.value("ready", false) ? std::string("yes")
                                       : absl::StrCat("no: ", p.value("error", ""))});
  }
  std::cout << table.Render();
  return 0;
}

int RunPut(const PipelineArgs& args) {
  auto spec = ReadFileToString(args.spec);
  if (!spec.ok()) return Fail(spec.status());
  auto api = ApiClient::Connect(args.server);
  if (!api.ok()) return Fail(api.status());
  auto put = api->Send("PUT", absl::StrCat("/v2/apps/", args.app, "/pipelines/", args.name),
                       *std::move(spec), "application/json");
  if (!put.ok()) return Fail(put.status());
  json body = json::parse(put->body, nullptr, /*allow_exceptions=*/false);
  if (put->status != 200 && put->status != 201) {
    const std::string error = body.is_object() ? body.value("error", put->body) : put->body;
    return Fail(absl::InvalidArgumentError(absl::StrCat("HTTP ", put->status, ": ", error)));
  }
  if (args.json) {
    std::cout << body.dump(2) << "\n";
    return 0;
  }
  std::cout << (put->status == 201 ? "registered" : "replaced") << " pipeline " << args.name
            << " of app " << args.app << ": "
            << absl::StrJoin(body.value("order", std::vector<std::string>{}), " -> ") << "\n";
  return 0;
}

int RunDelete(const PipelineArgs& args) {
  auto api = ApiClient::Connect(args.server);
  if (!api.ok()) return Fail(api.status());
  auto deleted = api->Delete(absl::StrCat("/v2/apps/", args.app, "/pipelines/", args.name));
  if (!deleted.ok()) return Fail(deleted.status());
  std::cout << "deleted pipeline " << args.name << " of app " << args.app << "\n";
  return 0;
}

}  // namespace

void AddPipelineCommands(CLI::App& app, int* exit_code, const std::string& default_server) {
  auto args = std::make_shared<PipelineArgs>();
  args->server = default_server;
  CLI::App* pipelines = app.add_subcommand("pipelines", "List, register and delete pipelines");
  pipelines->add_option("--app", args->app, "Only this app's");
  CLI::App* put = pipelines->add_subcommand("put", "Register or replace a pipeline");
  CLI::App* del = pipelines->add_subcommand("delete", "Delete a pipeline");
  for (CLI::App* cmd : {put, del}) {
    cmd->add_option("app", args->app, "The app it belongs to")->required();
    cmd->add_option("name", args->name, "The pipeline's name")->required();
  }
  put->add_option("spec", args->spec, "The JSON spec's file (docs/pipelines.md)")->required();
  for (CLI::App* cmd : {pipelines, put, del}) {
    cmd->add_option("--server", args->server, "Server URL")->capture_default_str();
  }
  for (CLI::App* cmd : {pipelines, put}) cmd->add_flag("--json", args->json, "Print JSON");
  // The listing runs unless a subcommand was given.
  pipelines->callback([args, pipelines, exit_code] {
    if (pipelines->get_subcommands().empty()) *exit_code = RunList(*args);
  });
  put->callback([args, exit_code] { *exit_code = RunPut(*args); });
  del->callback([args, exit_code] { *exit_code = RunDelete(*args); });
}

}  // namespace maitre::cli
