#include "core/arrivals.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/rng.h"

namespace maitre {
namespace {

constexpr double kNanosPerSecond = 1e9;
constexpr double kTwoPi = 6.283185307179586476925286766559;

// What every generator shares: the time cursor (in fractional nanoseconds,
// so that rounding never accumulates), the end, and the app assignment.
class Generator : public ArrivalSource {
 public:
  explicit Generator(const GeneratorSpec& spec)
      : rng_(DeriveSeed(spec.seed, 1)), app_rng_(DeriveSeed(spec.seed, 2)), end_(spec.duration) {
    double total = 0;
    for (double s : spec.app_shares) total += s;
    double acc = 0;
    if (spec.app_shares.size() > 1) {
      for (double s : spec.app_shares) cumulative_.push_back(acc += s / total);
    }
  }

 protected:
  bool Over(double t) const { return !(t < static_cast<double>(end_)); }

  // Fills `out` for an arrival at `t` (ns) unless the trace is over.
  bool Emit(double t, Arrival* out) {
    if (Over(t)) return false;
    out->time = static_cast<Nanos>(std::llround(t));
    out->app = PickApp();
    out->latency = -1;
    out->min_accuracy = -1;
    return true;
  }

  // Emit for an arrival of a given app.
  bool EmitFor(double t, int32_t app, Arrival* out) {
    if (!Emit(t, out)) return false;
    out->app = app;
    return true;
  }
  // An index drawn in proportion to `weights` (not all zero).
  int32_t PickWeighted(const std::vector<double>& weights) {
    double total = 0;
    for (double w : weights) total += w;
    double u = app_rng_.Uniform() * total;
    for (size_t i = 0; i < weights.size(); ++i) {
      if ((u -= weights[i]) < 0) return static_cast<int32_t>(i);
    }
    return static_cast<int32_t>(weights.size() - 1);
  }

  Rng rng_;
  double t_ = 0;

 private:
  int32_t PickApp() {
    if (cumulative_.empty()) return 0;
    double u = app_rng_.Uniform();
    auto it = std::upper_bound(cumulative_.begin(), cumulative_.end(), u);
    return static_cast<int32_t>(std::min<size_t>(it - cumulative_.begin(), cumulative_.size() - 1));
  }

  Rng app_rng_;
  Nanos end_;
  std::vector<double> cumulative_;
};

class UniformGenerator final : public Generator {
 public:
  explicit UniformGenerator(const GeneratorSpec& spec)
      : Generator(spec), gap_(kNanosPerSecond / spec.rate_qps) {}
  bool Next(Arrival* out) override {
    double t = static_cast<double>(count_++) * gap_;  // no accumulated error
    return Emit(t, out);
  }

 private:
  double gap_;
  int64_t count_ = 0;
};

class PoissonGenerator final : public Generator {
 public:
  explicit PoissonGenerator(const GeneratorSpec& spec)
      : Generator(spec), mean_gap_(kNanosPerSecond / spec.rate_qps) {}
  bool Next(Arrival* out) override {
    t_ += rng_.Exponential(mean_gap_);
    return Emit(t_, out);
  }

 private:
  double mean_gap_;
};

// Gamma inter-arrivals with mean 1/rate and coefficient of variation cv:
// shape 1/cv², scale mean·cv². CV > 1 gives bursts separated by long gaps.
class GammaGenerator final : public Generator {
 public:
  explicit GammaGenerator(const GeneratorSpec& spec)
      : Generator(spec),
        shape_(1 / (spec.cv * spec.cv)),
        scale_(kNanosPerSecond / spec.rate_qps * spec.cv * spec.cv) {}
  bool Next(Arrival* out) override {
    t_ += rng_.Gamma(shape_, scale_);
    return Emit(t_, out);
  }

 private:
  double shape_;
  double scale_;
};

class MmppGenerator final : public Generator {
 public:
  explicit MmppGenerator(const GeneratorSpec& spec) : Generator(spec), rates_(spec.mmpp_rates_qps) {
    for (Nanos d : spec.mmpp_mean_dwell) dwell_.push_back(static_cast<double>(d));
    state_end_ = rng_.Exponential(dwell_[0]);
  }
  bool Next(Arrival* out) override {
    while (true) {
      if (rates_[state_] > 0) {
        double t = t_ + rng_.Exponential(kNanosPerSecond / rates_[state_]);
        if (t < state_end_) {
          t_ = t;
          return Emit(t_, out);
        }
      }
      // Exponential gaps are memoryless, so restarting the draw at the
      // switch is exact.
      t_ = state_end_;
      if (Over(t_)) return false;
      size_t n = rates_.size();
      if (n > 1) {
        size_t step = 1 + static_cast<size_t>(rng_.Uniform() * (n - 1));
        state_ = (state_ + std::min(step, n - 1)) % n;
      }
      state_end_ = t_ + rng_.Exponential(dwell_[state_]);
    }
  }

 private:
  std::vector<double> rates_;
  std::vector<double> dwell_;
  size_t state_ = 0;
  double state_end_ = 0;
};

// A non-homogeneous Poisson process by thinning (Lewis & Shedler): candidate
// arrivals at the peak rate, each kept with probability rate(t)/peak.
class DiurnalGenerator final : public Generator {
 public:
  explicit DiurnalGenerator(const GeneratorSpec& spec)
      : Generator(spec),
        base_(spec.rate_qps),
        amplitude_(spec.amplitude),
        period_(static_cast<double>(spec.period)),
        phase_(spec.phase),
        spikes_(spec.spikes),
        app_phases_(spec.app_phases) {
    peak_ = base_ * (1 + amplitude_);
    for (const Spike& s : spikes_) peak_ *= std::max(1.0, s.multiplier);
    double total = 0;
    for (double s : spec.app_shares) total += s;
    for (double s : spec.app_shares) shares_.push_back(s / total);
    rates_.resize(app_phases_.size());
  }
  bool Next(Arrival* out) override {
    while (true) {
      t_ += rng_.Exponential(kNanosPerSecond / peak_);
      if (Over(t_)) return false;
      if (app_phases_.empty()) {
        if (rng_.Uniform() * peak_ < RateAt(t_, 0)) return Emit(t_, out);
        continue;
      }
      // Each app's own rate; the arrival is kept with the total's share of
      // the peak and goes to an app in proportion to the rates.
      double total = 0;
      for (size_t a = 0; a < app_phases_.size(); ++a) {
        total += rates_[a] = shares_[a] * RateAt(t_, app_phases_[a]);
      }
      if (rng_.Uniform() * peak_ < total) return EmitFor(t_, PickWeighted(rates_), out);
    }
  }

 private:
  double RateAt(double t, double app_phase) const {
    double r =
        base_ * (1 + amplitude_ * std::sin(kTwoPi * (t / period_ + phase_ + app_phase)));
    for (const Spike& s : spikes_) {
      if (t >= s.at && t < s.at + s.length) r *= s.multiplier;
    }
    return r;
  }

  double base_, amplitude_, period_, phase_, peak_;
  std::vector<Spike> spikes_;
  std::vector<double> app_phases_, shares_, rates_;
};

class PiecewiseGenerator final : public Generator {
 public:
  explicit PiecewiseGenerator(const GeneratorSpec& spec) : Generator(spec), steps_(spec.schedule) {
    std::stable_sort(steps_.begin(), steps_.end(),
                     [](const RateStep& a, const RateStep& b) { return a.at < b.at; });
  }
  bool Next(Arrival* out) override {
    while (true) {
      while (step_ < steps_.size() && steps_[step_].at <= t_) ++step_;
      // Rate in force at t_: the last step at or before it (0 before any).
      double rate = step_ > 0 ? steps_[step_ - 1].rate_qps : 0;
      double boundary = step_ < steps_.size() ? static_cast<double>(steps_[step_].at) : 1e300;
      if (rate > 0) {
        double t = t_ + rng_.Exponential(kNanosPerSecond / rate);
        if (t < boundary) {
          t_ = t;
          return Emit(t_, out);
        }
      }
      if (boundary >= 1e300) return false;
      t_ = boundary;
      if (Over(t_)) return false;
    }
  }

 private:
  std::vector<RateStep> steps_;
  size_t step_ = 0;
};

class Replay final : public ArrivalSource {
 public:
  Replay(std::vector<Arrival> rows, Nanos duration) : rows_(std::move(rows)), end_(duration) {}
  bool Next(Arrival* out) override {
    if (next_ >= rows_.size() || rows_[next_].time >= end_) return false;
    *out = rows_[next_++];
    return true;
  }

 private:
  std::vector<Arrival> rows_;
  Nanos end_;
  size_t next_ = 0;
};

absl::Status Invalid(absl::string_view what) { return absl::InvalidArgumentError(what); }

}  // namespace

absl::string_view GeneratorKindName(GeneratorKind kind) {
  switch (kind) {
    case GeneratorKind::kUniform:
      return "uniform";
    case GeneratorKind::kPoisson:
      return "poisson";
    case GeneratorKind::kGamma:
      return "gamma";
    case GeneratorKind::kMmpp:
      return "mmpp";
    case GeneratorKind::kDiurnal:
      return "diurnal";
    case GeneratorKind::kPiecewise:
      return "piecewise";
  }
  return "?";
}

absl::StatusOr<GeneratorKind> ParseGeneratorKind(absl::string_view name) {
  for (GeneratorKind k :
       {GeneratorKind::kUniform, GeneratorKind::kPoisson, GeneratorKind::kGamma,
        GeneratorKind::kMmpp, GeneratorKind::kDiurnal, GeneratorKind::kPiecewise}) {
    if (GeneratorKindName(k) == name) return k;
  }
  return Invalid(absl::StrCat("unknown generator \"", name,
                              "\"; choose uniform, poisson, gamma, mmpp, diurnal or piecewise"));
}

absl::StatusOr<std::unique_ptr<ArrivalSource>> CreateGenerator(const GeneratorSpec& spec) {
  if (spec.duration <= 0) return Invalid("the trace duration must be positive");
  double share_total = 0;
  for (double s : spec.app_shares) {
    if (!(s >= 0) || !std::isfinite(s)) return Invalid("app shares must be finite and >= 0");
    share_total += s;
  }
  if (spec.app_shares.size() > 1 && !(share_total > 0)) {
    return Invalid("app shares must not all be zero");
  }
  auto need_rate = [&]() -> absl::Status {
    if (!(spec.rate_qps > 0) || !std::isfinite(spec.rate_qps)) {
      return Invalid(absl::StrCat(GeneratorKindName(spec.kind), " needs rate_qps > 0"));
    }
    return absl::OkStatus();
  };
  switch (spec.kind) {
    case GeneratorKind::kUniform:
      if (auto s = need_rate(); !s.ok()) return s;
      return std::make_unique<UniformGenerator>(spec);
    case GeneratorKind::kPoisson:
      if (auto s = need_rate(); !s.ok()) return s;
      return std::make_unique<PoissonGenerator>(spec);
    case GeneratorKind::kGamma:
      if (auto s = need_rate(); !s.ok()) return s;
      if (!(spec.cv > 0) || !std::isfinite(spec.cv)) return Invalid("gamma needs cv > 0");
      return std::make_unique<GammaGenerator>(spec);
    case GeneratorKind::kMmpp:
      if (spec.mmpp_rates_qps.empty() ||
          spec.mmpp_rates_qps.size() != spec.mmpp_mean_dwell.size()) {
        return Invalid("mmpp needs rates_qps and mean_dwell_s of the same, non-zero length");
      }
      for (size_t i = 0; i < spec.mmpp_rates_qps.size(); ++i) {
        if (!(spec.mmpp_rates_qps[i] >= 0) || spec.mmpp_mean_dwell[i] <= 0) {
          return Invalid("mmpp needs rates >= 0 and dwell times > 0");
        }
      }
      return std::make_unique<MmppGenerator>(spec);
    case GeneratorKind::kDiurnal:
      if (auto s = need_rate(); !s.ok()) return s;
      if (!(spec.amplitude >= 0 && spec.amplitude <= 1)) {
        return Invalid("diurnal needs 0 <= amplitude <= 1");
      }
      if (spec.period <= 0) return Invalid("diurnal needs period_s > 0");
      if (!spec.app_phases.empty() && spec.app_phases.size() != spec.app_shares.size()) {
        return Invalid("diurnal app_phases needs one phase per app");
      }
      for (double p : spec.app_phases) {
        if (!std::isfinite(p)) return Invalid("diurnal app_phases must be finite");
      }
      for (const Spike& s : spec.spikes) {
        if (!(s.multiplier >= 0) || s.length < 0) {
          return Invalid("a spike needs multiplier >= 0 and duration_s >= 0");
        }
      }
      return std::make_unique<DiurnalGenerator>(spec);
    case GeneratorKind::kPiecewise:
      if (spec.schedule.empty()) return Invalid("piecewise needs a non-empty schedule");
      for (const RateStep& s : spec.schedule) {
        if (!(s.rate_qps >= 0) || s.at < 0)
          return Invalid("schedule steps need at_s >= 0, rate_qps >= 0");
      }
      return std::make_unique<PiecewiseGenerator>(spec);
  }
  return Invalid("unknown generator");
}

std::unique_ptr<ArrivalSource> CreateReplay(std::vector<Arrival> rows, Nanos duration) {
  return std::make_unique<Replay>(std::move(rows), duration);
}

namespace {

// ParseTraceCsv, and with `learn` an app not in `app_names` is added to it
// rather than refused.
absl::StatusOr<std::vector<Arrival>> ParseTrace(absl::string_view text,
                                                std::vector<std::string>& app_names, bool learn) {
  enum Column { kArrival, kApp, kLatency, kMinAccuracy };
  std::vector<Column> columns = {kArrival, kApp, kLatency, kMinAccuracy};
  std::vector<Arrival> rows;
  bool first = true;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    std::vector<absl::string_view> fields = absl::StrSplit(line, ',');
    for (absl::string_view& f : fields) f = absl::StripAsciiWhitespace(f);
    double number;
    if (first && !absl::SimpleAtod(fields[0], &number)) {
      // A header: it names the columns.
      columns.clear();
      for (absl::string_view f : fields) {
        if (f == "arrival_ms")
          columns.push_back(kArrival);
        else if (f == "app")
          columns.push_back(kApp);
        else if (f == "latency_ms")
          columns.push_back(kLatency);
        else if (f == "min_accuracy")
          columns.push_back(kMinAccuracy);
        else {
          return Invalid(absl::StrCat("trace line ", line_no, ": unknown column \"", f,
                                      "\" (use arrival_ms, app, latency_ms, min_accuracy)"));
        }
      }
      if (std::find(columns.begin(), columns.end(), kArrival) == columns.end()) {
        return Invalid(absl::StrCat("trace line ", line_no, ": the header needs arrival_ms"));
      }
      first = false;
      continue;
    }
    first = false;
    if (fields.size() > columns.size()) {
      return Invalid(absl::StrCat("trace line ", line_no, ": ", fields.size(), " fields, but only ",
                                  columns.size(), " columns"));
    }
    Arrival a;
    bool has_time = false;
    for (size_t i = 0; i < fields.size(); ++i) {
      absl::string_view f = fields[i];
      if (f.empty()) continue;
      switch (columns[i]) {
        case kArrival:
          if (!absl::SimpleAtod(f, &number) || !(number >= 0) || !std::isfinite(number)) {
            return Invalid(absl::StrCat("trace line ", line_no, ": bad arrival_ms \"", f, "\""));
          }
          a.time = static_cast<Nanos>(std::llround(number * kMillisecond));
          has_time = true;
          break;
        case kApp: {
          auto it = std::find(app_names.begin(), app_names.end(), f);
          if (it == app_names.end() && learn) {
            app_names.emplace_back(f);
            it = app_names.end() - 1;
          }
          if (it == app_names.end()) {
            return Invalid(absl::StrCat("trace line ", line_no, ": unknown app \"", f,
                                        "\" (a trace whose second column is not an app needs a "
                                        "header line naming its columns)"));
          }
          a.app = static_cast<int32_t>(it - app_names.begin());
          break;
        }
        case kLatency:
          if (!absl::SimpleAtod(f, &number) || !(number > 0) || !std::isfinite(number)) {
            return Invalid(absl::StrCat("trace line ", line_no, ": bad latency_ms \"", f, "\""));
          }
          a.latency = static_cast<Nanos>(std::llround(number * kMillisecond));
          break;
        case kMinAccuracy:
          if (!absl::SimpleAtod(f, &number) || !(number >= 0 && number <= 1)) {
            return Invalid(absl::StrCat("trace line ", line_no, ": bad min_accuracy \"", f, "\""));
          }
          a.min_accuracy = number;
          break;
      }
    }
    if (!has_time) return Invalid(absl::StrCat("trace line ", line_no, ": no arrival_ms"));
    rows.push_back(a);
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const Arrival& x, const Arrival& y) { return x.time < y.time; });
  return rows;
}

}  // namespace

absl::StatusOr<std::vector<Arrival>> ParseTraceCsv(absl::string_view text,
                                                   const std::vector<std::string>& app_names) {
  std::vector<std::string> known = app_names;
  return ParseTrace(text, known, /*learn=*/false);
}

absl::StatusOr<std::vector<Arrival>> ParseTraceCsvAnyApps(absl::string_view text,
                                                          std::vector<std::string>* apps) {
  apps->clear();
  return ParseTrace(text, *apps, /*learn=*/true);
}

std::string WriteTraceCsv(const std::vector<Arrival>& arrivals,
                          const std::vector<std::string>& app_names) {
  std::string out = "arrival_ms,app,latency_ms,min_accuracy\n";
  for (const Arrival& a : arrivals) {
    absl::StrAppendFormat(&out, "%.6f,%s,", ToMillis(a.time),
                          a.app >= 0 && a.app < static_cast<int32_t>(app_names.size())
                              ? app_names[a.app]
                              : std::string());
    if (a.latency > 0) absl::StrAppendFormat(&out, "%.6f", ToMillis(a.latency));
    out += ',';
    if (a.min_accuracy >= 0) absl::StrAppendFormat(&out, "%.6f", a.min_accuracy);
    out += '\n';
  }
  return out;
}

}  // namespace maitre
