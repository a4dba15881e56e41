#include "policy/autoscaling_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace maitre::policy {
namespace {

constexpr double kEps = 1e-9;
constexpr double kInfinity = std::numeric_limits<double>::infinity();
constexpr int kNoReplicas = std::numeric_limits<int>::max();
constexpr int kMaxTopUps = 64;
using Kind = ModelScaleAction::Kind;

bool Running(const ScalingVariant& v) { return v.replicas + v.loading > 0; }

int TotalReplicas(const ScalingModel& m) {
  int n = 0;
  for (const ScalingVariant& v : m.variants) n += v.replicas + v.loading;
  return n;
}

bool AnyLoading(const ScalingModel& m) {
  for (const ScalingVariant& v : m.variants) {
    if (v.loading > 0) return true;
  }
  return false;
}

// Replicas of `per_replica_qps` each that cover `missing_qps`; kNoReplicas
// when a replica serves nothing. The small tolerance keeps 10/5 at 2.
int ReplicasFor(double missing_qps, double per_replica_qps) {
  if (missing_qps <= kEps) return 0;
  if (per_replica_qps <= 0) return kNoReplicas;
  double n = std::ceil(missing_qps / per_replica_qps - 1e-9);
  return n >= kNoReplicas ? kNoReplicas : static_cast<int>(n);
}

struct Usage {
  double cores = 0;
  double memory_mb = 0;
};

bool Fits(const ModelScalingSnapshot& s, const Usage& used, const ScalingVariant& v, int add) {
  if (used.cores + add * v.cores > s.cores + kEps) return false;
  if (s.memory_mb > 0 && used.memory_mb + add * v.memory_mb > s.memory_mb + kEps) return false;
  return true;
}

void Take(Usage& used, const ScalingVariant& v, int add) {
  used.cores += add * v.cores;
  used.memory_mb += add * v.memory_mb;
}

// A candidate move on one model, by variant index.
struct Move {
  Kind kind = Kind::kReplicate;
  int from = -1;
  int remove = 0;
  int to = -1;
  int add = 0;
  double cost = 0;  // of the whole move
  // A scale-up may top up with a second variant: `add2` replicas of `to2`
  // (kReplicate or kAddVariant).
  Kind kind2 = Kind::kReplicate;
  int to2 = -1;
  int add2 = 0;
  // A consolidation also unloads these (variant index, replicas).
  std::vector<std::pair<int, int>> also = {};
};

double LoadCost(const ScalingVariant& v, int add, double lambda) {
  return v.cost_per_s * add * (1 + lambda * v.load_s);
}

// How much a move disturbs what runs: plain replica changes first, then a
// new variant alongside, then a switch.
int Disturbance(Kind kind) {
  switch (kind) {
    case Kind::kReplicate:
    case Kind::kRemoveReplica:
      return 0;
    case Kind::kAddVariant:
      return 1;
    default:
      return 2;
  }
}

// Σ field_v·δ_v of a move: what it changes in one per-replica quantity of
// its variants (C_v: the running cost; saturation_qps: the capacity).
double Change(const ScalingModel& m, const Move& x, double ScalingVariant::*field) {
  double sum = 0;
  if (x.to >= 0) sum += x.add * m.variants[x.to].*field;
  if (x.to2 >= 0) sum += x.add2 * m.variants[x.to2].*field;
  if (x.from >= 0) sum -= x.remove * m.variants[x.from].*field;
  for (auto [u, n] : x.also) sum -= n * m.variants[u].*field;
  return sum;
}

// Σ C_v·δ_v of a move: what it changes in the running cost, loading
// penalty aside.
double RunningCost(const ScalingModel& m, const Move& x) {
  return Change(m, x, &ScalingVariant::cost_per_s);
}

// Σ saturation_qps·δ_v: the capacity a move adds (negative: removes).
double CapacityChange(const ScalingModel& m, const Move& x) {
  return Change(m, x, &ScalingVariant::saturation_qps);
}

// The longest load time among the variants a move loads (0: it loads none).
double LongestLoadS(const ScalingModel& m, const Move& x) {
  double t = 0;
  if (x.to >= 0 && x.add > 0) t = std::max(t, m.variants[x.to].load_s);
  if (x.to2 >= 0 && x.add2 > 0) t = std::max(t, m.variants[x.to2].load_s);
  return t;
}

bool Near(double a, double b) {
  return std::abs(a - b) <= 1e-9 * std::max({1e-12, std::abs(a), std::abs(b)});
}

// The capacity tie (ModelAutoscalerOptions::capacity_tie_load_s): equal
// running costs, quick loads on both sides, different capacities. Then the
// move that leaves more capacity goes first, whatever its load time.
std::optional<bool> CapacityTie(const Move& a, const Move& b, const ScalingModel& m,
                                const ModelAutoscalerOptions& o) {
  if (!Near(RunningCost(m, a), RunningCost(m, b))) return std::nullopt;
  if (LongestLoadS(m, a) > o.capacity_tie_load_s || LongestLoadS(m, b) > o.capacity_tie_load_s) {
    return std::nullopt;
  }
  const double qa = CapacityChange(m, a), qb = CapacityChange(m, b);
  if (Near(qa, qb)) return std::nullopt;
  return qa > qb;
}

// Orders candidate moves by cost alone: cheaper first; on a tie, the one
// that disturbs less, then fewer replicas loaded, then by name so the choice
// never depends on input order.
bool Cheaper(const Move& a, const Move& b, const ScalingModel& m) {
  if (!Near(a.cost, b.cost)) return a.cost < b.cost;
  auto disturbance = [](const Move& x) {
    return Disturbance(x.kind) + (x.to2 >= 0 ? 1 + Disturbance(x.kind2) : 0) +
           static_cast<int>(x.also.size());
  };
  if (disturbance(a) != disturbance(b)) return disturbance(a) < disturbance(b);
  if (a.add + a.add2 != b.add + b.add2) return a.add + a.add2 < b.add + b.add2;
  if (a.remove != b.remove) return a.remove < b.remove;
  auto name = [&m](int i) { return i < 0 ? std::string() : m.variants[i].variant; };
  return std::make_tuple(name(a.to), name(a.from)) < std::make_tuple(name(b.to), name(b.from));
}

// The order moves are chosen in: the capacity tie first, then Cheaper.
bool Better(const Move& a, const Move& b, const ScalingModel& m, const ModelAutoscalerOptions& o) {
  if (std::optional<bool> tie = CapacityTie(a, b, m, o)) return *tie;
  return Cheaper(a, b, m);
}

// Whether `mv` fits in the worker with `used` taken: what it loads on top of
// everything there now, in memory (the old and the new replicas are both
// loaded until the new ones serve), and in cores once it is done (a loading
// replica runs no batches, and the replicas it replaces are drained as soon
// as the new ones serve: counting both would forbid any switch on a full
// worker, e.g. every switch on a one-core worker).
bool FitsMove(const ModelScalingSnapshot& s, Usage used, const ScalingModel& m, const Move& mv) {
  if (mv.from >= 0) used.cores -= mv.remove * m.variants[mv.from].cores;
  for (auto [u, n] : mv.also) used.cores -= n * m.variants[u].cores;
  if (mv.to2 >= 0) {
    if (!Fits(s, used, m.variants[mv.to2], mv.add2)) return false;
    Take(used, m.variants[mv.to2], mv.add2);
  }
  return mv.to < 0 || Fits(s, used, m.variants[mv.to], mv.add);
}

// C_v / saturation_qps: what a unit of throughput costs on `v` (infinite
// when it serves nothing here).
double CostPerQps(const ScalingVariant& v) {
  return v.saturation_qps > 0 ? v.cost_per_s / v.saturation_qps
                              : std::numeric_limits<double>::infinity();
}

// Replacing `j` ready replicas of `u` with enough of `w` that the model has
// `required` qps: the move, or nullopt when `w` cannot get there.
std::optional<Move> Switch(const ScalingModel& m, int u, int j, int w, double required,
                           const ModelAutoscalerOptions& o) {
  const ScalingVariant& from = m.variants[u];
  const ScalingVariant& to = m.variants[w];
  double rest = ModelCapacityQps(m) - j * from.saturation_qps;
  int k = std::max({ReplicasFor(required - rest, to.saturation_qps), 1,
                    o.min_replicas_per_model - (TotalReplicas(m) - j)});
  if (k == kNoReplicas) return std::nullopt;
  Kind kind = to.saturation_qps > from.saturation_qps ? Kind::kUpgrade : Kind::kDowngrade;
  return Move{kind, u, j, w, k, LoadCost(to, k, o.lambda_per_s) - from.cost_per_s * j};
}

// The variants a consolidation into `w` replaces: every other variant with
// ready replicas (replicas still loading finish loading and stay). Empty
// unless there are at least two (one is a plain switch).
std::vector<int> ConsolidationSet(const ScalingModel& m, int w) {
  std::vector<int> from;
  for (int u = 0; u < static_cast<int>(m.variants.size()); ++u) {
    if (u != w && m.variants[u].replicas > 0) from.push_back(u);
  }
  if (from.size() < 2) from.clear();
  return from;
}

// Replacing every replica of the variants in `from` with enough of `w` that
// the model has `required` qps.
std::optional<Move> Consolidate(const ScalingModel& m, const std::vector<int>& from, int w,
                                double required, const ModelAutoscalerOptions& o) {
  if (from.empty()) return std::nullopt;
  const ScalingVariant& to = m.variants[w];
  double rest = ModelCapacityQps(m), saved = 0, fastest = 0;
  int rest_replicas = TotalReplicas(m);
  for (int u : from) {
    const ScalingVariant& v = m.variants[u];
    rest -= v.replicas * v.saturation_qps;
    rest_replicas -= v.replicas;
    saved += v.cost_per_s * v.replicas;
    fastest = std::max(fastest, v.saturation_qps);
  }
  int k = std::max({ReplicasFor(required - rest, to.saturation_qps), 1,
                    o.min_replicas_per_model - rest_replicas});
  if (k == kNoReplicas) return std::nullopt;
  Move mv{to.saturation_qps > fastest ? Kind::kUpgrade : Kind::kDowngrade,
          from[0], m.variants[from[0]].replicas, w, k,
          LoadCost(to, k, o.lambda_per_s) - saved};
  for (size_t i = 1; i < from.size(); ++i) mv.also.push_back({from[i], m.variants[from[i]].replicas});
  return mv;
}

ModelScaleAction ToAction(const ScalingModel& m, const Move& move, std::string reason) {
  ModelScaleAction a;
  a.kind = move.kind;
  a.model = m.model;
  if (move.from >= 0) a.from_variant = m.variants[move.from].variant;
  a.remove = move.remove;
  if (move.to >= 0) {
    const ScalingVariant& to = m.variants[move.to];
    a.to_variant = to.variant;
    a.cores_per_replica = to.cores;
    a.memory_mb_per_replica = to.memory_mb;
  }
  for (auto [u, n] : move.also) a.also_remove.push_back({m.variants[u].variant, n});
  a.add = move.add;
  a.cost_per_s = move.cost;
  a.reason = std::move(reason);
  return a;
}

std::string Describe(const ScalingModel& m, const Move& move) {
  auto name = [&m](int i) { return m.variants[i].variant; };
  if (move.to2 >= 0) {
    return absl::StrFormat("adding %s x%d and %s x%d", name(move.to), move.add, name(move.to2),
                           move.add2);
  }
  switch (move.kind) {
    case Kind::kReplicate:
      return absl::StrFormat("replicating %s x%d", name(move.to), move.add);
    case Kind::kAddVariant:
      return absl::StrFormat("adding %s x%d alongside", name(move.to), move.add);
    case Kind::kUpgrade:
    case Kind::kDowngrade: {
      std::string from = absl::StrFormat("%s x%d", name(move.from), move.remove);
      for (auto [u, n] : move.also) absl::StrAppendFormat(&from, ", %s x%d", name(u), n);
      return absl::StrFormat("switching %s to %s x%d", from, name(move.to), move.add);
    }
    case Kind::kRemoveReplica:
      return absl::StrFormat("removing one replica of %s", name(move.from));
    case Kind::kNeedsPlacement:
      break;
  }
  return "placing elsewhere";
}

// When the capacity tie chose `chosen` over `cheapest`, a move costing less
// only by its loading penalty: a clause saying so, for the reason; empty
// when the cheapest move was chosen.
std::string CapacityTieClause(const ScalingModel& m, const Move& chosen, const Move& cheapest) {
  if (&chosen == &cheapest || !(cheapest.cost < chosen.cost) || Near(cheapest.cost, chosen.cost)) {
    return "";
  }
  return absl::StrFormat(
      ", chosen for capacity over %s (%.3g $/s cheaper, by load time alone): %+.0f qps against "
      "%+.0f for the same running cost",
      cheapest.kind == Kind::kNeedsPlacement
          ? absl::StrFormat("%s x%d", m.variants[cheapest.to].variant, cheapest.add)
          : Describe(m, cheapest),
      chosen.cost - cheapest.cost, CapacityChange(m, chosen), CapacityChange(m, cheapest));
}

// The move that restores `m`'s headroom at the least cost and fits in the
// worker (one action, or two for a top-up), or a kNeedsPlacement when none
// fits; empty when no scale-up is needed.
std::vector<ModelScaleAction> ScaleUp(const ModelScalingSnapshot& s, const ScalingModel& m,
                                      const ModelAutoscalerOptions& o, Usage& used) {
  double capacity = ModelCapacityQps(m);
  double target = o.slack * m.load_qps;
  if (m.load_qps <= 0 || capacity >= target - kEps) return {};
  double missing = target - capacity;
  double floor = AccuracyFloor(m, o.max_accuracy_drop);
  int total = TotalReplicas(m);

  std::vector<Move> moves;
  for (int w = 0; w < static_cast<int>(m.variants.size()); ++w) {
    const ScalingVariant& to = m.variants[w];
    if (!MayAddReplicas(to, floor)) continue;
    // Add replicas of `to`: of a running variant (or a first variant) this
    // is replication; of another variant alongside, a vertical move.
    Kind kind = Running(to) || total == 0 ? Kind::kReplicate : Kind::kAddVariant;
    if (kind == Kind::kReplicate || o.allow_upgrade) {
      int k = std::max({ReplicasFor(missing, to.saturation_qps), 1,
                        o.min_replicas_per_model - total});
      if (k != kNoReplicas) moves.push_back({kind, -1, 0, w, k, LoadCost(to, k, o.lambda_per_s)});
      // Top-ups: fewer of `to` and the rest from another variant, which
      // avoids paying a whole large replica for a small remainder (or fits
      // where k of `to` would not). Only the last kMaxTopUps counts below k
      // are tried, which bounds the work when replicas are small.
      for (int w2 = 0; w2 < static_cast<int>(m.variants.size()) && k != kNoReplicas; ++w2) {
        const ScalingVariant& to2 = m.variants[w2];
        Kind kind2 = Running(to2) || total == 0 ? Kind::kReplicate : Kind::kAddVariant;
        if (w2 == w || !MayAddReplicas(to2, floor)) continue;
        if (kind2 == Kind::kAddVariant && !o.allow_upgrade) continue;
        for (int a = std::max(1, k - kMaxTopUps); a < k; ++a) {
          int b = ReplicasFor(missing - a * to.saturation_qps, to2.saturation_qps);
          if (b == kNoReplicas || total + a + b < o.min_replicas_per_model) continue;
          Move mv{kind, -1, 0, w, a,
                  LoadCost(to, a, o.lambda_per_s) + LoadCost(to2, b, o.lambda_per_s)};
          mv.kind2 = kind2;
          mv.to2 = w2;
          mv.add2 = b;
          moves.push_back(mv);
        }
      }
    }
    if (!o.allow_upgrade) continue;
    for (int u = 0; u < static_cast<int>(m.variants.size()); ++u) {
      // Only ready replicas are switched from; loading ones finish loading.
      if (u == w || m.variants[u].replicas == 0) continue;
      for (int j = 1; j <= m.variants[u].replicas; ++j) {
        if (auto mv = Switch(m, u, j, w, target, o)) moves.push_back(*mv);
      }
    }
    if (auto mv = Consolidate(m, ConsolidationSet(m, w), w, target, o)) moves.push_back(*mv);
  }

  const Move* best = nullptr;
  const Move* cheapest = nullptr;  // by cost alone, to say when the capacity tie decided
  for (const Move& mv : moves) {
    if (!FitsMove(s, used, m, mv)) continue;
    if (best == nullptr || Better(mv, *best, m, o)) best = &mv;
    if (cheapest == nullptr || Cheaper(mv, *cheapest, m)) cheapest = &mv;
  }
  std::string why = absl::StrFormat("headroom %.3f < slack %.2f at %.1f qps",
                                    capacity / m.load_qps, o.slack, m.load_qps);
  if (best != nullptr) {
    const std::string tie = CapacityTieClause(m, *best, *cheapest);
    std::string reason =
        tie.empty() ? absl::StrFormat("%s: %s costs %.3g $/s, the cheapest move that fits", why,
                                      Describe(m, *best), best->cost)
                    : absl::StrFormat("%s: %s costs %.3g $/s%s", why, Describe(m, *best),
                                      best->cost, tie);
    const ModelScaleAction::Cause cause =
        tie.empty() ? ModelScaleAction::Cause::kHeadroom : ModelScaleAction::Cause::kCapacity;
    Take(used, m.variants[best->to], best->add);
    if (best->to2 < 0) {
      ModelScaleAction action = ToAction(m, *best, reason);
      action.cause = cause;
      return {action};
    }
    // A top-up is two loads; each action carries its own share of the cost.
    Move first = *best, second;
    first.to2 = -1;
    first.cost = LoadCost(m.variants[first.to], first.add, o.lambda_per_s);
    second.kind = best->kind2;
    second.to = best->to2;
    second.add = best->add2;
    second.cost = LoadCost(m.variants[second.to], second.add, o.lambda_per_s);
    Take(used, m.variants[second.to], second.add);
    std::vector<ModelScaleAction> actions = {ToAction(m, first, reason),
                                             ToAction(m, second, reason)};
    for (ModelScaleAction& a : actions) a.cause = cause;
    return actions;
  }

  // Nothing fits here. Ask for the capacity elsewhere, suggesting the
  // cheapest variant to add as this worker type would run it (any accurate
  // enough variant: a new worker has nothing to replace).
  const Move* cheapest_anywhere = nullptr;
  std::vector<Move> additions;
  for (int i = 0; i < static_cast<int>(m.variants.size()); ++i) {
    const ScalingVariant& v = m.variants[i];
    if (!MayAddReplicas(v, floor)) continue;
    int k = ReplicasFor(missing, v.saturation_qps);
    if (k == kNoReplicas) continue;
    additions.push_back({Kind::kNeedsPlacement, -1, 0, i, k, LoadCost(v, k, o.lambda_per_s)});
  }
  const Move* cheapest_by_cost = nullptr;
  for (const Move& mv : additions) {
    if (cheapest_anywhere == nullptr || Better(mv, *cheapest_anywhere, m, o)) {
      cheapest_anywhere = &mv;
    }
    if (cheapest_by_cost == nullptr || Cheaper(mv, *cheapest_by_cost, m)) cheapest_by_cost = &mv;
  }
  Move placement;
  placement.kind = Kind::kNeedsPlacement;
  if (cheapest_anywhere != nullptr) placement = *cheapest_anywhere;
  const std::string tie = cheapest_anywhere != nullptr
                              ? CapacityTieClause(m, *cheapest_anywhere, *cheapest_by_cost)
                              : std::string();
  ModelScaleAction action = ToAction(
      m, placement,
      cheapest_anywhere != nullptr
          ? absl::StrFormat("%s: no move fits in this worker's %.2f cores / %.0f MB%s", why,
                            s.cores, s.memory_mb, tie)
          : absl::StrFormat("%s: no variant of %s meets the SLO on this worker type", why,
                            m.model));
  action.deficit_qps = missing;
  if (!tie.empty()) action.cause = ModelScaleAction::Cause::kCapacity;
  return {action};
}

// A smaller setup that would have sufficed for long enough: the one that
// saves the most. nullopt when none qualifies.
std::optional<ModelScaleAction> ScaleDown(
    const ModelScalingSnapshot& s, const ScalingModel& m, const ModelAutoscalerOptions& o,
    const std::vector<ModelAutoscalerState::LoadSample>& history, Nanos now, Usage& used) {
  if (AnyLoading(m)) return std::nullopt;  // a transition is under way
  double capacity = ModelCapacityQps(m);
  int total = TotalReplicas(m);
  double floor = AccuracyFloor(m, o.max_accuracy_drop);
  auto wait_for = [&o](double load_s) {
    return std::min(std::max(o.min_scale_down_wait, FromSeconds(load_s)), o.history_limit);
  };

  std::vector<Move> moves;
  std::vector<double> peaks;  // the load each move was judged against, for the reason
  for (int u = 0; u < static_cast<int>(m.variants.size()); ++u) {
    const ScalingVariant& from = m.variants[u];
    if (from.replicas == 0) continue;
    if (total - 1 >= o.min_replicas_per_model) {
      std::optional<double> peak = PeakLoadOver(history, now, wait_for(from.load_s));
      if (peak.has_value() &&
          capacity - from.saturation_qps >= o.scale_down_headroom * *peak - kEps) {
        moves.push_back({Kind::kRemoveReplica, u, 1, -1, 0, -from.cost_per_s});
        peaks.push_back(*peak);
      }
    }
    if (!o.allow_downgrade) continue;
    for (int w = 0; w < static_cast<int>(m.variants.size()); ++w) {
      const ScalingVariant& to = m.variants[w];
      if (w == u || !MayAddReplicas(to, floor)) continue;
      std::optional<double> peak =
          PeakLoadOver(history, now, wait_for(std::max(from.load_s, to.load_s)));
      if (!peak.has_value()) continue;
      for (int j = 1; j <= from.replicas; ++j) {
        std::optional<Move> mv = Switch(m, u, j, w, o.scale_down_headroom * *peak, o);
        // Only a switch that pays for its own loading is worth making.
        if (!mv.has_value() || mv->cost >= -kEps * std::max(1e-12, from.cost_per_s)) continue;
        if (!FitsMove(s, used, m, *mv)) continue;
        moves.push_back(*mv);
        peaks.push_back(*peak);
      }
    }
  }
  for (int w = 0; o.allow_downgrade && w < static_cast<int>(m.variants.size()); ++w) {
    const ScalingVariant& to = m.variants[w];
    std::vector<int> from = ConsolidationSet(m, w);
    if (from.empty() || !MayAddReplicas(to, floor)) continue;
    double load_s = to.load_s;
    for (int u : from) load_s = std::max(load_s, m.variants[u].load_s);
    std::optional<double> peak = PeakLoadOver(history, now, wait_for(load_s));
    if (!peak.has_value()) continue;
    std::optional<Move> mv = Consolidate(m, from, w, o.scale_down_headroom * *peak, o);
    if (!mv.has_value() || mv->cost >= -kEps * 1e-12 || !FitsMove(s, used, m, *mv)) continue;
    moves.push_back(*mv);
    peaks.push_back(*peak);
  }
  int best = -1;
  for (int i = 0; i < static_cast<int>(moves.size()); ++i) {
    if (best < 0 || Better(moves[i], moves[best], m, o)) best = i;
  }
  if (best < 0) return std::nullopt;
  const Move& mv = moves[best];
  if (mv.to >= 0) Take(used, m.variants[mv.to], mv.add);
  ModelScaleAction action = ToAction(
      m, mv,
      absl::StrFormat("the smaller setup keeps headroom >= %.2f over the peak load %.1f qps "
                      "of its wait: %s saves %.3g $/s",
                      o.scale_down_headroom, peaks[best], Describe(m, mv), -mv.cost));
  action.cause = ModelScaleAction::Cause::kSavings;
  return action;
}

// The least of `field` over the samples of the last `window`, or nullopt when
// the history does not reach back that far yet.
std::optional<double> LeastOver(const std::vector<ModelAutoscalerState::LoadSample>& history,
                                Nanos now, Nanos window,
                                double ModelAutoscalerState::LoadSample::*field) {
  if (history.empty() || history.front().at > now - window) return std::nullopt;
  double least = std::numeric_limits<double>::infinity();
  for (const auto& sample : history) {
    if (sample.at >= now - window) least = std::min(least, sample.*field);
  }
  return std::isinf(least) ? std::nullopt : std::optional<double>(least);
}

// The capacity switch (ModelAutoscalerOptions::capacity_switch_*): for a
// model that needs neither more nor less, under high load (by the profiles,
// the least load over the wait / the replicas' capacity; as measured, the
// least busy share over the wait), replace the
// replicas that carry the load at `capacity_switch_gain` times the cost per
// unit of throughput of the best variant w by enough of w for
// `scale_down_headroom` over the peak of the wait, when that costs no more
// to run and fits. Among candidate w: the lowest cost per qps, then the
// larger saturation, the shorter load, the name. nullopt when none
// qualifies.
std::optional<ModelScaleAction> CapacitySwitch(
    const ModelScalingSnapshot& s, const ScalingModel& m, const ModelAutoscalerOptions& o,
    const std::vector<ModelAutoscalerState::LoadSample>& history, Nanos now, Usage& used) {
  if (!o.allow_upgrade || !(o.capacity_switch_utilisation < kInfinity) || AnyLoading(m) ||
      m.load_qps <= 0) {
    return std::nullopt;
  }
  const double capacity = ModelCapacityQps(m);
  if (!(capacity > 0)) return std::nullopt;
  const int total = TotalReplicas(m);
  const double floor = AccuracyFloor(m, o.max_accuracy_drop);
  struct Candidate {
    Move move;
    double least = 0, peak = 0;
    double busy = 0;  // the higher of the two readings of how busy
    Nanos wait = 0;
  };
  std::optional<Candidate> best;
  auto better = [&m](const Candidate& a, const Candidate& b) {
    const ScalingVariant& va = m.variants[a.move.to];
    const ScalingVariant& vb = m.variants[b.move.to];
    return std::make_tuple(CostPerQps(va), -va.saturation_qps, va.load_s, va.variant) <
           std::make_tuple(CostPerQps(vb), -vb.saturation_qps, vb.load_s, vb.variant);
  };
  for (int w = 0; w < static_cast<int>(m.variants.size()); ++w) {
    const ScalingVariant& to = m.variants[w];
    if (!MayAddReplicas(to, floor)) continue;
    const double q = CostPerQps(to);
    // The replicas worth replacing: of variants `gain` times dearer per qps.
    std::vector<int> from;
    double load_s = to.load_s, replaced_qps = 0, replaced_cost = 0;
    int replaced = 0;
    for (int u = 0; u < static_cast<int>(m.variants.size()); ++u) {
      const ScalingVariant& v = m.variants[u];
      if (u == w || v.replicas == 0) continue;
      const double qu = CostPerQps(v);
      if (!(qu > q) || qu < o.capacity_switch_gain * q) continue;
      from.push_back(u);
      load_s = std::max(load_s, v.load_s);
      replaced_qps += v.replicas * v.saturation_qps;
      replaced_cost += v.replicas * v.cost_per_s;
      replaced += v.replicas;
    }
    if (from.empty()) continue;
    const Nanos wait =
        std::min(std::max(o.min_scale_down_wait, FromSeconds(load_s)), o.history_limit);
    using Sample = ModelAutoscalerState::LoadSample;
    const std::optional<double> least = LeastOver(history, now, wait, &Sample::load_qps);
    const std::optional<double> least_busy = LeastOver(history, now, wait, &Sample::busy);
    const std::optional<double> peak = PeakLoadOver(history, now, wait);
    if (!least.has_value() || !least_busy.has_value() || !peak.has_value()) continue;
    const double busy = std::max(*least / capacity, *least_busy);
    if (busy < o.capacity_switch_utilisation) continue;  // not high load
    const double rest = capacity - replaced_qps;
    int k = std::max({ReplicasFor(o.scale_down_headroom * *peak - rest, to.saturation_qps),
                      o.min_replicas_per_model - (total - replaced), 0});
    if (k == kNoReplicas) continue;
    if (to.replicas + to.loading == 0) k = std::max(k, 1);
    // No dearer to run than what it replaces.
    if (k * to.cost_per_s > replaced_cost + 1e-9 * std::max(1e-12, replaced_cost)) continue;
    Move mv{to.saturation_qps > m.variants[from[0]].saturation_qps ? Kind::kUpgrade
                                                                   : Kind::kDowngrade,
            from[0], m.variants[from[0]].replicas, w, k,
            LoadCost(to, k, o.lambda_per_s) - replaced_cost};
    for (size_t i = 1; i < from.size(); ++i) {
      mv.also.push_back({from[i], m.variants[from[i]].replicas});
    }
    if (!FitsMove(s, used, m, mv)) continue;
    Candidate c{mv, *least, *peak, busy, wait};
    if (!best.has_value() || better(c, *best)) best = c;
  }
  if (!best.has_value()) return std::nullopt;
  const Move& mv = best->move;
  const ScalingVariant& to = m.variants[mv.to];
  std::vector<int> replaced_variants = {mv.from};
  for (auto [u, n] : mv.also) replaced_variants.push_back(u);
  std::string replaced;
  for (int u : replaced_variants) {
    const ScalingVariant& v = m.variants[u];
    absl::StrAppendFormat(&replaced, "%s%s (%.0f qps per replica, %.3g $ per million queries)",
                          replaced.empty() ? "" : ", ", v.variant, v.saturation_qps,
                          CostPerQps(v) * 1e6);
  }
  Take(used, to, mv.add);
  ModelScaleAction action = ToAction(
      m, mv,
      absl::StrFormat(
          "capacity under load: at least %.1f qps over the last %.0f s kept its replicas %.0f%% "
          "busy%s (>= %.0f%%); %s carries the load at %.3g $ per million queries (%.0f qps per "
          "replica), %.2fx cheaper per query than %s: %s, for %+.3g $/s of running cost",
          best->least, ToSeconds(best->wait), 100 * best->busy,
          best->busy > best->least / capacity ? " by their CPU" : "",
          100 * o.capacity_switch_utilisation, to.variant, CostPerQps(to) * 1e6, to.saturation_qps,
          CostPerQps(m.variants[mv.from]) / CostPerQps(to), replaced, Describe(m, mv),
          RunningCost(m, mv)));
  action.cause = ModelScaleAction::Cause::kCapacity;
  return action;
}

// Appends this second's load, keeping what the longest scale-down wait of
// `m` will look at.
std::vector<ModelAutoscalerState::LoadSample> UpdateHistory(
    std::vector<ModelAutoscalerState::LoadSample> history, const ScalingModel& m, Nanos now,
    const ModelAutoscalerOptions& o) {
  Nanos horizon = o.min_scale_down_wait;
  for (const ScalingVariant& v : m.variants) horizon = std::max(horizon, FromSeconds(v.load_s));
  return AppendLoadSample(std::move(history), {now, m.load_qps, m.busy},
                          std::min(horizon, o.history_limit));
}

}  // namespace

double AccuracyFloor(const ScalingModel& m, double max_drop) {
  if (m.min_accuracy.has_value()) return *m.min_accuracy;
  double lowest = std::numeric_limits<double>::infinity();
  for (const ScalingVariant& v : m.variants) {
    if (Running(v)) lowest = std::min(lowest, v.accuracy);
  }
  return std::isinf(lowest) ? -std::numeric_limits<double>::infinity() : lowest - max_drop;
}

bool MayAddReplicas(const ScalingVariant& v, double accuracy_floor) {
  return v.saturation_qps > 0 && (Running(v) || v.accuracy >= accuracy_floor - kEps);
}

absl::StatusOr<std::unique_ptr<ModelAutoscaler>> ModelAutoscaler::Create(
    ModelAutoscalerOptions options) {
  if (!(options.slack >= 1)) return absl::InvalidArgumentError("slack must be at least 1");
  if (!(options.scale_down_headroom >= options.slack)) {
    return absl::InvalidArgumentError(
        "scale_down_headroom must be at least slack, or a scale-down would trigger a scale-up");
  }
  if (!(options.lambda_per_s >= 0)) return absl::InvalidArgumentError("lambda must be >= 0");
  if (!(options.capacity_tie_load_s >= 0) || !(options.capacity_switch_utilisation >= 0)) {
    return absl::InvalidArgumentError(
        "capacity_tie_load_s and capacity_switch_utilisation must be >= 0");
  }
  if (!(options.capacity_switch_gain > 1)) {
    return absl::InvalidArgumentError(
        "capacity_switch_gain must exceed 1, or two variants could trade places");
  }
  if (options.min_scale_down_wait < 0 || options.min_consolidation_wait < 0 ||
      options.history_limit < 0) {
    return absl::InvalidArgumentError("waits must be non-negative");
  }
  if (options.min_replicas_per_model < 0 || options.max_accuracy_drop < 0) {
    return absl::InvalidArgumentError("min_replicas_per_model and max_accuracy_drop must be >= 0");
  }
  return std::unique_ptr<ModelAutoscaler>(new ModelAutoscaler(std::move(options)));
}

absl::StatusOr<std::vector<ModelScaleAction>> ModelAutoscaler::PlanScaleUp(
    const ModelScalingSnapshot& snapshot) const {
  if (absl::Status valid = ValidateScalingSnapshot(snapshot); !valid.ok()) return valid;
  Usage used{UsedCores(snapshot), UsedMemoryMb(snapshot)};
  // The most starved model chooses first: when resources run short, they go
  // where the headroom is lowest.
  std::vector<const ScalingModel*> order;
  for (const ScalingModel& m : snapshot.models) order.push_back(&m);
  auto headroom = [](const ScalingModel* m) {
    return m->load_qps > 0 ? ModelCapacityQps(*m) / m->load_qps
                           : std::numeric_limits<double>::infinity();
  };
  std::stable_sort(order.begin(), order.end(), [&](const ScalingModel* a, const ScalingModel* b) {
    double ha = headroom(a), hb = headroom(b);
    return ha != hb ? ha < hb : a->model < b->model;
  });
  std::vector<ModelScaleAction> actions;
  for (const ScalingModel* m : order) {
    for (ModelScaleAction& action : ScaleUp(snapshot, *m, options_, used)) {
      actions.push_back(std::move(action));
    }
  }
  return actions;
}

absl::StatusOr<ModelAutoscalerDecision> ModelAutoscaler::Decide(
    const ModelScalingSnapshot& snapshot, const ModelAutoscalerState& previous, Nanos now) const {
  absl::StatusOr<std::vector<ModelScaleAction>> up = PlanScaleUp(snapshot);
  if (!up.ok()) return up.status();

  ModelAutoscalerDecision decision;
  double capacity = 0, load = 0;
  for (const ScalingModel& m : snapshot.models) {
    auto it = previous.history.find(m.model);
    decision.state.history[m.model] =
        UpdateHistory(it != previous.history.end() ? it->second
                                                   : std::vector<ModelAutoscalerState::LoadSample>{},
                      m, now, options_);
    capacity += ModelCapacityQps(m);
    load += m.load_qps;
  }
  decision.headroom = load > 0 ? capacity / load : std::numeric_limits<double>::infinity();

  std::set<std::string> scaled_up;
  Usage used{UsedCores(snapshot), UsedMemoryMb(snapshot)};
  for (const ModelScaleAction& a : *up) {
    scaled_up.insert(a.model);
    if (a.kind != Kind::kNeedsPlacement) {
      used.cores += a.add * a.cores_per_replica;
      used.memory_mb += a.add * a.memory_mb_per_replica;
    }
  }
  decision.actions = *std::move(up);
  std::vector<const ScalingModel*> rest;
  for (const ScalingModel& m : snapshot.models) {
    if (scaled_up.count(m.model) == 0) rest.push_back(&m);
  }
  std::sort(rest.begin(), rest.end(),
            [](const ScalingModel* a, const ScalingModel* b) { return a->model < b->model; });
  for (const ScalingModel* m : rest) {
    const auto& history = decision.state.history[m->model];
    if (auto action = ScaleDown(snapshot, *m, options_, history, now, used)) {
      decision.actions.push_back(*std::move(action));
    } else if (auto capacity = CapacitySwitch(snapshot, *m, options_, history, now, used)) {
      decision.actions.push_back(*std::move(capacity));
    }
  }
  return decision;
}

}  // namespace maitre::policy
