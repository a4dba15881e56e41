#include "policy/mark_provisioning.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace maitre::policy {
namespace {

// What `units` of a type's time cost, paid in whole blocks.
double PaidCost(const ProvisionedType& type, int units) {
  if (units <= 0) return 0;
  const int block = std::max(1, type.billing_units);
  return std::ceil(static_cast<double>(units) / block) * block * type.price_per_unit;
}

struct Candidate {
  int running = -1;  // index into `running`, or -1 for a new worker
  int type = 0;
  int launch_at = 0;   // new workers: units from now
  int serve_from = 0;  // first unit it serves
  double cost = 0;
  double served = 0;  // of the shortfall in τ..e
};

absl::Status Validate(absl::Span<const double> forecast, absl::Span<const ProvisionedType> types,
                      absl::Span<const RunningWorker> running) {
  for (double f : forecast) {
    if (!(f >= 0) || !std::isfinite(f)) {
      return absl::InvalidArgumentError("forecast rates must be finite and not negative");
    }
  }
  for (const ProvisionedType& t : types) {
    if (!(t.capacity_qps >= 0) || !std::isfinite(t.capacity_qps) || !(t.price_per_unit >= 0) ||
        !std::isfinite(t.price_per_unit) || !(t.launch_overhead >= 0) ||
        !std::isfinite(t.launch_overhead) || t.billing_units < 1 || t.launch_units < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "worker type '", t.name,
          "': capacity, price and launch overhead must be finite and not negative, billing "
          "blocks at least one unit, and launch time not negative"));
    }
  }
  for (const RunningWorker& r : running) {
    if (r.type < 0 || r.type >= static_cast<int>(types.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("running worker ", r.id, " has unknown type ", r.type));
    }
  }
  if (std::none_of(types.begin(), types.end(),
                   [](const ProvisionedType& t) { return t.meets_slo && t.capacity_qps > 0; })) {
    return absl::FailedPreconditionError(
        "no worker type can serve within the SLO: nothing to provision with");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ProvisioningPlan> PlanProvisioning(absl::Span<const double> forecast,
                                                  absl::Span<const ProvisionedType> types,
                                                  absl::Span<const RunningWorker> running) {
  if (absl::Status valid = Validate(forecast, types, running); !valid.ok()) return valid;
  const int units = static_cast<int>(forecast.size());
  std::vector<double> capacity(static_cast<size_t>(units), 0.0);
  std::vector<bool> unreachable(static_cast<size_t>(units), false);
  std::vector<bool> used(running.size(), false);
  std::vector<int> launched(types.size(), 0);  // new workers planned, by type
  std::vector<int> in_use(types.size(), 0);    // running workers kept, by type
  auto at_ceiling = [&](int type) {
    const size_t i = static_cast<size_t>(type);
    return types[i].max_workers >= 0 && in_use[i] + launched[i] >= types[i].max_workers;
  };
  ProvisioningPlan plan;
  auto shortfall = [&](int t) {
    const double s = forecast[static_cast<size_t>(t)] - capacity[static_cast<size_t>(t)];
    return s > 1e-9 * std::max(1.0, forecast[static_cast<size_t>(t)]) ? s : 0.0;
  };
  // What serving from `serve_from` on takes off the shortfall in [first, last].
  auto serves = [&](double capacity_qps, int serve_from, int first, int last) {
    double served = 0;
    for (int t = std::max(first, serve_from); t <= last; ++t) {
      served += std::min(capacity_qps, shortfall(t));
    }
    return served;
  };
  while (true) {
    int tau = 0;
    while (tau < units && (shortfall(tau) == 0 || unreachable[static_cast<size_t>(tau)])) ++tau;
    if (tau == units) break;
    int end = tau;
    while (end + 1 < units && shortfall(end + 1) > 0) ++end;
    Candidate best;
    double best_per_request = std::numeric_limits<double>::infinity();
    auto consider = [&](const Candidate& c) {
      if (c.served <= 0) return;
      const double per_request = c.cost / c.served;
      if (per_request < best_per_request) {  // ties keep the earlier: running, then type order
        best_per_request = per_request;
        best = c;
      }
    };
    for (size_t r = 0; r < running.size(); ++r) {
      const ProvisionedType& type = types[static_cast<size_t>(running[r].type)];
      if (used[r] || !type.meets_slo || at_ceiling(running[r].type)) continue;
      Candidate c;
      c.running = static_cast<int>(r);
      c.type = running[r].type;
      c.serve_from = running[r].ready_in_units;
      c.cost = PaidCost(type, end + 1 - running[r].paid_units_left);
      c.served = serves(type.capacity_qps, c.serve_from, tau, end);
      consider(c);
    }
    for (size_t i = 0; i < types.size(); ++i) {
      const ProvisionedType& type = types[i];
      if (!type.meets_slo || at_ceiling(static_cast<int>(i))) continue;
      Candidate c;
      c.type = static_cast<int>(i);
      c.launch_at = std::max(0, tau - type.launch_units);
      c.serve_from = c.launch_at + type.launch_units;
      c.cost = type.launch_overhead + PaidCost(type, end + 1 - c.launch_at);
      c.served = serves(type.capacity_qps, c.serve_from, tau, end);
      consider(c);
    }
    if (!std::isfinite(best_per_request)) {
      unreachable[static_cast<size_t>(tau)] = true;  // nothing serves it in time: the burst pool's
      continue;
    }
    for (int t = best.serve_from; t < units; ++t) {
      capacity[static_cast<size_t>(t)] += types[static_cast<size_t>(best.type)].capacity_qps;
    }
    plan.planned_cost += best.cost;
    if (best.running >= 0) {
      used[static_cast<size_t>(best.running)] = true;
      ++in_use[static_cast<size_t>(best.type)];
      plan.keep.push_back(running[static_cast<size_t>(best.running)].id);
    } else {
      ++launched[static_cast<size_t>(best.type)];
      if (best.launch_at == 0) {
        plan.launch_now.push_back(best.type);
      } else {
        plan.launch_later.push_back({best.type, best.launch_at});
      }
    }
  }
  for (size_t r = 0; r < running.size(); ++r) {
    if (used[r]) continue;
    (running[r].paid_units_left > 0 ? plan.release_later : plan.release_now)
        .push_back(running[r].id);
  }
  plan.uncovered_qps.resize(static_cast<size_t>(units));
  for (int t = 0; t < units; ++t) plan.uncovered_qps[static_cast<size_t>(t)] = shortfall(t);
  return plan;
}

}  // namespace maitre::policy
