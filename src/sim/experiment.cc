#include "sim/experiment.h"

#include <cstdio>

#include "absl/strings/str_format.h"
#include "core/clock.h"
#include "sim/report.h"

namespace maitre::sim {

absl::StatusOr<std::unique_ptr<Simulator>> BuildSimulator(const Experiment& experiment) {
  auto arrivals = experiment.MakeArrivals();
  if (!arrivals.ok()) return arrivals.status();
  return Simulator::Create(experiment.setup, *std::move(arrivals));
}

absl::Status RunExperiment(const Experiment& experiment, const std::string& out_dir,
                           const RunOptions& options) {
  auto sim = BuildSimulator(experiment);
  if (!sim.ok()) return sim.status();
  // Wall time is read only to tell a person how fast the run went; nothing
  // simulated depends on it.
  const Nanos started = SteadyClock::Get()->Now();
  const Nanos horizon = experiment.setup.horizon;
  const Nanos step = std::max<Nanos>(kSecond, horizon / 10);
  for (Nanos until = step; !(*sim)->finished(); until += step) {
    if (auto s = (*sim)->RunUntil(until); !s.ok()) return s;
    if (options.progress && until <= horizon) {
      absl::FPrintF(stderr, "maitre sim: %s: %.0f/%.0f s simulated, %d queries\n", experiment.name,
                    ToSeconds(until), ToSeconds(horizon), (*sim)->metrics().total.arrived);
    }
  }
  if (auto s = WriteReports(**sim, experiment.name, out_dir); !s.ok()) return s;
  if (options.progress) {
    const SimMetrics& m = (*sim)->metrics();
    double wall = ToSeconds(SteadyClock::Get()->Now() - started);
    absl::FPrintF(
        stderr,
        "maitre sim: %s: %d queries, SLO violation ratio %.4f, in %.2f s (%.1f M "
        "queries/s); wrote %s/{timeseries.csv,summary.json,plot.svg%s}\n",
        experiment.name, m.total.arrived,
        m.total.arrived > 0 ? static_cast<double>(m.total.violations()) / m.total.arrived : 0, wall,
        wall > 0 ? m.total.arrived / wall / 1e6 : 0, out_dir,
        (*sim)->managed() ? ",control.log" : "");
  }
  return absl::OkStatus();
}

absl::Status RunExperimentFile(const std::string& yaml_path, const std::string& out_dir) {
  auto experiment = LoadExperimentFile(yaml_path);
  if (!experiment.ok()) return experiment.status();
  return RunExperiment(*experiment, out_dir);
}

}  // namespace maitre::sim
