#include "control/mark_allocator.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace maitre::control {
namespace {

// Whole units of `span`, rounded up (a launch serves from the unit after the
// one it ends in) or down (paid time that covers a whole unit).
int CeilUnits(Nanos span, Nanos unit) {
  if (span <= 0) return 0;
  return static_cast<int>((span + unit - 1) / unit);
}
int FloorUnits(Nanos span, Nanos unit) { return span <= 0 ? 0 : static_cast<int>(span / unit); }

}  // namespace

absl::Status ValidateMarkOptions(const MarkOptions& m) {
  if (absl::Status windows = policy::ValidateWindows(m.windows); !windows.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("mark: ", windows.message()));
  }
  if (m.predictor == "lstm") {
    // The LSTM links torch, which the control plane does not.
    return absl::InvalidArgumentError(
        "mark: the lstm predictor is not available to the allocator; use last, ewma[:ALPHA], "
        "holt-winters[:SEASON_UNITS] or oracle");
  }
  const std::string kind = m.predictor.substr(0, m.predictor.find(':'));
  if (kind != "last" && kind != "ewma" && kind != "holt-winters" && kind != "oracle") {
    return absl::InvalidArgumentError(
        absl::StrCat("mark: unknown predictor '", m.predictor,
                     "'; use last, ewma[:ALPHA], holt-winters[:SEASON_UNITS], or in experiments "
                     "oracle"));
  }
  if (m.predictor == "oracle") {
    // Its series are checked where they are given.
  } else if (auto predictor = policy::CreatePredictor(m.predictor); !predictor.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("mark: ", predictor.status().message()));
  }
  bool negative_launch = m.default_launch_time < 0;
  for (const auto& [type, launch] : m.launch_time) negative_launch |= launch < 0;
  if (!(m.headroom >= 1) || !std::isfinite(m.headroom) || negative_launch || m.cool_down < 0 ||
      m.release_margin < 0) {
    return absl::InvalidArgumentError(
        "mark: headroom must be a finite number >= 1, and launch times, cool_down and "
        "release_margin not negative");
  }
  if (!(m.sl_min > 0 && m.sl_min <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("mark: sl_min must be in (0, 1], not ", m.sl_min));
  }
  if (m.slo_window <= 0 || m.slo_min_queries < 1 || !(m.slo_step > 0 && m.slo_step <= 10) ||
      !(m.slo_max_boost >= 0 && m.slo_max_boost <= 100) || m.slo_relax_after < 0) {
    return absl::InvalidArgumentError(
        "mark: the SLO monitor needs slo_window > 0, slo_min_queries >= 1, slo_step in (0, 10], "
        "slo_max_boost in [0, 100] and slo_relax_after >= 0");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<MarkAllocator>> MarkAllocator::Create(
    const AllocatorOptions& options) {
  if (absl::Status valid = ValidateMarkOptions(options.mark); !valid.ok()) return valid;
  if (options.mark.predictor == "oracle" && options.mark.known_peaks.empty()) {
    return absl::InvalidArgumentError("mark: the oracle predictor needs each app's true peaks");
  }
  if (!options.cluster_scaling) {
    return absl::InvalidArgumentError(
        "mark provisions workers: it needs cluster scaling on (a worker provider; in an "
        "experiment, policies.cluster_autoscaler: on)");
  }
  return std::unique_ptr<MarkAllocator>(new MarkAllocator(options));
}

const MarkAllocator::AppPlan* MarkAllocator::PlanFor(const std::string& app) const {
  auto it = apps_.find(app);
  return it == apps_.end() ? nullptr : &it->second->plan;
}

double MarkAllocator::BoostFor(const std::string& app) const {
  auto it = apps_.find(app);
  return it == apps_.end() ? 0 : it->second->boost;
}

std::string MarkAllocator::AppOf(const std::string& worker) const {
  auto it = known_.find(worker);
  return it == known_.end() ? "" : it->second.app;
}

Nanos MarkAllocator::LaunchTime(const std::string& type) const {
  auto it = options_.mark.launch_time.find(type);
  return it != options_.mark.launch_time.end() ? it->second : options_.mark.default_launch_time;
}

Nanos MarkAllocator::PaidUntil(const KnownWorker& worker, Nanos now,
                               const Observation& observation) const {
  const WorkerType* type = observation.FindType(worker.type);
  return type != nullptr ? type->PaidUntil(worker.paid_from, now) : now;
}

std::optional<MarkAllocator::Choice> MarkAllocator::Choose(const Observation& observation,
                                                           const std::string& app,
                                                           const std::string& type) const {
  const WorkerType* t = observation.FindType(type);
  if (t == nullptr) return std::nullopt;
  std::optional<Choice> best;
  double best_accuracy = 0;
  for (const ModelOption& m : observation.models) {
    if (m.app != app) continue;
    for (const VariantOption& v : m.variants) {
      if (v.worker_type != type || v.profile == nullptr || v.cores_per_replica <= 0) continue;
      if (m.min_accuracy.has_value() && v.accuracy < *m.min_accuracy) continue;
      Choice c;
      c.key = {m.name, v.variant};
      c.qps_per_replica = v.profile->SaturationQps(m.slo_ms);
      c.replicas = static_cast<int>(std::floor(t->cores / v.cores_per_replica + 1e-9));
      if (t->memory_mb > 0 && v.profile->memory_mb() > 0) {
        c.replicas = std::min(
            c.replicas, static_cast<int>(std::floor(t->memory_mb / v.profile->memory_mb())));
      }
      if (c.replicas < 1 || c.qps_per_replica <= 0) continue;
      // The most within the objective; among equals, the most accurate.
      if (!best.has_value() || c.capacity() > best->capacity() * (1 + 1e-9) ||
          (c.capacity() >= best->capacity() * (1 - 1e-9) && v.accuracy > best_accuracy)) {
        best = c;
        best_accuracy = v.accuracy;
      }
    }
  }
  return best;
}

int MarkAllocator::WorkersOf(const Observation& observation, const std::string& type) const {
  int count = 0;
  for (const ObservedWorker& w : observation.workers) count += w.type == type;
  // An earlier app's launches this round are not in the observation yet.
  for (const Pending& p : pending_) count += p.type == type && p.at == observation.now;
  return count;
}

int MarkAllocator::HeldByOthers(const std::string& type, const std::string& app,
                                const std::set<std::string>& kept) const {
  int count = 0;
  for (const auto& [id, w] : known_) {
    count += w.type == type && (kept.count(id) > 0 || (!w.app.empty() && w.app != app));
  }
  for (const Pending& p : pending_) count += p.type == type && !p.app.empty() && p.app != app;
  return count;
}

std::vector<std::string> MarkAllocator::Apps(const Observation& observation) const {
  std::set<std::string> apps;
  for (const ModelOption& m : observation.models) apps.insert(m.app);
  return {apps.begin(), apps.end()};
}

MarkAllocator::App& MarkAllocator::AppState(const std::string& app) {
  std::unique_ptr<App>& state = apps_[app];
  if (state == nullptr) state = std::make_unique<App>(options_.mark.windows);
  return *state;
}

void MarkAllocator::Reconcile(const Observation& observation) {
  std::set<std::string> present;
  std::map<std::string, int> starting;  // by type
  for (const ObservedWorker& w : observation.workers) {
    if (w.starting) {
      ++starting[w.type];
      continue;
    }
    present.insert(w.id);
    auto [it, joined] = known_.try_emplace(w.id);
    KnownWorker& known = it->second;
    if (joined) {
      known.type = w.type;
      known.paid_from = observation.now;
      // The oldest launch of its type is the one that joined.
      for (auto p = pending_.begin(); p != pending_.end(); ++p) {
        if (p->type != w.type) continue;
        known.app = p->app;
        known.paid_from = p->at;
        pending_.erase(p);
        break;
      }
    }
    if (!known.app.empty()) continue;
    // A worker already serving an app (loaded before this allocator ran, or
    // by selection) is that app's.
    for (const ObservedInstance& inst : w.instances) {
      const ModelOption* model = observation.FindModel(inst.key.model);
      if (model != nullptr && inst.takes_queries && inst.ready + inst.loading > 0) {
        known.app = model->app;
        break;
      }
    }
  }
  for (auto it = known_.begin(); it != known_.end();) {
    it = present.count(it->first) > 0 ? std::next(it) : known_.erase(it);
  }
  // Launches beyond the workers still starting failed or were refused: the
  // oldest are taken to be those.
  std::map<std::string, int> pending_by_type;
  for (const Pending& p : pending_) ++pending_by_type[p.type];
  // Workers starting beyond its launches the world started itself (the
  // provider's replacement of a spot worker under an interruption notice:
  // docs/operations.md, "Spot interruptions"). They are capacity on the
  // way like a launch of no app's; without them the plan launched a second
  // replacement, given back after the cool-down.
  for (const auto& [type, n] : starting) {
    for (int i = pending_by_type[type]; i < n; ++i) {
      pending_.push_back({"", type, observation.now});
      ++pending_by_type[type];
    }
  }
  for (auto p = pending_.begin(); p != pending_.end();) {
    if (pending_by_type[p->type] > starting[p->type]) {
      --pending_by_type[p->type];
      p = pending_.erase(p);
    } else {
      ++p;
    }
  }
}

void MarkAllocator::MeasureDemand(const Observation& observation) {
  const double since_s = ToSeconds(last_model_round_.has_value()
                                       ? observation.now - *last_model_round_
                                       : options_.model_period);
  last_model_round_ = observation.now;
  for (const auto& [app, qps] : OfferedByApp(observation, since_s)) {
    policy::UnitPeakTracker& peaks = AppState(app).peaks;
    // An app's history starts with its first query, and its units with it:
    // the silence between its registration and then is no record of its
    // demand (a seasonal predictor would take it for its first seasons),
    // and units aligned with the load's own start do not straddle the
    // steps of a load that repeats from then. The oracle's true peaks
    // count from the allocator's first round.
    if (!peaks.started() && !(qps > 0) && options_.mark.predictor != "oracle") continue;
    peaks.Add(observation.now, qps);
  }
}

absl::StatusOr<std::vector<double>> MarkAllocator::Forecast(const std::string& name, App& app,
                                                             int hold_units) {
  if (app.predictor == nullptr) {
    auto known = options_.mark.known_peaks.find(name);
    auto made = policy::CreatePredictor(
        options_.mark.predictor,
        known != options_.mark.known_peaks.end() ? known->second : std::vector<double>{});
    if (!made.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("mark: app ", name, ": ", made.status().message()));
    }
    app.predictor = *std::move(made);
  }
  const std::vector<double>& peaks = app.peaks.peaks();
  const int horizon = options_.mark.windows.horizon;
  if (app.forecast.empty() || peaks.size() != app.predicted_units) {
    app.forecast = app.predictor->Predict(peaks, horizon);
    const double last = app.forecast.empty() ? 0 : app.forecast.back();
    app.forecast.resize(static_cast<size_t>(horizon), last);
    app.predicted_units = peaks.size();
  }
  std::vector<double> f = app.forecast;
  // The load seen in the unit in progress holds at least until a launch made
  // now can serve: a predictor that lags a step must not plan it away.
  const double seen = app.peaks.current_peak();
  for (int u = 0; u < static_cast<int>(f.size()) && u <= hold_units; ++u) {
    f[static_cast<size_t>(u)] = std::max(f[static_cast<size_t>(u)], seen);
  }
  for (double& q : f) q *= options_.mark.headroom * (1 + app.boost);
  return f;
}

void MarkAllocator::MonitorSlo(const Observation& observation, ActionSink& sink) {
  const MarkOptions& m = options_.mark;
  std::map<std::string, double> sl_min;
  for (const ModelOption& model : observation.models) {
    auto [it, first] = sl_min.emplace(model.app, model.sl_min.value_or(m.sl_min));
    if (!first && model.sl_min.has_value()) it->second = *model.sl_min;
  }
  for (const auto& [name, target] : sl_min) {
    App& app = AppState(name);
    auto seen = observation.service.find(name);
    if (seen != observation.service.end()) {
      app.service.push_back({observation.now, seen->second});
      app.service_sum.answered += seen->second.answered;
      app.service_sum.within += seen->second.within;
    }
    while (!app.service.empty() && app.service.front().first <= observation.now - m.slo_window) {
      app.service_sum.answered -= app.service.front().second.answered;
      app.service_sum.within -= app.service.front().second.within;
      app.service.pop_front();
    }
    if (app.service_sum.answered < m.slo_min_queries) continue;
    const double level =
        static_cast<double>(app.service_sum.within) / static_cast<double>(app.service_sum.answered);
    const Nanos since = app.boost_changed.has_value() ? observation.now - *app.boost_changed
                                                      : kInfiniteFuture;
    if (level < target && since >= m.slo_window && app.boost < m.slo_max_boost) {
      app.boost = std::min(m.slo_max_boost, app.boost + m.slo_step);
    } else if (level >= target && since >= m.slo_relax_after && app.boost > 0) {
      app.boost = std::max(0.0, app.boost - m.slo_step);
      if (app.boost < 1e-9) app.boost = 0;  // steps of 0.1 do not sum exactly
    } else {
      continue;
    }
    app.boost_changed = observation.now;
    sink.Record({observation.now, level < target ? "slo-raise" : "slo-relax", name, "", 0,
                 absl::StrFormat("service level %.4f over the last %.0f s against SL_min %.4f: "
                                 "forecasts +%.0f%%",
                                 level, ToSeconds(m.slo_window), target, 100 * app.boost)});
  }
}

absl::Status MarkAllocator::ModelRound(const Observation& observation, ActionSink& sink) {
  Reconcile(observation);
  MeasureDemand(observation);
  MonitorSlo(observation, sink);
  LoadAssigned(observation, sink);
  PublishWeights(observation, sink);
  return absl::OkStatus();
}

absl::Status MarkAllocator::ClusterRound(const Observation& observation, ActionSink& sink) {
  Reconcile(observation);
  std::set<std::string> kept;
  absl::Status status;
  for (const std::string& app : Apps(observation)) {
    status.Update(PlanApp(observation, app, kept, sink));
  }
  Release(observation, kept, sink);
  return status;
}

absl::Status MarkAllocator::PlanApp(const Observation& observation, const std::string& app_name,
                                    std::set<std::string>& kept, ActionSink& sink) {
  const Nanos unit = options_.mark.windows.unit;
  const Nanos now = observation.now;
  std::vector<policy::ProvisionedType> types;
  for (const WorkerType& t : observation.types) {
    std::optional<Choice> choice = Choose(observation, app_name, t.name);
    if (!choice.has_value()) continue;
    policy::ProvisionedType p;
    p.name = t.name;
    p.capacity_qps = choice->capacity();
    // The price in force now: a spot type's follows its trace, and
    // Algorithm 1 does not tell the markets apart otherwise (MArk §4.5).
    p.price_per_unit = t.PriceAt(now) * ToSeconds(unit) / 3600;
    p.billing_units = std::max(1, CeilUnits(t.billing_unit, unit));
    // The paid units from launch to serving are in the plan's price already
    // (it pays from the launch), so no further overhead.
    p.launch_units = CeilUnits(LaunchTime(t.name), unit);
    if (auto max = options_.max_workers.find(t.name); max != options_.max_workers.end()) {
      // The ceiling less the workers other apps hold: this app's own (and
      // the free ones) are candidates the plan counts as it uses them.
      p.max_workers = std::max(0, max->second - HeldByOthers(t.name, app_name, kept));
    }
    types.push_back(std::move(p));
  }
  if (types.empty()) return absl::OkStatus();  // nothing of the app is profiled yet
  auto type_index = [&](const std::string& name) {
    for (size_t i = 0; i < types.size(); ++i) {
      if (types[i].name == name) return static_cast<int>(i);
    }
    return -1;
  };

  // The candidates already paid for: the app's own, its launches on the
  // way, and the workers no app has taken.
  std::vector<policy::RunningWorker> running;
  std::vector<std::string> running_ids;  // "" for a launch on the way
  for (const auto& [id, w] : known_) {
    const int t = type_index(w.type);
    if (t < 0 || kept.count(id) > 0 || (w.app != app_name && !w.app.empty())) continue;
    const int paid = FloorUnits(PaidUntil(w, now, observation) - now, unit);
    running.push_back({static_cast<int>(running.size()), t, paid, 0});
    running_ids.push_back(id);
  }
  std::vector<Pending*> unowned;  // by `running` index, for the launches of no app
  unowned.resize(running.size(), nullptr);
  for (Pending& p : pending_) {
    const int t = type_index(p.type);
    if ((p.app != app_name && !p.app.empty()) || t < 0) continue;
    KnownWorker launched;
    launched.type = p.type;
    launched.paid_from = p.at;
    const int paid = FloorUnits(PaidUntil(launched, now, observation) - now, unit);
    const int ready_in = CeilUnits(p.at + LaunchTime(p.type) - now, unit);
    running.push_back({static_cast<int>(running.size()), t, paid, ready_in});
    running_ids.push_back("");
    unowned.push_back(p.app.empty() ? &p : nullptr);
  }

  App& app = AppState(app_name);
  int soonest = types.front().launch_units;
  for (const policy::ProvisionedType& t : types) soonest = std::min(soonest, t.launch_units);
  absl::StatusOr<std::vector<double>> predicted = Forecast(app_name, app, soonest);
  if (!predicted.ok()) return predicted.status();
  const std::vector<double>& forecast = *predicted;
  absl::StatusOr<policy::ProvisioningPlan> plan =
      policy::PlanProvisioning(forecast, types, running);
  if (!plan.ok()) return plan.status();

  AppPlan summary;
  summary.at = now;
  summary.forecast_qps = forecast;
  summary.uncovered_qps = plan->uncovered_qps;
  for (int r : plan->keep) {
    const std::string& id = running_ids[static_cast<size_t>(r)];
    summary.capacity_qps += types[static_cast<size_t>(running[static_cast<size_t>(r)].type)]
                                .capacity_qps;
    if (id.empty()) {
      // A launch of no app's the plan uses becomes this app's.
      if (Pending* p = unowned[static_cast<size_t>(r)]; p != nullptr) p->app = app_name;
      continue;
    }
    kept.insert(id);
    KnownWorker& w = known_.at(id);
    if (w.app.empty()) {
      w.app = app_name;
      sink.Record({now, "assign", id, app_name, 0, "the plan uses this idle worker"});
    }
  }
  for (int t : plan->launch_now) {
    const policy::ProvisionedType& type = types[static_cast<size_t>(t)];
    if (auto max = options_.max_workers.find(type.name);
        max != options_.max_workers.end() && WorkersOf(observation, type.name) >= max->second) {
      // A worker the plan gave up is still draining: launch once it is gone.
      continue;
    }
    sink.AddWorker(type.name);
    pending_.push_back({app_name, type.name, now});
    summary.capacity_qps += type.capacity_qps;
    ++summary.launched;
    sink.Record({now, "launch", type.name, app_name, 0,
                 absl::StrFormat("forecast %.1f qps now, %.1f at the peak of the next %d units; "
                                 "%.1f qps per worker",
                                 forecast.front(),
                                 *std::max_element(forecast.begin(), forecast.end()),
                                 static_cast<int>(forecast.size()), type.capacity_qps)});
  }
  // Once a unit, what the plan rests on, so that an operator can see why
  // a worker is kept or launched (the forecast of the coming units, the
  // SLO monitor's boost included).
  if (app.logged_unit != app.peaks.peaks().size()) {
    app.logged_unit = app.peaks.peaks().size();
    std::string coming;
    for (size_t u = 0; u < std::min<size_t>(forecast.size(), 8); ++u) {
      absl::StrAppend(&coming, u == 0 ? "" : " ", absl::StrFormat("%.0f", forecast[u]));
    }
    sink.Record({now, "plan", app_name, "", 0,
                 absl::StrFormat("forecast %s qps over the coming %d units (boost %+.0f%%); "
                                 "keeps %d worker(s), launches %d now and %d later: %.0f qps",
                                 coming, static_cast<int>(std::min<size_t>(forecast.size(), 8)),
                                 app.boost * 100, static_cast<int>(plan->keep.size()),
                                 summary.launched, static_cast<int>(plan->launch_later.size()),
                                 summary.capacity_qps)});
  }
  app.plan = std::move(summary);
  return absl::OkStatus();
}

void MarkAllocator::Release(const Observation& observation, const std::set<std::string>& kept,
                            ActionSink& sink) {
  const Nanos now = observation.now;
  std::map<std::string, int> serving;  // by type: up and not draining
  for (const auto& [id, w] : known_) serving[w.type] += !w.draining_since.has_value();
  auto above_minimum = [&](const std::string& type) {
    auto min = options_.min_workers.find(type);
    return min == options_.min_workers.end() || serving[type] > min->second;
  };
  for (auto it = known_.begin(); it != known_.end();) {
    const std::string& id = it->first;
    KnownWorker& w = it->second;
    if (kept.count(id) > 0) {
      if (w.draining_since.has_value()) ++serving[w.type];
      w.unneeded_since.reset();
      w.draining_since.reset();
      ++it;
      continue;
    }
    if (!w.unneeded_since.has_value()) w.unneeded_since = now;
    if (w.draining_since.has_value()) {
      const ObservedWorker* seen = observation.FindWorker(id);
      const bool idle = seen == nullptr || seen->idle_since.has_value() || seen->instances.empty();
      if ((idle || now - *w.draining_since >= options_.mark.release_margin) &&
          sink.RetireWorker(id)) {
        sink.Record({now, "retire", id, w.app, 0,
                     idle ? "unneeded, its paid time ending, idle"
                          : "unneeded, its paid time ending"});
        it = known_.erase(it);
        continue;
      }
    } else if (now - *w.unneeded_since >= options_.mark.cool_down &&
               PaidUntil(w, now, observation) - now <= options_.mark.release_margin &&
               above_minimum(w.type)) {
      w.draining_since = now;
      --serving[w.type];
      sink.Record({now, "drain", id, w.app, 0,
                   absl::StrFormat("unneeded for %.0f s, its paid time ending",
                                   ToSeconds(now - *w.unneeded_since))});
    }
    ++it;
  }
}

void MarkAllocator::LoadAssigned(const Observation& observation, ActionSink& sink) {
  for (const ObservedWorker& w : observation.workers) {
    auto known = known_.find(w.id);
    if (w.starting || known == known_.end() || known->second.app.empty() ||
        known->second.draining_since.has_value() || busy_.Contains(w.id)) {
      continue;
    }
    const std::optional<Choice> choice = Choose(observation, known->second.app, w.type);
    if (!choice.has_value()) continue;
    int have = 0;
    std::vector<std::pair<VariantKey, int>> others;
    for (const ObservedInstance& inst : w.instances) {
      if (inst.key == choice->key) {
        have += inst.ready + inst.loading;
      } else if (inst.ready > 0 && inst.takes_queries) {
        others.push_back({inst.key, inst.ready});
      }
    }
    if (have >= choice->replicas) continue;
    // A worker holds one app's variant: what it held before goes first, as
    // its cores are the new variant's (MArk sizes a worker for one model).
    for (const auto& [key, replicas] : others) {
      sink.Remove(w.id, key, replicas);
      sink.Record({observation.now, "unload", w.id, key.ToString(), replicas,
                   absl::StrCat("the worker now serves ", known->second.app)});
    }
    sink.Load(w.id, choice->key, choice->replicas - have, {}, busy_.Mark(w.id));
    sink.Record({observation.now, "load", w.id, choice->key.ToString(), choice->replicas - have,
                 absl::StrFormat("%s's variant for %s: %.1f qps within its objective",
                                 known->second.app, w.type, choice->capacity())});
  }
}

void MarkAllocator::PublishWeights(const Observation& observation, ActionSink& sink) {
  std::vector<RouteWeight> weights;
  std::vector<std::tuple<std::string, std::string, double>> published;
  for (const ObservedWorker& w : observation.workers) {
    auto known = known_.find(w.id);
    if (w.starting || known == known_.end() || known->second.draining_since.has_value()) {
      continue;
    }
    for (const ObservedInstance& inst : w.instances) {
      const ModelOption* model = observation.FindModel(inst.key.model);
      const VariantOption* option =
          model != nullptr ? model->Find(inst.key.variant, w.type) : nullptr;
      if (inst.ready <= 0 || !inst.takes_queries || option == nullptr ||
          option->profile == nullptr || model->app != known->second.app) {
        continue;
      }
      const double weight = inst.ready * option->profile->SaturationQps(model->slo_ms);
      if (weight <= 0) continue;
      weights.push_back({w.id, inst.key, weight});
      published.emplace_back(w.id, inst.key.ToString(), weight);
    }
  }
  std::sort(published.begin(), published.end());
  if (published == published_) return;
  published_ = std::move(published);
  sink.SetRouteWeights(std::move(weights));
}

}  // namespace maitre::control
