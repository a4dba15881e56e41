// `maitre pipelines`: list, register and delete pipelines on a running
// server (docs/api.md, "Pipelines"; docs/pipelines.md, "Serving a
// pipeline"). `maitre infer --pipeline` is in client_commands.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace maitre::cli {

// Adds `pipelines` (it lists them) with `put` and `delete`; each sets
// *exit_code when it runs. `default_server` is the --server default.
void AddPipelineCommands(CLI::App& app, int* exit_code, const std::string& default_server);

}  // namespace maitre::cli
