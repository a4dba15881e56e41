// Running an experiment end to end: `maitre sim --config EXP.yaml --out DIR`
// calls RunExperimentFile, which parses the YAML, runs the simulator to the
// end of the trace (and until every query is answered), and writes
// timeseries.csv, summary.json and plot.svg into DIR (and, for a managed
// cluster, control.log: what the control plane did). Progress lines go to
// stderr.
//
// Thread-safety: functions are safe to call concurrently for different
// output directories; each run owns its Simulator.
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "sim/experiment_config.h"
#include "sim/simulator.h"

namespace maitre::sim {

struct RunOptions {
  bool progress = true;  // print progress lines on stderr
};

// Builds a simulator for one run of `experiment` (a fresh arrival stream).
absl::StatusOr<std::unique_ptr<Simulator>> BuildSimulator(const Experiment& experiment);

// Runs `experiment` and writes its three outputs into `out_dir`.
absl::Status RunExperiment(const Experiment& experiment, const std::string& out_dir,
                           const RunOptions& options = {});

absl::Status RunExperimentFile(const std::string& yaml_path, const std::string& out_dir);

}  // namespace maitre::sim
