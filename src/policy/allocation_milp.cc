#include "policy/allocation_milp.h"

#include <CbcHeuristic.hpp>
#include <CbcHeuristicFPump.hpp>
#include <CbcHeuristicLocal.hpp>
#include <CbcHeuristicRINS.hpp>
#include <CbcModel.hpp>
#include <CglFlowCover.hpp>
#include <CglGomory.hpp>
#include <CglKnapsackCover.hpp>
#include <CglMixedIntegerRounding2.hpp>
#include <CglProbing.hpp>
#include <CoinPackedVector.hpp>
#include <OsiClpSolverInterface.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "policy/linear_rows.h"

namespace maitre::policy {
namespace {

// The objective's tiers, in units of "all demand served" and "every query
// at full accuracy": the common served fraction λ first, then the total
// served, then accuracy. A lower tier can trade against a higher one only by
// (its weight / the higher weight): accuracy can buy at most 1/10 of the
// served share's units, which is 0.2 percentage points of demand for a
// family whose accuracy spans 80–100%.
constexpr double kFractionWeight = 100;
constexpr double kServedWeight = 10;

bool Finite(double v) { return std::isfinite(v); }

absl::Status Validate(const AllocationProblem& p, const AllocationOptions& o) {
  if (p.query_types.empty()) return absl::InvalidArgumentError("no query types");
  if (p.variants.empty()) return absl::InvalidArgumentError("no variants");
  if (p.devices.empty()) return absl::InvalidArgumentError("no devices");
  if (p.device_types.empty()) return absl::InvalidArgumentError("no device types");
  for (const auto& q : p.query_types) {
    if (!Finite(q.demand_qps) || q.demand_qps < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "query type \"", q.name, "\": demand must be finite and >= 0, got ", q.demand_qps));
    }
  }
  const int nq = static_cast<int>(p.query_types.size());
  const int nm = static_cast<int>(p.variants.size());
  const int nt = static_cast<int>(p.device_types.size());
  for (const auto& v : p.variants) {
    if (v.query_type < 0 || v.query_type >= nq) {
      return absl::InvalidArgumentError(
          absl::StrCat("variant \"", v.name, "\" names query type ", v.query_type, " of ", nq));
    }
    if (!Finite(v.accuracy) || v.accuracy < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("variant \"", v.name, "\": accuracy must be finite and >= 0"));
    }
  }
  for (const auto& d : p.devices) {
    if (d.type < 0 || d.type >= nt) {
      return absl::InvalidArgumentError(
          absl::StrCat("device \"", d.name, "\" names device type ", d.type, " of ", nt));
    }
    if (d.current < -1 || d.current >= nm) {
      return absl::InvalidArgumentError(
          absl::StrCat("device \"", d.name, "\" hosts unknown variant ", d.current));
    }
  }
  if (static_cast<int>(p.peak_qps.size()) != nt) {
    return absl::InvalidArgumentError("peak_qps needs one row per device type");
  }
  for (int t = 0; t < nt; ++t) {
    if (static_cast<int>(p.peak_qps[t].size()) != nm) {
      return absl::InvalidArgumentError(absl::StrCat(
          "peak_qps for device type \"", p.device_types[t], "\" needs one entry per variant"));
    }
    for (double peak : p.peak_qps[t]) {
      if (!Finite(peak) || peak < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "peak_qps for device type \"", p.device_types[t], "\" must be finite and >= 0"));
      }
    }
  }
  if (!(o.time_limit_s > 0) || !(o.absolute_gap >= 0) || !(o.move_penalty >= 0)) {
    return absl::InvalidArgumentError(
        "time_limit_s must be > 0, absolute_gap and move_penalty >= 0");
  }
  return absl::OkStatus();
}

double TotalDemand(const AllocationProblem& p) {
  double s = 0;
  for (const auto& q : p.query_types) s += q.demand_qps;
  return s > 0 ? s : 1;  // with no demand only the moves matter
}

// Fills in everything a plan reports from device_variant and served_qps.
void Summarise(const AllocationProblem& p, const AllocationOptions& o, AllocationPlan& plan) {
  const int nq = static_cast<int>(p.query_types.size());
  plan.type_served_qps.assign(nq, 0);
  plan.type_accuracy.assign(nq, 0);
  plan.share.assign(p.devices.size(), std::vector<double>(nq, 0));
  double accuracy_qps = 0;
  plan.served_qps_total = 0;
  plan.moves = plan.loads = 0;
  for (size_t d = 0; d < p.devices.size(); ++d) {
    int m = plan.device_variant[d];
    int current = p.devices[d].current;
    if (current >= 0 && m != current) ++plan.moves;
    if (m >= 0 && m != current) ++plan.loads;
    for (int q = 0; q < nq; ++q) {
      double z = plan.served_qps[d][q];
      if (z <= 0) continue;
      plan.type_served_qps[q] += z;
      plan.type_accuracy[q] += z * p.variants[m].accuracy;
      if (p.query_types[q].demand_qps > 0) plan.share[d][q] = z / p.query_types[q].demand_qps;
    }
  }
  plan.served_fraction = 1;
  for (int q = 0; q < nq; ++q) {
    accuracy_qps += plan.type_accuracy[q];
    plan.served_qps_total += plan.type_served_qps[q];
    if (plan.type_served_qps[q] > 0) plan.type_accuracy[q] /= plan.type_served_qps[q];
    double s = p.query_types[q].demand_qps;
    if (s > 0) plan.served_fraction = std::min(plan.served_fraction, plan.type_served_qps[q] / s);
  }
  plan.effective_accuracy = plan.served_qps_total > 0 ? accuracy_qps / plan.served_qps_total : 0;
  double total = TotalDemand(p);
  int kept = 0;
  for (size_t d = 0; d < p.devices.size(); ++d) {
    int m = p.devices[d].current;
    kept += m >= 0 && plan.device_variant[d] == m && p.peak_qps[p.devices[d].type][m] > 0;
  }
  plan.objective = kFractionWeight * plan.served_fraction +
                   kServedWeight * plan.served_qps_total / total + accuracy_qps / total +
                   o.move_penalty * kept;
}

}  // namespace

double PeakThroughputQps(const Profile& profile, double slo_ms, int replicas) {
  if (profile.empty() || replicas <= 0 || !(slo_ms > 0)) return 0;
  int best = 0;
  for (int b = 1; b <= profile.max_batch(); ++b) {
    if (profile.P99At(b) <= slo_ms / 2) best = b;
  }
  if (best == 0) return 0;
  return replicas * best * 1000.0 / profile.LatencyAt(best);
}

AllocationPlan AssignForPlacement(const AllocationProblem& p,
                                  const std::vector<int>& device_variant,
                                  const AllocationOptions& o) {
  const int nq = static_cast<int>(p.query_types.size());
  AllocationPlan plan;
  plan.device_variant = device_variant;
  plan.served_qps.assign(p.devices.size(), std::vector<double>(nq, 0));
  for (int q = 0; q < nq; ++q) {
    std::vector<int> hosts;
    for (size_t d = 0; d < p.devices.size(); ++d) {
      int m = device_variant[d];
      if (m >= 0 && p.variants[m].query_type == q) hosts.push_back(static_cast<int>(d));
    }
    // Most accurate first; equal accuracy in device order.
    std::stable_sort(hosts.begin(), hosts.end(), [&](int a, int b) {
      return p.variants[device_variant[a]].accuracy > p.variants[device_variant[b]].accuracy;
    });
    double left = p.query_types[q].demand_qps;
    for (int d : hosts) {
      double take = std::min(left, p.peak_qps[p.devices[d].type][device_variant[d]]);
      plan.served_qps[d][q] = take;
      left -= take;
    }
  }
  Summarise(p, o, plan);
  plan.optimal = true;
  return plan;
}

AllocationProblem WithoutDominatedVariants(AllocationProblem p) {
  const int nm = static_cast<int>(p.variants.size());
  const int nt = static_cast<int>(p.peak_qps.size());
  std::vector<std::vector<bool>> hosted(nt, std::vector<bool>(nm, false));
  for (const auto& d : p.devices) {
    if (d.type >= 0 && d.type < nt && d.current >= 0 && d.current < nm) {
      hosted[d.type][d.current] = true;
    }
  }
  for (int t = 0; t < nt; ++t) {
    std::vector<double>& peak = p.peak_qps[t];
    for (int m = 0; m < nm; ++m) {
      if (peak[m] <= 0 || hosted[t][m]) continue;
      const auto& v = p.variants[m];
      for (int other = 0; other < nm; ++other) {
        const auto& o = p.variants[other];
        if (other == m || peak[other] <= 0 || o.query_type != v.query_type) continue;
        const bool at_least = o.accuracy >= v.accuracy && peak[other] >= peak[m];
        const bool strictly = o.accuracy > v.accuracy || peak[other] > peak[m];
        if (at_least && (strictly || other < m)) {
          peak[m] = 0;
          break;
        }
      }
    }
  }
  return p;
}

std::vector<int> GreedyPlacement(const AllocationProblem& p) {
  const int nq = static_cast<int>(p.query_types.size());
  const int nm = static_cast<int>(p.variants.size());
  const int nt = static_cast<int>(p.device_types.size());
  auto peak = [&](int d, int m) { return p.peak_qps[p.devices[d].type][m]; };
  auto demand = [&](int q) { return p.query_types[q].demand_qps; };
  // Per device type and query type: the fastest and the most accurate variant.
  std::vector<std::vector<int>> fastest(nt, std::vector<int>(nq, -1)),
      best(nt, std::vector<int>(nq, -1));
  for (int t = 0; t < nt; ++t) {
    for (int m = 0; m < nm; ++m) {
      if (p.peak_qps[t][m] <= 0) continue;
      int q = p.variants[m].query_type;
      int& f = fastest[t][q];
      if (f < 0 || p.peak_qps[t][m] > p.peak_qps[t][f]) f = m;
      int& b = best[t][q];
      if (b < 0 || p.variants[m].accuracy > p.variants[b].accuracy) b = m;
    }
  }
  const int nd = static_cast<int>(p.devices.size());
  std::vector<int> order(nd);
  std::iota(order.begin(), order.end(), 0);
  auto strength = [&](int d) {
    double sum = 0;
    for (int q = 0; q < nq; ++q) {
      int f = fastest[p.devices[d].type][q];
      if (f >= 0 && demand(q) > 0) sum += peak(d, f) / demand(q);
    }
    return sum;
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return strength(a) > strength(b); });
  // Cover every type's demand at its fastest variants, always helping the
  // type served least; devices left over go to the least-covered type at
  // their most accurate variant.
  std::vector<int> placement(nd, -1);
  std::vector<double> capacity(nq, 0);
  for (int d : order) {
    const int t = p.devices[d].type;
    int pick = -1;
    bool covered = true;
    for (int q = 0; q < nq; ++q) {
      if (demand(q) <= 0 || fastest[t][q] < 0) continue;
      if (capacity[q] < demand(q)) covered = false;
    }
    for (int q = 0; q < nq; ++q) {
      if (demand(q) <= 0 || fastest[t][q] < 0) continue;
      if (!covered && capacity[q] >= demand(q)) continue;
      if (pick < 0 || capacity[q] / demand(q) < capacity[pick] / demand(pick)) pick = q;
    }
    if (pick < 0) continue;
    placement[d] = covered ? best[t][pick] : fastest[t][pick];
    capacity[pick] += peak(d, placement[d]);
  }
  // Then raise accuracy one device at a time while no type serves less.
  auto type_value = [&](int q, double& served) {
    std::vector<std::pair<double, double>> hosts;  // (accuracy, peak)
    for (int d = 0; d < nd; ++d) {
      int m = placement[d];
      if (m >= 0 && p.variants[m].query_type == q)
        hosts.push_back({p.variants[m].accuracy, peak(d, m)});
    }
    std::sort(hosts.rbegin(), hosts.rend());
    double left = demand(q), accuracy_qps = 0;
    served = 0;
    for (const auto& [accuracy, cap] : hosts) {
      double take = std::min(left, cap);
      served += take;
      accuracy_qps += accuracy * take;
      left -= take;
    }
    return accuracy_qps;
  };
  for (int pass = 0; pass < 20; ++pass) {
    bool improved = false;
    for (int d = 0; d < nd; ++d) {
      const int m = placement[d];
      if (m < 0) continue;
      const int q = p.variants[m].query_type;
      double served = 0;
      double value = type_value(q, served);
      int keep = m;
      for (int other = 0; other < nm; ++other) {
        if (p.variants[other].query_type != q || peak(d, other) <= 0 ||
            p.variants[other].accuracy <= p.variants[keep].accuracy) {
          continue;
        }
        placement[d] = other;
        double trial_served = 0;
        double trial = type_value(q, trial_served);
        if (trial_served >= served - 1e-9 && trial > value + 1e-12) {
          keep = other;
          value = trial;
          improved = true;
        }
        placement[d] = keep;
      }
    }
    if (!improved) break;
  }
  return placement;
}

std::vector<int> ImprovePlacement(const AllocationProblem& p, std::vector<int> placement,
                                  const AllocationOptions& o) {
  const int nq = static_cast<int>(p.query_types.size());
  const int nm = static_cast<int>(p.variants.size());
  const int nd = static_cast<int>(p.devices.size());
  const double total = TotalDemand(p);
  auto peak = [&](int d, int m) { return p.peak_qps[p.devices[d].type][m]; };
  // One type's served qps and accuracy·qps for the current placement: its
  // devices filled most accurate first (AssignForPlacement's rule).
  std::vector<std::pair<double, double>> hosts;
  auto value_of = [&](int q) {
    hosts.clear();
    for (int d = 0; d < nd; ++d) {
      int m = placement[d];
      if (m >= 0 && p.variants[m].query_type == q)
        hosts.push_back({p.variants[m].accuracy, peak(d, m)});
    }
    std::sort(hosts.rbegin(), hosts.rend());
    double left = p.query_types[q].demand_qps, served = 0, accuracy_qps = 0;
    for (const auto& [accuracy, cap] : hosts) {
      double take = std::min(left, cap);
      served += take;
      accuracy_qps += accuracy * take;
      left -= take;
    }
    return std::make_pair(served, accuracy_qps);
  };
  std::vector<std::pair<double, double>> value(nq);
  for (int q = 0; q < nq; ++q) value[q] = value_of(q);
  auto kept = [&](int d, int m) {
    int c = p.devices[d].current;
    return c >= 0 && m == c && peak(d, c) > 0 ? o.move_penalty : 0.0;
  };
  auto objective = [&]() {
    double fraction = 1, served = 0, accuracy = 0;
    for (int q = 0; q < nq; ++q) {
      served += value[q].first;
      accuracy += value[q].second;
      double s = p.query_types[q].demand_qps;
      if (s > 0) fraction = std::min(fraction, value[q].first / s);
    }
    return kFractionWeight * fraction + kServedWeight * served / total + accuracy / total;
  };
  double best = objective();
  for (int pass = 0; pass < 50; ++pass) {
    bool improved = false;
    for (int d = 0; d < nd; ++d) {
      const int keep = placement[d];
      int choice = keep;
      double choice_value = best + kept(d, keep);
      for (int m = -1; m < nm; ++m) {
        if (m == keep || (m >= 0 && peak(d, m) <= 0)) continue;
        const int q_old = keep >= 0 ? p.variants[keep].query_type : -1;
        const int q_new = m >= 0 ? p.variants[m].query_type : -1;
        placement[d] = m;
        auto saved_old = q_old >= 0 ? value[q_old] : std::make_pair(0.0, 0.0);
        auto saved_new = q_new >= 0 ? value[q_new] : std::make_pair(0.0, 0.0);
        if (q_old >= 0) value[q_old] = value_of(q_old);
        if (q_new >= 0 && q_new != q_old) value[q_new] = value_of(q_new);
        double trial = objective() + kept(d, m);
        if (trial > choice_value + 1e-12) {
          choice = m;
          choice_value = trial;
        }
        if (q_old >= 0) value[q_old] = saved_old;
        if (q_new >= 0) value[q_new] = saved_new;
        placement[d] = keep;
      }
      if (choice != keep) {
        placement[d] = choice;
        for (int q : {keep >= 0 ? p.variants[keep].query_type : -1,
                      choice >= 0 ? p.variants[choice].query_type : -1}) {
          if (q >= 0) value[q] = value_of(q);
        }
        best = objective();
        improved = true;
      }
    }
    // Two devices of different types exchange their variants: a variant
    // may be worth more on the faster device, which one change alone, at
    // the cost of its app's capacity in between, does not find.
    for (int a = 0; a < nd; ++a) {
      for (int b = a + 1; b < nd; ++b) {
        const int ma = placement[a], mb = placement[b];
        if (ma == mb || p.devices[a].type == p.devices[b].type) continue;
        if ((mb >= 0 && peak(a, mb) <= 0) || (ma >= 0 && peak(b, ma) <= 0)) continue;
        const int qa = ma >= 0 ? p.variants[ma].query_type : -1;
        const int qb = mb >= 0 ? p.variants[mb].query_type : -1;
        const auto saved_a = qa >= 0 ? value[qa] : std::make_pair(0.0, 0.0);
        const auto saved_b = qb >= 0 ? value[qb] : std::make_pair(0.0, 0.0);
        const double before = best + kept(a, ma) + kept(b, mb);
        placement[a] = mb;
        placement[b] = ma;
        if (qa >= 0) value[qa] = value_of(qa);
        if (qb >= 0 && qb != qa) value[qb] = value_of(qb);
        const double now = objective();
        if (now + kept(a, mb) + kept(b, ma) > before + 1e-12) {
          best = now;
          improved = true;
        } else {
          placement[a] = ma;
          placement[b] = mb;
          if (qb >= 0) value[qb] = saved_b;
          if (qa >= 0) value[qa] = saved_a;
        }
      }
    }
    if (!improved) break;
  }
  return placement;
}

absl::StatusOr<AllocationPlan> SolveAllocation(const AllocationProblem& problem,
                                               const AllocationOptions& o) {
  if (absl::Status valid = Validate(problem, o); !valid.ok()) return valid;
  const AllocationProblem p = WithoutDominatedVariants(problem);
  const auto started = std::chrono::steady_clock::now();
  const int nq = static_cast<int>(p.query_types.size());
  const int nm = static_cast<int>(p.variants.size());
  const int nt = static_cast<int>(p.device_types.size());
  const double total = TotalDemand(p);

  std::vector<int> devices_of_type(nt, 0);
  std::vector<std::vector<int>> hosting(nt, std::vector<int>(nm, 0));  // now
  for (const auto& d : p.devices) {
    ++devices_of_type[d.type];
    if (d.current >= 0) ++hosting[d.type][d.current];
  }

  // Columns: per (type, variant) a device may host, n = how many devices of
  // the type host it (integer) and w = the qps they serve; k = how many of
  // those already hosted it (kept, rewarded by move_penalty); then λ.
  struct Pair {
    int type, variant, n, w, k;  // k = -1 when none host it now
  };
  std::vector<Pair> pairs;
  std::vector<double> lower, upper, cost;  // cost: minimised, so negated gains
  std::vector<bool> integer;
  auto add_column = [&](double lo, double hi, double gain, bool is_int) {
    lower.push_back(lo);
    upper.push_back(hi);
    cost.push_back(-gain);
    integer.push_back(is_int);
    return static_cast<int>(cost.size()) - 1;
  };
  for (int t = 0; t < nt; ++t) {
    if (devices_of_type[t] == 0) continue;
    for (int m = 0; m < nm; ++m) {
      if (p.peak_qps[t][m] <= 0) continue;  // cannot serve it: never kept either
      Pair pair{t, m, 0, 0, -1};
      pair.n = add_column(0, devices_of_type[t], 0, true);
      pair.w = add_column(0, p.peak_qps[t][m] * devices_of_type[t],
                          (kServedWeight + p.variants[m].accuracy) / total, false);
      if (hosting[t][m] > 0) pair.k = add_column(0, hosting[t][m], o.move_penalty, false);
      pairs.push_back(pair);
    }
  }
  const int lambda = add_column(0, 1, kFractionWeight, false);
  const int ncols = static_cast<int>(cost.size());

  LinearRows rows(ncols);
  constexpr double inf = LinearRows::kInfinity;
  std::vector<CoinPackedVector> per_type(nt), per_query(nq);
  for (const Pair& pair : pairs) {
    per_type[pair.type].insert(pair.n, 1.0);  // Eq. 1, summed over the type's devices
    // Eq. 5: w <= P·n. One device never serves more than its type's whole
    // demand either, so min(P, s_q) is as valid and a much tighter bound
    // when one device could carry the type alone.
    const double s = p.query_types[p.variants[pair.variant].query_type].demand_qps;
    CoinPackedVector capacity;
    capacity.insert(pair.w, 1.0);
    capacity.insert(pair.n, -std::min(p.peak_qps[pair.type][pair.variant], s));
    rows.Add(capacity, -inf, 0);
    per_query[p.variants[pair.variant].query_type].insert(pair.w, 1.0);
    if (pair.k >= 0) {  // k <= n: only devices still hosting it count as kept
      CoinPackedVector kept;
      kept.insert(pair.k, 1.0);
      kept.insert(pair.n, -1.0);
      rows.Add(kept, -inf, 0);
    }
  }
  for (int t = 0; t < nt; ++t) {
    if (per_type[t].getNumElements() > 0) rows.Add(per_type[t], -inf, devices_of_type[t]);
  }
  for (int q = 0; q < nq; ++q) {
    const double s = p.query_types[q].demand_qps;
    // Eqs. 2 and 4: a type's devices serve no more than it sends them.
    if (per_query[q].getNumElements() > 0) rows.Add(per_query[q], -inf, s);
    // Eq. 6 as Σ_d z_{d,q} >= λ·s_q.
    if (s > 0) {
      CoinPackedVector fraction = per_query[q];
      fraction.insert(lambda, -s);
      rows.Add(fraction, 0, inf);
    }
  }

  OsiClpSolverInterface solver;
  solver.messageHandler()->setLogLevel(0);
  solver.loadProblem(rows.matrix(), lower.data(), upper.data(), cost.data(), rows.lower(),
                     rows.upper());
  for (int c = 0; c < ncols; ++c) {
    if (integer[c]) solver.setInteger(c);
  }
  solver.setObjSense(1.0);

  // The current placement, with its best assignment, is a feasible start:
  // the solver always has a plan to fall back on, and it proves the
  // unchanged plan optimal quickly when demand has not moved.
  std::vector<int> current(p.devices.size());
  for (size_t d = 0; d < p.devices.size(); ++d) {
    int m = p.devices[d].current;
    current[d] = m >= 0 && p.peak_qps[p.devices[d].type][m] > 0 ? m : -1;
  }
  // A greedy placement is the other start; the solver begins from the
  // better of the two (the greedy one is far better from an empty cluster).
  AllocationPlan start = AssignForPlacement(p, current, o);
  AllocationPlan greedy = AssignForPlacement(p, ImprovePlacement(p, GreedyPlacement(p), o), o);
  if (AllocationPlan improved = AssignForPlacement(p, ImprovePlacement(p, current, o), o);
      improved.objective > greedy.objective) {
    greedy = improved;
  }
  if (greedy.objective > start.objective) {
    start = greedy;
    current = greedy.device_variant;
  }
  std::vector<double> x(ncols, 0);
  for (const Pair& pair : pairs) {
    for (size_t d = 0; d < p.devices.size(); ++d) {
      if (p.devices[d].type != pair.type || current[d] != pair.variant) continue;
      x[pair.n] += 1;
      x[pair.w] += start.served_qps[d][p.variants[pair.variant].query_type];
    }
    if (pair.k >= 0) x[pair.k] = x[pair.n];
  }
  x[lambda] = start.served_fraction;
  double start_cost = 0;
  for (int c = 0; c < ncols; ++c) start_cost += cost[c] * x[c];

  // Plain branch and bound stalls for minutes at 20 devices; CBC's cut
  // generators and primal heuristics (those its command line uses) make the
  // root bound tight, so what remains is finding plans close to it
  // (docs/policies.md has the measurements). MAITRE_CBC_LOG=1 shows CBC's
  // progress.
  CbcModel model(solver);
  model.setLogLevel(getenv("MAITRE_CBC_LOG") ? 1 : 0);
  model.messageHandler()->setLogLevel(getenv("MAITRE_CBC_LOG") ? 1 : 0);
  // The limit is wall time: CBC counts CPU time by default, which on a
  // busy host lets a solve run for several times its limit.
  model.setUseElapsedTime(true);
  model.setMaximumSeconds(o.time_limit_s);
  // The gap is absolute: the served tiers (up to ~110) would make a
  // relative gap wider than one move.
  model.setAllowableFractionGap(0);
  model.setAllowableGap(std::max(1e-9, o.absolute_gap));
  CglProbing probing;
  probing.setUsingObjective(1);
  probing.setMaxPass(1);
  probing.setMaxPassRoot(5);
  probing.setMaxProbe(10);
  probing.setMaxLook(50);
  probing.setRowCuts(3);
  CglGomory gomory;
  gomory.setLimit(300);
  CglKnapsackCover knapsack;
  CglMixedIntegerRounding2 rounding_cuts;
  CglFlowCover flow;
  model.addCutGenerator(&probing, -1, "probing");
  model.addCutGenerator(&gomory, -1, "gomory");
  model.addCutGenerator(&knapsack, -1, "knapsack");
  model.addCutGenerator(&rounding_cuts, -1, "mir");
  model.addCutGenerator(&flow, -1, "flow");
  CbcRounding rounding(model);
  CbcHeuristicLocal local(model);
  CbcHeuristicFPump pump(model);
  CbcHeuristicRINS rins(model);
  model.addHeuristic(&rounding);
  model.addHeuristic(&local);
  model.addHeuristic(&pump);
  model.addHeuristic(&rins);
  model.setBestSolution(x.data(), ncols, start_cost, /*check=*/true);
  model.initialSolve();
  model.branchAndBound();

  const double* best = model.bestSolution();
  if (best == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("no allocation found within ", o.time_limit_s, " s"));
  }

  // Read the per-device plan off the counts: devices keep the variant they
  // host while its count lasts; the rest take what is left, in order.
  AllocationPlan plan;
  plan.device_variant.assign(p.devices.size(), -1);
  plan.served_qps.assign(p.devices.size(), std::vector<double>(nq, 0));
  for (int t = 0; t < nt; ++t) {
    std::vector<int> want(nm, 0);
    std::vector<double> served(nm, 0);
    for (const Pair& pair : pairs) {
      if (pair.type != t) continue;
      want[pair.variant] = static_cast<int>(std::lround(best[pair.n]));
      served[pair.variant] = std::max(0.0, best[pair.w]);
    }
    std::vector<int> count = want;
    std::vector<int> free;
    for (size_t d = 0; d < p.devices.size(); ++d) {
      if (p.devices[d].type != t) continue;
      int m = p.devices[d].current;
      if (m >= 0 && count[m] > 0) {
        plan.device_variant[d] = m;
        --count[m];
      } else {
        free.push_back(static_cast<int>(d));
      }
    }
    size_t next = 0;
    for (int m = 0; m < nm; ++m) {
      for (; count[m] > 0 && next < free.size(); --count[m]) {
        plan.device_variant[free[next++]] = m;
      }
    }
    // The type's share of a variant's traffic, evenly over its devices
    // (each then serves at most P, as w <= P·n).
    for (size_t d = 0; d < p.devices.size(); ++d) {
      int m = plan.device_variant[d];
      if (p.devices[d].type != t || m < 0 || want[m] == 0) continue;
      plan.served_qps[d][p.variants[m].query_type] = served[m] / want[m];
    }
  }
  Summarise(p, o, plan);
  double bound = -model.getBestPossibleObjValue();
  plan.optimal = model.isProvenOptimal();
  // In the accuracy tier's units, like absolute_gap.
  plan.gap = std::max(0.0, bound - plan.objective);
  plan.solve_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return plan;
}

}  // namespace maitre::policy
