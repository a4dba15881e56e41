#include "cli/key_command.h"

#include <iostream>
#include <memory>

#include "absl/strings/str_cat.h"
#include "cli/api_client.h"
#include "core/text_table.h"

namespace maitre::cli {
namespace {

using nlohmann::json;

struct KeyArgs {
  std::string server;
  std::string app;   // create: the key's app; empty makes an admin key
  std::string name;  // create: what the key is for
  std::string id;    // revoke
  bool json = false;
};

int RunKeysCreate(const KeyArgs& args) {
  auto api = ApiClient::Connect(args.server);
  if (!api.ok()) return Fail(api.status());
  json body = json::object();
  if (!args.app.empty()) body["app"] = args.app;
  if (!args.name.empty()) body["name"] = args.name;
  auto made = api->Post("/v2/keys", body.dump());
  if (!made.ok()) return Fail(made.status());
  if (args.json) {
    std::cout << made->dump(2) << "\n";
    return 0;
  }
  // The key on stdout alone, so that `maitre keys create > file` keeps it.
  std::cerr << "API key " << made->value("id", "") << " for "
            << (made->contains("app") ? absl::StrCat("app ", (*made)["app"].get<std::string>())
                                      : std::string("admin"))
            << "; it is shown only now:\n";
  std::cout << made->value("key", "") << "\n";
  return 0;
}

int RunKeysList(const KeyArgs& args) {
  auto api = ApiClient::Connect(args.server);
  if (!api.ok()) return Fail(api.status());
  auto listed = api->Get("/v2/keys");
  if (!listed.ok()) return Fail(listed.status());
  if (args.json) {
    std::cout << listed->dump(2) << "\n";
    return 0;
  }
  Table table({"ID", "SCOPE", "APP", "NAME"});
  for (const json& k : (*listed)["keys"]) {
    table.Add({k.value("id", ""), k.value("scope", ""), k.value("app", "-"), k.value("name", "")});
  }
  std::cout << table.Render();
  return 0;
}

int RunKeysRevoke(const KeyArgs& args) {
  auto api = ApiClient::Connect(args.server);
  if (!api.ok()) return Fail(api.status());
  auto revoked = api->Delete(absl::StrCat("/v2/keys/", args.id));
  if (!revoked.ok()) return Fail(revoked.status());
  std::cout << "revoked " << args.id << "\n";
  return 0;
}

}  // namespace

void AddKeyCommands(CLI::App& app, int* exit_code, const std::string& default_server) {
  auto args = std::make_shared<KeyArgs>();
  args->server = default_server;
  CLI::App* keys = app.add_subcommand("keys", "Make, list and revoke API keys");
  keys->require_subcommand(1);
  CLI::App* create = keys->add_subcommand(
      "create", "Make a key: for one app with --app, else an admin key (prints it once)");
  create->add_option("--app", args->app, "The app the key reaches (omit for an admin key)");
  create->add_option("--name", args->name, "What the key is for");
  CLI::App* list = keys->add_subcommand("list", "List the keys yours may see (no secrets)");
  CLI::App* revoke = keys->add_subcommand("revoke", "Revoke a key by its id");
  revoke->add_option("id", args->id, "The key's id (from `maitre keys list`)")->required();
  for (CLI::App* cmd : {create, list, revoke}) {
    cmd->add_option("--server", args->server, "Server URL")->capture_default_str();
  }
  for (CLI::App* cmd : {create, list}) cmd->add_flag("--json", args->json, "Print JSON");
  create->callback([args, exit_code] { *exit_code = RunKeysCreate(*args); });
  list->callback([args, exit_code] { *exit_code = RunKeysList(*args); });
  revoke->callback([args, exit_code] { *exit_code = RunKeysRevoke(*args); });
}

}  // namespace maitre::cli
