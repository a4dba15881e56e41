#include "cli/predict_command.h"

#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cli/api_client.h"
#include "core/arrivals.h"
#include "core/file_util.h"
#include "core/text_table.h"
#include "policy/prediction/lstm_predictor.h"
#include "sim/experiment_config.h"

namespace maitre::cli {
namespace {

struct PredictArgs {
  std::string trace;
  std::string experiment;
  std::vector<std::string> predictors = {"last", "ewma", "holt-winters", "lstm", "oracle"};
  double unit_s = 60;
  int horizon = 60;
  double sample_s = 5;
  int warmup = 31;
  std::string out;
  bool json = false;
};

// The trace's arrival times, whatever apps it names.
absl::StatusOr<std::vector<Nanos>> ReadArrivalTimes(const std::string& path) {
  auto text = ReadFileToString(path);
  if (!text.ok()) return text.status();
  std::vector<std::string> apps;
  auto rows = ParseTraceCsvAnyApps(*text, &apps);
  if (!rows.ok()) return rows.status();
  std::vector<Nanos> times;
  times.reserve(rows->size());
  for (const Arrival& a : *rows) times.push_back(a.time);
  return times;
}

// The arrival times an experiment's trace (its generator or its file) makes.
absl::StatusOr<std::vector<Nanos>> ExperimentArrivalTimes(const std::string& yaml_path) {
  auto experiment = sim::LoadExperimentFile(yaml_path);
  if (!experiment.ok()) return experiment.status();
  auto arrivals = experiment->MakeArrivals();
  if (!arrivals.ok()) return arrivals.status();
  std::vector<Nanos> times;
  Arrival a;
  while ((*arrivals)->Next(&a)) times.push_back(a.time);
  return times;
}

absl::StatusOr<std::unique_ptr<policy::WorkloadPredictor>> MakePredictor(
    const std::string& name, const std::vector<double>& peaks) {
  if (name == "lstm") return policy::CreateLstmPredictor({});
  return policy::CreatePredictor(name, peaks);
}

int RunPredict(const PredictArgs& args) {
  policy::PredictionWindows windows{FromSeconds(args.unit_s), args.horizon,
                                    FromSeconds(args.sample_s)};
  if (absl::Status valid = policy::ValidateWindows(windows); !valid.ok()) return Fail(valid);
  if (args.warmup < 1) return Fail(absl::InvalidArgumentError("--warmup must be at least 1"));
  // Every name is checked before the trace is read, so that a typo is told
  // as such rather than behind a complaint about the trace. (The oracle
  // needs a series to be built; any one does to check a name.)
  for (const std::string& name : args.predictors) {
    if (auto made = MakePredictor(name, {1.0}); !made.ok()) return Fail(made.status());
  }
  if (args.trace.empty() == args.experiment.empty()) {
    return Fail(absl::InvalidArgumentError(
        "give the arrivals as exactly one of --trace CSV or --experiment YAML"));
  }
  auto times = args.trace.empty() ? ExperimentArrivalTimes(args.experiment)
                                  : ReadArrivalTimes(args.trace);
  if (!times.ok()) return Fail(times.status());
  if (times->empty()) return Fail(absl::InvalidArgumentError("the trace has no arrivals"));
  const Nanos duration = *std::max_element(times->begin(), times->end()) + 1;
  std::vector<double> peaks = policy::UnitPeakRates(*times, windows, duration);
  if (static_cast<int>(peaks.size()) <= args.warmup) {
    return Fail(absl::InvalidArgumentError(absl::StrCat(
        "the trace spans ", peaks.size(), " whole units of ", args.unit_s,
        " s; evaluating needs more than --warmup (", args.warmup, ")")));
  }
  nlohmann::json results = nlohmann::json::array();
  Table table({"PREDICTOR", "MAPE", "1-UNIT MAPE", "UNDER", "MEAN SHORTFALL", "FORECASTS"});
  std::string csv = "predictor,issued_unit,target_unit,predicted_qps,actual_qps\n";
  for (const std::string& name : args.predictors) {
    auto predictor = MakePredictor(name, peaks);
    if (!predictor.ok()) return Fail(predictor.status());
    std::vector<policy::Forecast> forecasts;
    policy::ForecastError e = policy::EvaluatePredictor(**predictor, peaks, args.horizon,
                                                        args.warmup, &forecasts);
    table.Add({name, absl::StrFormat("%.1f%%", 100 * e.mape),
               absl::StrFormat("%.1f%%", 100 * e.one_step_mape),
               absl::StrFormat("%.1f%%", 100 * e.under_rate),
               absl::StrFormat("%.1f%%", 100 * e.mean_under_share), absl::StrCat(e.points)});
    results.push_back({{"predictor", name},
                       {"mape", e.mape},
                       {"one_unit_mape", e.one_step_mape},
                       {"under_rate", e.under_rate},
                       {"mean_shortfall", e.mean_under_share},
                       {"forecasts", e.points}});
    if (!args.out.empty()) {
      for (const policy::Forecast& f : forecasts) {
        absl::StrAppendFormat(&csv, "%s,%d,%d,%.6g,%.6g\n", name, f.issued, f.target, f.predicted,
                              f.actual);
      }
    }
  }
  if (!args.out.empty()) {
    if (absl::Status written = WriteFileAtomically(args.out, csv); !written.ok()) {
      return Fail(written);
    }
  }
  if (args.json) {
    std::cout << nlohmann::json{{"units", peaks.size()},
                                {"unit_s", args.unit_s},
                                {"horizon", args.horizon},
                                {"sample_s", args.sample_s},
                                {"warmup", args.warmup},
                                {"predictors", results}}
                     .dump(2)
              << "\n";
  } else {
    std::cout << peaks.size() << " units of " << args.unit_s << " s, forecasts " << args.horizon
              << " units ahead from unit " << args.warmup << " on:\n"
              << table.Render();
  }
  return 0;
}

}  // namespace

void AddPredictCommand(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<PredictArgs>();
  CLI::App* cmd = app.add_subcommand(
      "predict", "Score workload predictors on a trace: MAPE and how often they under-predict");
  cmd->add_option("--trace", args->trace, "Trace CSV (arrival_ms[,app,...])");
  cmd->add_option("--experiment", args->experiment,
                  "Instead of --trace: a simulator experiment YAML, whose trace (generator or "
                  "file) is scored");
  cmd->add_option("--predictor", args->predictors,
                  "last, ewma[:ALPHA], holt-winters[:SEASON_UNITS], lstm, oracle (repeat; "
                  "default: all)")
      ->capture_default_str();
  cmd->add_option("--unit", args->unit_s, "Prediction unit P_u, seconds")->capture_default_str();
  cmd->add_option("--horizon", args->horizon, "Units predicted at once, P_w")
      ->capture_default_str();
  cmd->add_option("--sample", args->sample_s, "Sample window P_s, seconds")
      ->capture_default_str();
  cmd->add_option("--warmup", args->warmup, "Units seen before the first forecast scored")
      ->capture_default_str();
  cmd->add_option("--out", args->out,
                  "Write every forecast: predictor,issued_unit,target_unit,predicted_qps,"
                  "actual_qps");
  cmd->add_flag("--json", args->json, "Print JSON");
  cmd->callback([args, exit_code] { *exit_code = RunPredict(*args); });
}

}  // namespace maitre::cli
