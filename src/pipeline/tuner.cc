#include "pipeline/tuner.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "pipeline/envelope.h"

namespace maitre::pipeline {

namespace {

int32_t ReplicasFor(double rate_qps, double scale, double mu_qps, double rho) {
  // The ratio is rounded to a millionth first, so that a rate the stage was
  // planned for exactly gives back its planned replicas, not one more.
  const double need = std::round(rate_qps * scale / (mu_qps * rho) * 1e6) / 1e6;
  return std::max<int32_t>(1, static_cast<int32_t>(std::ceil(need)));
}

// Whether a live envelope's count in a window exceeds the planned count by
// more than sampling noise: by more than `sigmas` deviations of the
// difference of two draws of the busiest count, sqrt(2)·σ_w with σ_w the
// planned deviation (envelope_noise.h) widened by a count's rounding,
// variance 1/12, so that a window whose busiest count never varied in the
// draws still needs a clear rise. Without a planned deviation (a plan from
// before them), σ_w² is that of a Poisson count of the planned mean. Both
// traces are draws of a process; the planned one is no truer than the live
// one.
bool Exceeds(double live_count, double planned_count, double deviation, double sigmas) {
  const double variance = deviation >= 0 ? deviation * deviation + 1.0 / 12 : planned_count;
  return live_count > planned_count + sigmas * std::sqrt(2 * variance);
}

// The configuration's service time as §5 starts its windows at: §4.3's sum
// of the processing latencies on the longest path, each stage on its
// planned hardware at batch 1, the time one query takes through the idle
// pipeline (docs/pipelines.md, "The tuner"). At the planned batches it is
// the time of a full batch at every stage, which the planned rate may
// never form: 543 ms for a plan meeting a 150 ms objective.
Nanos QueryServiceTime(const PlanningProblem& problem, PipelineConfig config) {
  for (StageConfig& c : config) c.batch = 1;
  return FromMillis(ServiceTimeMs(problem, config));
}

}  // namespace

absl::StatusOr<TunerPlan> MakeTunerPlan(const PlanningProblem& problem,
                                        const PipelineConfig& config,
                                        absl::Span<const Nanos> planning_arrivals,
                                        const TunerPlanOptions& options) {
  if (auto s = CheckProblem(problem); !s.ok()) return s;
  if (config.size() != problem.stages.size()) {
    return absl::InvalidArgumentError("the configuration needs one entry per stage");
  }
  if (planning_arrivals.size() < 2 || planning_arrivals.back() <= planning_arrivals.front()) {
    return absl::InvalidArgumentError("the planning trace needs arrivals spread over time");
  }
  const Nanos span = planning_arrivals.back() - planning_arrivals.front();
  const double lambda = (planning_arrivals.size() - 1) / ToSeconds(span);
  const std::vector<double> scale = ScaleFactors(problem);
  TunerPlan plan;
  for (size_t i = 0; i < config.size(); ++i) {
    const Profile& p = problem.stages[i].options[config[i].option].profile;
    TunerStage s;
    s.name = problem.stages[i].name;
    s.mu_qps = p.ThroughputAt(config[i].batch);
    s.scale = scale[i];
    s.replicas = config[i].replicas;
    // A stage that sees no query has all the slack it could want.
    s.rho = scale[i] > 0 ? lambda * scale[i] / (s.replicas * s.mu_qps) : 1;
    plan.stages.push_back(std::move(s));
  }
  // No window longer than the trace: its envelope there would read the
  // trace's queries spread over time it does not cover.
  plan.windows =
      EnvelopeWindows(QueryServiceTime(problem, config), std::min(kLongestWindow, span));
  plan.planned_rates = TrafficEnvelope(planning_arrivals, plan.windows);
  auto deviations = EnvelopeCountDeviations(planning_arrivals, plan.windows, options.noise);
  if (!deviations.ok()) return deviations.status();
  plan.planned_deviations = *std::move(deviations);
  return plan;
}

Tuner::Tuner(TunerPlan plan, const TunerOptions& options, Nanos now)
    : plan_(std::move(plan)), options_(options), last_change_(now) {
  rho_p_ = plan_.stages.front().rho;
  for (const TunerStage& s : plan_.stages) {
    rho_p_ = std::min(rho_p_, s.rho);
    replicas_.push_back(s.replicas);
  }
}

absl::StatusOr<Tuner> Tuner::Create(TunerPlan plan, const TunerOptions& options, Nanos now) {
  if (plan.stages.empty()) return absl::InvalidArgumentError("the tuner needs stages");
  if (plan.windows.empty() || plan.windows.size() != plan.planned_rates.size()) {
    return absl::InvalidArgumentError("the tuner needs one planned rate per window");
  }
  if (!plan.planned_deviations.empty() &&
      (plan.planned_deviations.size() != plan.windows.size() ||
       !std::all_of(plan.planned_deviations.begin(), plan.planned_deviations.end(),
                    [](double d) { return d >= 0; }))) {
    return absl::InvalidArgumentError(
        "the tuner needs no planned deviations, or one per window, none negative");
  }
  for (const TunerStage& s : plan.stages) {
    if (!(s.mu_qps > 0) || !(s.rho > 0) || !(s.scale >= 0 && s.scale <= 1) || s.replicas < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "stage \"", s.name, "\": the tuner needs µ > 0, ρ > 0, s in [0,1], replicas >= 1"));
    }
  }
  if (options.quiet_period < 0 || options.down_window <= 0 ||
      options.down_history < options.down_window || options.max_replicas < 1 ||
      !(options.noise_sigmas >= 0)) {
    return absl::InvalidArgumentError(
        "the tuner needs quiet_period >= 0, down_history >= down_window > 0, "
        "max_replicas >= 1 and noise_sigmas >= 0");
  }
  return Tuner(std::move(plan), options, now);
}

void Tuner::Observe(Nanos arrival) { recent_.push_back(arrival); }

absl::Status Tuner::SetScales(const std::vector<double>& scales) {
  if (scales.size() != plan_.stages.size()) {
    return absl::InvalidArgumentError("the tuner needs one measured scale factor per stage");
  }
  for (double s : scales) {
    if (!(s >= 0 && s <= 1)) {
      return absl::InvalidArgumentError("a measured scale factor must be in [0, 1]");
    }
  }
  for (size_t m = 0; m < scales.size(); ++m) plan_.stages[m].scale = scales[m];
  return absl::OkStatus();
}

bool Tuner::Move(const std::vector<int32_t>& target, bool up, std::string* moves) {
  bool moved = false;
  for (size_t m = 0; m < replicas_.size(); ++m) {
    if (up ? target[m] <= replicas_[m] : target[m] >= replicas_[m]) continue;
    absl::StrAppendFormat(moves, "%s%s %d->%d", moved ? ", " : "", plan_.stages[m].name,
                          replicas_[m], target[m]);
    replicas_[m] = target[m];
    moved = true;
  }
  return moved;
}

TunerDecision Tuner::Decide(Nanos now) {
  const Nanos keep = std::max(plan_.windows.back(), options_.down_history);
  while (!recent_.empty() && recent_.front() <= now - keep) recent_.pop_front();
  TunerDecision d;
  // Scaling up: the live envelope against the planned one, drawn over as
  // long a span as the planning trace (its longest window): the busiest
  // window of a longer trace is busier, by chance alone.
  const auto from = std::upper_bound(recent_.begin(), recent_.end(), now - plan_.windows.back());
  const std::vector<Nanos> live(from, recent_.end());
  const std::vector<double> rates = TrafficEnvelope(live, plan_.windows);
  // r_max in the plan's terms: a window's live rate over its planned rate,
  // times the planning trace's mean rate (its longest window's). At the
  // long windows, whose planned rate is the mean, this is the live rate
  // itself; at a short one it is the mean rate whose bursts, shaped as the
  // planning trace's, would fill the window as the live traffic did. The
  // planned ρ_m is slack for the planning trace's bursts at its mean rate,
  // so a burst read as a rate of its own would be provisioned twice: a
  // CV step read 744 qps in a 39 ms window, where the planning trace's
  // own busiest was 436 qps (docs/experiments.md, "inferline-pipelines").
  const double mean_qps = plan_.planned_rates.back();
  double live_count = 0, planned_count = 0;
  for (size_t i = 0; i < rates.size(); ++i) {
    const double seconds = ToSeconds(plan_.windows[i]);
    const double deviation = plan_.planned_deviations.empty() ? -1 : plan_.planned_deviations[i];
    if (!(plan_.planned_rates[i] > 0) ||
        !Exceeds(rates[i] * seconds, plan_.planned_rates[i] * seconds, deviation,
                 options_.noise_sigmas)) {
      continue;
    }
    const double rate = rates[i] * mean_qps / plan_.planned_rates[i];
    if (rate > d.rate_qps) {
      d.rate_qps = rate;
      d.window = plan_.windows[i];
      live_count = rates[i] * seconds;
      planned_count = plan_.planned_rates[i] * seconds;
    }
  }
  // While the live envelope exceeds the plan, r_max's replicas are also the
  // floor of any scale-down, so the two rules never undo each other.
  std::vector<int32_t> floor(replicas_.size(), 1);
  if (d.rate_qps > 0) {
    for (size_t m = 0; m < replicas_.size(); ++m) {
      const TunerStage& s = plan_.stages[m];
      floor[m] = std::min(options_.max_replicas, ReplicasFor(d.rate_qps, s.scale, s.mu_qps, s.rho));
    }
    std::string moves;
    if (Move(floor, /*up=*/true, &moves)) {
      last_change_ = now;
      d.kind = TunerDecision::Kind::kUp;
      d.reason = absl::StrFormat(
          "up: %.0f queries in %.3f s against the plan's %.0f; provisioning for %.1f qps; %s",
          live_count, ToSeconds(d.window), planned_count, d.rate_qps, moves);
      d.replicas = replicas_;
      return d;
    }
  }
  d.rate_qps = 0;
  d.window = 0;
  // Scaling down, after a quiet period, to the recent peak in short windows.
  if (now - last_change_ >= options_.quiet_period) {
    int64_t most = 0;
    for (Nanos end = now; end > now - options_.down_history; end -= options_.down_window) {
      const Nanos start = end - options_.down_window;
      const auto lo = std::lower_bound(recent_.begin(), recent_.end(), start);
      const auto hi = std::lower_bound(recent_.begin(), recent_.end(), end);
      most = std::max<int64_t>(most, hi - lo);
    }
    d.rate_qps = most / ToSeconds(options_.down_window);
    std::vector<int32_t> target(replicas_.size());
    for (size_t m = 0; m < replicas_.size(); ++m) {
      const TunerStage& s = plan_.stages[m];
      target[m] = std::max(floor[m], ReplicasFor(d.rate_qps, s.scale, s.mu_qps, rho_p_));
    }
    std::string moves;
    if (Move(target, /*up=*/false, &moves)) {
      last_change_ = now;
      d.kind = TunerDecision::Kind::kDown;
      d.reason = absl::StrFormat("down: peak %.1f qps over the last %.0f s; %s", d.rate_qps,
                                 ToSeconds(options_.down_history), moves);
    }
  }
  d.replicas = replicas_;
  return d;
}

}  // namespace maitre::pipeline
