// Arrival processes for the simulator and the load generator (docs/api.md,
// "Files"): generators (uniform, poisson, gamma with a CV, MMPP, diurnal with
// spikes, piecewise rate schedule), each driven by its own seeded Rng, and
// trace files in the CSV form `arrival_ms[,app][,latency_ms][,min_accuracy]`.
//
// Sources are streams: the simulator (or `maitre bench`) pulls one arrival at a time, so a long
// experiment never holds its whole trace in memory (a replayed file does).
//
// Thread-safety: sources are not synchronised; one owner each.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/time.h"

namespace maitre {

struct Arrival {
  Nanos time = 0;
  int32_t app = 0;           // index into the experiment's apps
  Nanos latency = -1;        // the query's own latency objective; -1: the app's
  double min_accuracy = -1;  // the query's own minimum; -1: the app's
};

class ArrivalSource {
 public:
  virtual ~ArrivalSource() = default;
  // The next arrival, in non-decreasing time order; false when the trace is
  // over.
  virtual bool Next(Arrival* out) = 0;
};

enum class GeneratorKind { kUniform, kPoisson, kGamma, kMmpp, kDiurnal, kPiecewise };

// A burst in a diurnal trace: the rate is multiplied by `multiplier` during
// [at, at + length).
struct Spike {
  Nanos at = 0;
  Nanos length = 0;
  double multiplier = 1;
};

// From `at` on, the rate is `rate_qps` (until the next step).
struct RateStep {
  Nanos at = 0;
  double rate_qps = 0;
};

struct GeneratorSpec {
  GeneratorKind kind = GeneratorKind::kPoisson;
  double rate_qps = 0;  // uniform, poisson, gamma; diurnal's mean
  double cv = 1;        // gamma: coefficient of variation of inter-arrivals
  // mmpp: one rate and one mean dwell time per state; it leaves a state for
  // any other with equal probability.
  std::vector<double> mmpp_rates_qps;
  std::vector<Nanos> mmpp_mean_dwell;
  // diurnal: rate = rate_qps·(1 + amplitude·sin(2π(t/period + phase))), times
  // any active spikes' multipliers.
  double amplitude = 0.5;
  Nanos period = 86400 * kSecond;
  double phase = 0;  // in periods
  std::vector<Spike> spikes;
  // diurnal, optional: one phase per app (in periods, added to `phase`), so
  // that the apps peak at different times and the mix shifts over the day:
  // app a's rate is share_a·rate_qps·(1 + amplitude·sin(2π(t/period +
  // phase + app_phases[a]))), times the spikes.
  std::vector<double> app_phases;
  std::vector<RateStep> schedule;  // piecewise
  // Shares of the apps (index = app); arrivals are assigned at random in
  // these proportions. Empty: every arrival goes to app 0.
  std::vector<double> app_shares;
  Nanos duration = 60 * kSecond;
  uint64_t seed = 1;
};

absl::string_view GeneratorKindName(GeneratorKind kind);
// "uniform" | "poisson" | "gamma" | "mmpp" | "diurnal" | "piecewise"
absl::StatusOr<GeneratorKind> ParseGeneratorKind(absl::string_view name);

// Checks the spec (rates, lengths, shares) and builds its stream.
absl::StatusOr<std::unique_ptr<ArrivalSource>> CreateGenerator(const GeneratorSpec& spec);

// Parses a trace CSV. An optional header line names the columns (arrival_ms
// is required; app, latency_ms, min_accuracy are optional and may come in
// any order); without one, the columns are positional in the order above.
// Empty fields fall back to the app's defaults. `app_index` maps an app name
// to its index, or -1 if unknown (an error naming the line). Rows are
// returned sorted by time (stable). Lines starting with '#' are comments.
absl::StatusOr<std::vector<Arrival>> ParseTraceCsv(absl::string_view text,
                                                   const std::vector<std::string>& app_names);

// ParseTraceCsv for a trace whose apps are not known beforehand: every app
// it names is accepted, and `*apps` gets their names, in the order they
// first appear (an arrival's `app` indexes it).
absl::StatusOr<std::vector<Arrival>> ParseTraceCsvAnyApps(absl::string_view text,
                                                          std::vector<std::string>* apps);

// Writes arrivals in the form ParseTraceCsv reads, with a header.
std::string WriteTraceCsv(const std::vector<Arrival>& arrivals,
                          const std::vector<std::string>& app_names);

// Replays parsed rows; arrivals at or after `duration` are left out.
std::unique_ptr<ArrivalSource> CreateReplay(std::vector<Arrival> rows, Nanos duration);

}  // namespace maitre
