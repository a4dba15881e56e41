// `maitre keys`: make, list and revoke API keys (docs/operations.md,
// "API keys") through a running server's /v2/keys routes. The command
// itself presents $MAITRE_API_KEY or $MAITRE_API_KEY_FILE, like every
// client command.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace maitre::cli {

// Adds `keys` and its subcommands to `app`; each sets *exit_code when it
// runs. `default_server` is the --server default.
void AddKeyCommands(CLI::App& app, int* exit_code, const std::string& default_server);

}  // namespace maitre::cli
