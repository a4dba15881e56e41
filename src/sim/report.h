// The simulator's outputs (docs/api.md, "Files"): timeseries.csv (per second:
// demand, served, violations, accuracy, cost, ready replicas by variant,
// workers by type), summary.json (throughput, SLO violation ratio, effective
// accuracy, cost, workers, per-app breakdown and, for managed clusters, what
// the control plane did) and plot.svg. All three are deterministic functions of
// a finished simulation, so equal runs give byte-identical files.
//
// Thread-safety: pure functions of their arguments.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "sim/simulator.h"

namespace maitre::sim {

std::string TimeseriesCsv(const Simulator& sim);
std::string SummaryJson(const Simulator& sim, const std::string& name);
std::string PlotSvg(const Simulator& sim, const std::string& name);

// Writes the three files into `out_dir` (created if needed), each atomically.
absl::Status WriteReports(const Simulator& sim, const std::string& name,
                          const std::string& out_dir);

}  // namespace maitre::sim
