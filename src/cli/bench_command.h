// `maitre bench` (docs/api.md, "Command line"): the load generator of
// src/loadgen behind the command line.
#pragma once

#include <CLI/CLI.hpp>

namespace maitre::cli {

// Adds the `bench` subcommand; its exit status goes to *exit_code.
void AddBenchCommand(CLI::App& app, int* exit_code);

}  // namespace maitre::cli
