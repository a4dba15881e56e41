// Properties of variant selection over random catalogues, live states and
// requests (docs/policies.md, "Selection and instance states: tests"):
//  - Select() decides exactly what the brute-force reference decides;
//  - a chosen variant meets the requirements (degraded choices excepted,
//    which still meet accuracy, cost and the deadline);
//  - "unsatisfiable" comes exactly when no variant can meet them;
//  - an Overloaded instance is never chosen while a healthy candidate
//    exists, and an Interfered one only at its measured speed: within the
//    objective and the deadline, and sooner than the healthy pick at that
//    one's measured speed;
//  - ties go to the lower cost;
//  - a load is the quickest answer, or under load (a saturated instance in
//    scope) the cheapest way to carry the load the scope lacks among those
//    that answer in time, and never a variant a load under way outdoes.
// The checks below recompute what they need from the profiles directly,
// independently of selection_rules.h.
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>

#include "policy/selection.h"
#include "policy/selection_testing.h"

namespace maitre::policy {
namespace {

using selection_testing::Draw;
constexpr Nanos kNow = 500 * kSecond;

bool InScope(const SelectionIndex& idx, const SelectionRequest& r, VariantId v) {
  const auto& var = idx.variant(v);
  if (!var.present) return false;
  if (r.pinned != kNoId) return v == r.pinned;
  if (r.model != kNoId) return var.model == r.model;
  return var.app == r.app;
}

struct Reqs {
  std::optional<double> latency, accuracy, cost;
};
Reqs ReqsOf(const SelectionRequest& r) {
  if (r.pinned != kNoId) return {};
  return {r.requirements.latency_ms, r.requirements.min_accuracy, r.requirements.max_cost};
}

bool MeetsStatic(const VariantOption& o, const Reqs& q) {
  return (!q.accuracy || o.accuracy >= *q.accuracy) && (!q.cost || o.price_per_hour <= *q.cost);
}

// The queries beyond the free replicas drain in batches of the mean batch,
// or of as many as each replica has queued (up to the instance's cap, at
// most the profile's largest batch) when that is larger and answers
// sooner, and the query rides one such batch.
double EstimateAt(const VariantOption& o, const LiveInstance& in, int b) {
  const int replicas = std::max(1, in.replicas);
  const int ahead = std::max(0, in.waiting - replicas + 1);
  const double service = o.profile.LatencyAt(b);
  const double start =
      in.state == InstanceState::kInactive && in.ready_at > kNow ? ToMillis(in.ready_at - kNow) : 0;
  return start + (ahead * service / (b * replicas) + service);
}
int MeanBatch(const LiveInstance& in) {
  return std::max(1, static_cast<int>(std::lround(std::max(1.0, in.mean_batch))));
}
int QueueBatch(const VariantOption& o, const LiveInstance& in) {
  const int replicas = std::max(1, in.replicas);
  const int ahead = std::max(0, in.waiting - replicas + 1);
  const int largest = std::max(1, o.profile.max_batch());
  const int cap = in.max_batch > 0 ? std::min(in.max_batch, largest) : largest;
  return std::min(cap, (ahead + replicas - 1) / replicas);
}
double Estimate(const VariantOption& o, const LiveInstance& in) {
  const int mean = MeanBatch(in), queue = QueueBatch(o, in);
  return queue > mean ? std::min(EstimateAt(o, in, mean), EstimateAt(o, in, queue))
                      : EstimateAt(o, in, mean);
}

// Step 1's load of a worker: the work sent to it lately, per replica of
// its instances running at once (no more than its cores).
double RecentLoadOf(const SelectionIndex& idx, const LiveState& live, WorkerId id) {
  const LiveWorker& w = live.worker(id);
  const double age_s = ToSeconds(kNow - w.recent_at);
  const double recent = age_s >= 10 ? 0 : w.recent_busy_s * std::exp(-std::max(0.0, age_s));
  int replicas = 0;
  for (InstanceId i : live.instances_on_worker(id)) {
    replicas += std::max(1, live.instance(i).replicas);
  }
  return recent / std::max(1, std::min(replicas, idx.type(w.type).type.cores));
}

bool MakesDeadline(double ms, const SelectionRequest& r) {
  return r.deadline >= kInfiniteFuture || ms <= ToMillis(r.deadline - r.now);
}

// An instance that step 1 may use: Active, on an accepting worker, fitting
// accuracy, cost, latency objective and deadline.
bool HealthyCandidate(const SelectionIndex& idx, const LiveState& live, const SelectionRequest& r,
                      InstanceId id) {
  const LiveInstance& in = live.instance(id);
  if (in.state != InstanceState::kActive || !InScope(idx, r, in.variant)) return false;
  const LiveWorker& w = live.worker(in.worker);
  const OptionId o = idx.FindOption(in.variant, w.type);
  if (!w.accepting || o == kNoId) return false;
  const Reqs q = ReqsOf(r);
  const double est = Estimate(idx.option(o), in);
  return MeetsStatic(idx.option(o), q) && (!q.latency || est <= *q.latency) &&
         MakesDeadline(est, r);
}

// Either of them at its measured speed (LiveInstance::slowdown), never
// faster than its profile.
double AtSpeed(double est, const LiveInstance& in) { return est * std::max(1.0, in.slowdown); }

// An Interfered instance that step 1 may use: its speed known, on an
// accepting worker, fitting accuracy and cost, and at that speed within the
// latency objective and the deadline.
bool InterferedCandidateOf(const SelectionIndex& idx, const LiveState& live,
                           const SelectionRequest& r, InstanceId id) {
  const LiveInstance& in = live.instance(id);
  if (in.state != InstanceState::kInterfered || !(in.slowdown > 0)) return false;
  if (!InScope(idx, r, in.variant)) return false;
  const LiveWorker& w = live.worker(in.worker);
  const OptionId o = idx.FindOption(in.variant, w.type);
  if (!w.accepting || o == kNoId) return false;
  const Reqs q = ReqsOf(r);
  const double at_speed = AtSpeed(Estimate(idx.option(o), in), in);
  return MeetsStatic(idx.option(o), q) && (!q.latency || at_speed <= *q.latency) &&
         MakesDeadline(at_speed, r);
}

void CheckOne(const SelectionIndex& idx, const LiveState& live, const SelectionRequest& r,
              const SelectionOptions& opts) {
  const SelectionDecision d = Select(idx, live, r, opts);
  ASSERT_EQ(DebugString(d), DebugString(SelectBruteForce(idx, live, r, opts)));
  ASSERT_EQ(DebugString(d),
            DebugString(SelectBruteForce(idx, live, r, opts, BruteForceScan::kScopeOnly)));

  const Reqs q = ReqsOf(r);
  bool any_feasible = false;
  for (OptionId o = 0; o < static_cast<OptionId>(idx.options().size()); ++o) {
    const VariantOption& opt = idx.option(o);
    if (!InScope(idx, r, opt.variant)) continue;
    if (MeetsStatic(opt, q) && (!q.latency || opt.profile.LatencyAt(1) <= *q.latency)) {
      any_feasible = true;
    }
  }
  // Step 1's healthy pick (the least recent load, then the least-utilised
  // worker, the price, the est and the id) and the soonest Interfered
  // candidate at its measured speed (ties to the price, then the id).
  bool any_healthy = false;
  InstanceId healthy_pick = kNoId, interfered_pick = kNoId;
  std::tuple<double, double, double, double, InstanceId> healthy_key;
  std::tuple<double, double, InstanceId> interfered_key;
  for (InstanceId i = 0; i < live.instance_slots(); ++i) {
    if (!live.has_instance(i)) continue;
    const LiveInstance& in = live.instance(i);
    const LiveWorker& w = live.worker(in.worker);
    const OptionId o = idx.FindOption(in.variant, w.type);
    if (HealthyCandidate(idx, live, r, i)) {
      any_healthy = true;
      const auto key = std::make_tuple(RecentLoadOf(idx, live, in.worker), w.utilisation,
                                       idx.option(o).price_per_hour,
                                       Estimate(idx.option(o), in), i);
      if (healthy_pick == kNoId || key < healthy_key) {
        healthy_pick = i;
        healthy_key = key;
      }
    }
    if (InterferedCandidateOf(idx, live, r, i)) {
      const auto key = std::make_tuple(AtSpeed(Estimate(idx.option(o), in), in),
                                       idx.option(o).price_per_hour, i);
      if (interfered_pick == kNoId || key < interfered_key) {
        interfered_pick = i;
        interfered_key = key;
      }
    }
  }
  // The Interfered candidate serves when it answers sooner than the
  // healthy pick, both at their measured speeds, or when there is none.
  const bool interfered_first =
      interfered_pick != kNoId &&
      (healthy_pick == kNoId ||
       std::get<0>(interfered_key) <
           AtSpeed(std::get<3>(healthy_key), live.instance(healthy_pick)));
  if (interfered_first) {
    EXPECT_EQ(d.outcome, SelectionOutcome::kUseInstance);
    EXPECT_EQ(d.instance, interfered_pick);
    EXPECT_FALSE(d.degraded);
  }

  // Unsatisfiable exactly when no variant in scope can meet the requirements
  // (an instance running a larger batch can occasionally meet a latency its
  // batch-1 profile misses, and then serves).
  if (d.outcome == SelectionOutcome::kUnsatisfiable) {
    EXPECT_FALSE(any_feasible);
    EXPECT_FALSE(any_healthy);
  } else {
    EXPECT_TRUE(any_feasible || any_healthy);
  }
  if (any_feasible) EXPECT_NE(d.outcome, SelectionOutcome::kUnsatisfiable);

  if (d.serving != kNoId) {
    const VariantOption& o = idx.option(d.serving);
    EXPECT_TRUE(InScope(idx, r, o.variant));
    EXPECT_TRUE(MeetsStatic(o, q)) << "accuracy or cost requirement broken";
    EXPECT_TRUE(MakesDeadline(d.estimated_ms, r));
    if (q.latency && !d.degraded) {
      if (d.outcome == SelectionOutcome::kLoadAndServe) {
        // A fresh load is judged on the variant's latency; the wait for the
        // load itself has to fit the deadline (checked above).
        EXPECT_LE(o.profile.LatencyAt(1), *q.latency);
      } else {
        EXPECT_LE(d.estimated_ms, *q.latency);
      }
    }
    if (r.pinned != kNoId) EXPECT_EQ(o.variant, r.pinned);
  }
  if (d.instance != kNoId) {
    const LiveInstance& in = live.instance(d.instance);
    const InstanceState s = in.state;
    EXPECT_TRUE(live.worker(in.worker).accepting);
    EXPECT_EQ(d.serving, idx.FindOption(in.variant, live.worker(in.worker).type));
    const VariantOption& o = idx.option(d.serving);
    const bool at_its_speed = s == InstanceState::kInterfered && !d.degraded;
    EXPECT_DOUBLE_EQ(d.estimated_ms, at_its_speed ? AtSpeed(Estimate(o, in), in) : Estimate(o, in));
    // Never above the mean batch's estimate alone; the same whenever the
    // queue per replica is no longer than the mean batch.
    const double at_mean = EstimateAt(o, in, MeanBatch(in));
    const double own = at_its_speed ? AtSpeed(1, in) : 1;
    EXPECT_LE(d.estimated_ms, at_mean * own * (1 + 1e-12));
    if (QueueBatch(o, in) <= MeanBatch(in)) EXPECT_DOUBLE_EQ(d.estimated_ms, at_mean * own);
    if (any_healthy) {
      EXPECT_TRUE(s == InstanceState::kActive || (interfered_first && d.instance == interfered_pick))
          << "unhealthy instance chosen over a healthy one";
      EXPECT_FALSE(d.degraded);
    }
    if (s == InstanceState::kOverloaded) EXPECT_TRUE(d.degraded);
    if (s == InstanceState::kInterfered && !d.degraded) {
      EXPECT_TRUE(interfered_first) << "Interfered instance chosen though it answers later";
    }
  }
  // Healthy choice: the least recent load, ties to the least-utilised
  // worker, then to the lower price.
  if (d.outcome == SelectionOutcome::kUseInstance && any_healthy && !interfered_first) {
    auto key = [&](InstanceId i) {
      const LiveInstance& in = live.instance(i);
      const LiveWorker& w = live.worker(in.worker);
      const VariantOption& o = idx.option(idx.FindOption(in.variant, w.type));
      return std::make_tuple(RecentLoadOf(idx, live, in.worker), w.utilisation, o.price_per_hour);
    };
    const auto chosen = key(d.instance);
    for (InstanceId i = 0; i < live.instance_slots(); ++i) {
      if (!live.has_instance(i) || !HealthyCandidate(idx, live, r, i)) continue;
      EXPECT_GE(key(i), chosen) << "instance " << i << " was less loaded than the one chosen";
    }
  }
  // Under load (a saturated instance: Overloaded, or Active but too late for
  // this query) a load is chosen for capacity, else for the quickest answer.
  bool under_load = false;
  for (InstanceId i = 0; i < live.instance_slots(); ++i) {
    if (!live.has_instance(i)) continue;
    const LiveInstance& in = live.instance(i);
    const LiveWorker& w = live.worker(in.worker);
    const OptionId o = idx.FindOption(in.variant, w.type);
    if (!InScope(idx, r, in.variant) || !w.accepting || o == kNoId) continue;
    if (!MeetsStatic(idx.option(o), q)) continue;
    const double est = Estimate(idx.option(o), in);
    const bool late = (q.latency && est > *q.latency) || !MakesDeadline(est, r);
    under_load |=
        in.state == InstanceState::kOverloaded || (in.state == InstanceState::kActive && late);
  }
  auto capacity = [&](const VariantOption& x) {
    return q.latency ? x.profile.SaturationQps(*q.latency)
                     : x.profile.ThroughputAt(x.profile.max_batch());
  };
  auto feasible = [&](const VariantOption& x) {
    return MeetsStatic(x, q) && (!q.latency || x.profile.LatencyAt(1) <= *q.latency);
  };
  // What the scope lacks: offered (the larger of arrivals and served) less
  // what its instances of feasible options sustain, in thousandths of qps.
  int64_t offered = 0, sustained = 0;
  for (InstanceId i = 0; i < live.instance_slots(); ++i) {
    if (!live.has_instance(i)) continue;
    const LiveInstance& in = live.instance(i);
    const LiveWorker& w = live.worker(in.worker);
    const OptionId o = idx.FindOption(in.variant, w.type);
    if (!InScope(idx, r, in.variant) || !w.accepting || o == kNoId || !feasible(idx.option(o))) {
      continue;
    }
    offered += std::llround(std::max({0.0, in.arrival_qps, in.served_qps}) * 1000);
    sustained +=
        std::llround(std::max(0.0, capacity(idx.option(o))) * 1000) * std::max(1, in.replicas);
  }
  // Nothing reported: unknown, and the options rank by price per qps.
  const bool known = offered > 0;
  const double missing = static_cast<double>(std::max<int64_t>(0, offered - sustained)) / 1000;
  // (instances' price to carry the missing load, price per qps, − capacity):
  // the smaller, the better.
  auto figures = [&](const VariantOption& x) {
    const double cap = capacity(x);
    const double n = std::max(1.0, std::ceil(missing / cap - 1e-9));
    return std::make_tuple(known ? x.price_per_hour * n : x.price_per_hour / cap,
                           x.price_per_hour / cap, -cap);
  };
  // Under load a load must carry the missing load more cheaply than every
  // feasible load of another variant of the scope under way (or as cheaply,
  // with a lower price per qps, or more capacity).
  auto beaten_by_load_under_way = [&](const VariantOption& x) {
    bool any_under_way = false;
    for (InstanceId i = 0; i < live.instance_slots(); ++i) {
      if (!live.has_instance(i)) continue;
      const LiveInstance& in = live.instance(i);
      const LiveWorker& w = live.worker(in.worker);
      const OptionId u = idx.FindOption(in.variant, w.type);
      any_under_way |= in.state == InstanceState::kInactive && InScope(idx, r, in.variant) &&
                       w.accepting && u != kNoId && feasible(idx.option(u));
    }
    // Nothing missing once the loads under way are counted: none is planned.
    if (known && missing == 0 && any_under_way) return true;
    // Nothing missing by the profiles: no variant that carries less per
    // dollar than another the scope runs (loaded or loading).
    if (known && missing == 0) {
      for (InstanceId i = 0; i < live.instance_slots(); ++i) {
        if (!live.has_instance(i)) continue;
        const LiveInstance& in = live.instance(i);
        const LiveWorker& w = live.worker(in.worker);
        const OptionId u = idx.FindOption(in.variant, w.type);
        if (!InScope(idx, r, in.variant) || !w.accepting || u == kNoId || in.variant == x.variant ||
            !feasible(idx.option(u))) {
          continue;
        }
        const VariantOption& y = idx.option(u);
        const double px = x.price_per_hour / capacity(x), py = y.price_per_hour / capacity(y);
        if (!(px < py || (px == py && capacity(x) > capacity(y)))) return true;
      }
    }
    for (InstanceId i = 0; i < live.instance_slots(); ++i) {
      if (!live.has_instance(i)) continue;
      const LiveInstance& in = live.instance(i);
      const LiveWorker& w = live.worker(in.worker);
      const OptionId u = idx.FindOption(in.variant, w.type);
      if (in.state != InstanceState::kInactive || !InScope(idx, r, in.variant) || !w.accepting ||
          u == kNoId || in.variant == x.variant || !feasible(idx.option(u))) {
        continue;
      }
      if (!(figures(x) < figures(idx.option(u)))) return true;
    }
    return false;
  };
  // A worker whose cores ready instances of another variant of the same
  // model keep busy (any ready state but Active and idle) takes no load of
  // it.
  auto cores_busy = [&](WorkerId wid, VariantId v) {
    if (r.pinned != kNoId) return false;  // the client chose the variant
    int replicas = 0;
    for (InstanceId i = 0; i < live.instance_slots(); ++i) {
      if (!live.has_instance(i)) continue;
      const LiveInstance& in = live.instance(i);
      if (in.worker != wid || in.variant == v ||
          idx.variant(in.variant).model != idx.variant(v).model ||
          in.state == InstanceState::kInactive ||
          (in.state == InstanceState::kActive && in.served_qps <= 0 && in.arrival_qps <= 0 &&
           in.waiting <= 0)) {
        continue;
      }
      replicas += std::max(1, in.replicas);
    }
    return replicas > 0 && replicas >= idx.type(live.worker(wid).type).type.cores;
  };
  // A load goes where it fits, and no faster-to-serve or equally fast but
  // cheaper feasible option could have been placed; under load, no option
  // that answers in time where it does not, or carries more per dollar.
  if (d.load.valid()) {
    EXPECT_EQ(d.load_rule, under_load ? LoadRule::kCapacity : LoadRule::kQuickest);
    if (under_load) {
      EXPECT_FALSE(beaten_by_load_under_way(idx.option(d.load.option)))
          << "a load no better than one under way";
    }
    const VariantOption& o = idx.option(d.load.option);
    const LiveWorker& w = live.worker(d.load.worker);
    EXPECT_EQ(w.type, o.type);
    EXPECT_TRUE(w.accepting);
    EXPECT_GE(w.free_memory_mb, o.memory_mb);
    EXPECT_FALSE(live.Hosts(d.load.worker, o.variant));
    EXPECT_FALSE(cores_busy(d.load.worker, o.variant)) << "a load beside a busy variant";
    for (OptionId other = 0; other < static_cast<OptionId>(idx.options().size()); ++other) {
      const VariantOption& x = idx.option(other);
      if (!InScope(idx, r, x.variant) || !MeetsStatic(x, q)) continue;
      if (q.latency && x.profile.LatencyAt(1) > *q.latency) continue;
      bool under_way = false;
      for (InstanceId i = 0; i < live.instance_slots(); ++i) {
        under_way |= live.has_instance(i) && live.instance(i).variant == x.variant &&
                     live.instance(i).state == InstanceState::kInactive &&
                     live.worker(live.instance(i).worker).type == x.type &&
                     live.worker(live.instance(i).worker).accepting;
      }
      EXPECT_FALSE(under_way && other == d.load.option) << "second load of the same option";
      if (under_way) continue;
      bool placeable = false;
      for (WorkerId wid = 0; wid < live.worker_slots(); ++wid) {
        if (!live.has_worker(wid)) continue;
        const LiveWorker& ww = live.worker(wid);
        placeable |= ww.accepting && ww.type == x.type && ww.free_memory_mb >= x.memory_mb &&
                     !live.Hosts(wid, x.variant) && !cores_busy(wid, x.variant);
        if (ww.accepting && ww.type == o.type && ww.free_memory_mb >= o.memory_mb &&
            !live.Hosts(wid, o.variant) && !cores_busy(wid, o.variant)) {
          EXPECT_GE(ww.utilisation, w.utilisation) << "load not on the idlest fitting worker";
        }
      }
      if (!placeable) continue;
      const double xc = x.load_ms + x.profile.LatencyAt(1);
      const double oc = o.load_ms + o.profile.LatencyAt(1);
      if (under_load && beaten_by_load_under_way(x)) continue;  // not a candidate
      if (under_load) {
        const bool x_in_time = MakesDeadline(xc, r), o_in_time = MakesDeadline(oc, r);
        EXPECT_TRUE(o_in_time || !x_in_time) << "a load too late for this query chosen";
        if (x_in_time != o_in_time) continue;
        EXPECT_FALSE(figures(x) < figures(o)) << "a load that carries the missing load at a "
                                                 "higher cost chosen under load";
        continue;
      }
      EXPECT_GE(xc, oc);
      if (xc == oc)
        EXPECT_GE(x.price_per_hour, o.price_per_hour) << "tie not given to the lower cost";
    }
  } else {
    EXPECT_EQ(d.load_rule, LoadRule::kNone);
  }
  if (d.outcome == SelectionOutcome::kUnsatisfiable && d.closest != kNoId) {
    EXPECT_NE(d.unmet, 0);
    EXPECT_GT(d.shortfall, 0);
    EXPECT_FALSE(ExplainDecision(idx, live, r, d).empty());
  }
}

void RunProperties(uint64_t seed_base, int catalogues, bool coarse) {
  int outcomes[5] = {0, 0, 0, 0, 0};
  int rules[3] = {0, 0, 0};
  for (int c = 0; c < catalogues; ++c) {
    Draw d(seed_base + c);
    selection_testing::RandomCatalogueSpec spec;
    spec.coarse = coarse;
    spec.apps = static_cast<int>(d.Int(1, 3));
    spec.models_per_app = static_cast<int>(d.Int(1, 3));
    spec.variants_per_model = static_cast<int>(d.Int(1, 5));
    spec.worker_types = static_cast<int>(d.Int(1, 3));
    SelectionIndex idx = *SelectionIndex::Create(selection_testing::RandomCatalogue(d, spec));
    LiveState live;
    selection_testing::RandomLiveSpec lspec;
    lspec.coarse = coarse;
    lspec.workers = static_cast<int>(d.Int(0, 10));
    selection_testing::FillRandomLive(d, idx, lspec, kNow, live);
    for (int k = 0; k < 20; ++k) {
      SelectionRequest r = selection_testing::RandomRequest(d, idx, kNow);
      SelectionOptions opts;
      opts.allow_degraded = !d.Chance(0.2);
      opts.use_loading_instances = !d.Chance(0.2);
      SCOPED_TRACE(testing::Message() << "seed " << seed_base + c << " request " << k);
      CheckOne(idx, live, r, opts);
      if (testing::Test::HasFatalFailure()) return;
      const SelectionDecision decision = Select(idx, live, r, opts);
      ++outcomes[static_cast<int>(decision.outcome)];
      ++rules[static_cast<int>(decision.load_rule)];
    }
  }
  // Every outcome occurs, so the properties above were exercised.
  for (int o = 0; o < 5; ++o) {
    EXPECT_GT(outcomes[o], 0) << SelectionOutcomeName(static_cast<SelectionOutcome>(o));
  }
  // ... and loads were chosen by both rules of step 4.
  EXPECT_GT(rules[static_cast<int>(LoadRule::kQuickest)], 50);
  EXPECT_GT(rules[static_cast<int>(LoadRule::kCapacity)], 50);
}

TEST(SelectionPropertyTest, CoarseValuesWithManyTies) { RunProperties(1000, 1500, true); }

TEST(SelectionPropertyTest, ContinuousValues) { RunProperties(90000, 1500, false); }

}  // namespace
}  // namespace maitre::policy
