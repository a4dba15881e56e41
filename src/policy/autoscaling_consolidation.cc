#include "policy/autoscaling_consolidation.h"

#include <algorithm>
#include <limits>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace maitre::policy {
namespace {

constexpr double kEps = 1e-9;

// One model's replicas on one worker.
struct Holding {
  const std::string* worker = nullptr;
  const ScalingModel* model = nullptr;
  double capacity_qps = 0;
  double cost_per_s = 0;   // of its ready and loading replicas
  double load_s = 0;       // the longest load time among its running variants
  double best_accuracy = -std::numeric_limits<double>::infinity();
  int replicas = 0;  // ready and loading
  bool ready = false;  // some replica is ready
  bool loading = false;
  bool keep = false;  // may not be given up now
};

// A worker's replicas share its cores: where selection loaded more than the
// cores hold (it does not count cores), they deliver the cores' worth.
Holding Summarise(const std::string& worker, const ModelScalingSnapshot& s,
                  const ScalingModel& m) {
  const double used = UsedCores(s);
  const double share = s.cores > 0 && used > s.cores ? s.cores / used : 1.0;
  Holding h{&worker, &m, ModelCapacityQps(m) * share};
  for (const ScalingVariant& v : m.variants) {
    int held = v.replicas + v.loading;
    if (held == 0) continue;
    h.replicas += held;
    h.cost_per_s += held * v.cost_per_s;
    h.load_s = std::max(h.load_s, v.load_s);
    h.best_accuracy = std::max(h.best_accuracy, v.accuracy);
    h.ready |= v.replicas > 0;
    h.loading |= v.loading > 0;
  }
  return h;
}

}  // namespace

absl::StatusOr<ConsolidationDecision> DecideConsolidation(
    const std::vector<WorkerScalingSnapshot>& workers, const ConsolidationState& previous,
    Nanos now, const ModelAutoscalerOptions& o, const ConsolidationOptions& c) {
  std::set<std::string> names;
  std::map<std::string, std::vector<Holding>> by_model;
  for (const WorkerScalingSnapshot& w : workers) {
    if (!names.insert(w.worker).second) {
      return absl::InvalidArgumentError(absl::StrCat("worker ", w.worker, " appears twice"));
    }
    if (absl::Status valid = ValidateScalingSnapshot(w.snapshot); !valid.ok()) return valid;
    for (const ScalingModel& m : w.snapshot.models) {
      Holding h = Summarise(w.worker, w.snapshot, m);
      h.keep = w.keep.count(m.model) > 0;
      by_model[m.model].push_back(h);
    }
  }

  const Nanos min_wait = std::max(o.min_scale_down_wait, o.min_consolidation_wait);
  ConsolidationDecision decision;
  for (const auto& [model, holdings] : by_model) {
    double load = 0, capacity = 0;
    Nanos horizon = min_wait;
    bool loading = false;
    std::vector<const Holding*> held;  // workers that hold replicas of the model
    for (const Holding& h : holdings) {
      load += h.model->load_qps;
      capacity += h.capacity_qps;
      horizon = std::max(horizon, FromSeconds(h.load_s));
      loading |= h.loading;
      if (h.replicas > 0) held.push_back(&h);
    }
    auto it = previous.history.find(model);
    std::vector<ModelAutoscalerState::LoadSample>& history = decision.state.history[model] =
        AppendLoadSample(it != previous.history.end() ? it->second
                                                      : std::vector<ModelAutoscalerState::LoadSample>{},
                         {now, load}, std::min(horizon, o.history_limit));

    // Hysteresis: how the model's workers changed since the last call.
    ConsolidationState::Spread& spread = decision.state.spread[model];
    {
      auto last = previous.spread.find(model);
      const ConsolidationState::Spread before =
          last != previous.spread.end() ? last->second : ConsolidationState::Spread{};
      spread.marks = before.marks;
      // Forgotten marks first, then one per worker gone (the latest first),
      // then one per worker added while the model was served elsewhere.
      spread.marks.erase(std::remove_if(spread.marks.begin(), spread.marks.end(),
                                        [&](const ModelAutoscalerState::LoadSample& m) {
                                          return c.spread_memory <= 0 ||
                                                 now - m.at >= c.spread_memory;
                                        }),
                         spread.marks.end());
      for (const Holding* h : held) spread.workers.insert(*h->worker);
      for (const std::string& w : before.workers) {
        if (spread.workers.count(w) == 0 && !spread.marks.empty()) spread.marks.pop_back();
      }
      const double spread_at = PeakLoadOver(history, now, min_wait).value_or(load);
      for (const std::string& w : spread.workers) {
        if (before.workers.count(w) == 0 && before.served && !before.workers.empty() &&
            c.spread_memory > 0) {
          spread.marks.push_back({now, spread_at});
        }
      }
      for (const Holding* h : held) spread.served |= h->ready;
    }

    if (loading || held.size() < 2) continue;

    const Holding* best = nullptr;
    double best_peak = 0;
    for (const Holding* h : held) {
      double rest_accuracy = -std::numeric_limits<double>::infinity();
      for (const Holding* other : held) {
        if (other != h) rest_accuracy = std::max(rest_accuracy, other->best_accuracy);
      }
      if (rest_accuracy < h->best_accuracy - kEps) continue;
      Nanos wait = std::min(std::max(min_wait, FromSeconds(h->load_s)), o.history_limit);
      std::optional<double> peak = PeakLoadOver(history, now, wait);
      if (!peak.has_value() || capacity - h->capacity_qps < o.scale_down_headroom * *peak - kEps) {
        continue;
      }
      // The load the model last spread at has not fallen clearly.
      if (!spread.marks.empty() &&
          o.scale_down_headroom * *peak > spread.marks.back().load_qps + kEps) {
        continue;
      }
      auto rank = [](const Holding* x) {
        return std::make_tuple(-x->cost_per_s, x->capacity_qps, *x->worker);
      };
      if (best == nullptr || rank(h) < rank(best)) {
        best = h;
        best_peak = *peak;
      }
    }
    // The worker that should go may not yet: wait for it rather than give
    // up a cheaper one (selection had loaded a GPU engine a few seconds
    // before, at 4 qps, and the CPU instance went instead).
    if (best == nullptr || best->keep) continue;
    // The worker goes now: the next call must see it come back, however
    // soon, as a worker added (a reload inside one round is a spread too).
    spread.workers.erase(*best->worker);
    if (!spread.marks.empty()) spread.marks.pop_back();
    VacateAction action;
    action.model = model;
    action.worker = *best->worker;
    action.saves_per_s = best->cost_per_s;
    for (const ScalingVariant& v : best->model->variants) {
      if (v.replicas > 0) action.replicas.push_back({v.variant, v.replicas});
    }
    action.reason = absl::StrFormat(
        "its other workers serve %.1f qps, >= %.2f x the peak load %.1f qps of the wait; its "
        "replicas here cost %.3g $/s",
        capacity - best->capacity_qps, o.scale_down_headroom, best_peak, action.saves_per_s);
    decision.actions.push_back(std::move(action));
  }
  return decision;
}

}  // namespace maitre::policy
