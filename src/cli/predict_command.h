// `maitre predict`: how well each workload predictor (policy/prediction)
// forecasts a trace's per-unit peak rates, so that a user can pick one from
// the numbers (docs/api.md, "Command line"; docs/policies.md, "Workload
// prediction").
#pragma once

#include <CLI/CLI.hpp>

namespace maitre::cli {

void AddPredictCommand(CLI::App& app, int* exit_code);

}  // namespace maitre::cli
