// MArk's instance provisioning (Zhang et al., USENIX ATC '19, §4.3,
// Algorithm 1; docs/policies.md, "Greedy provisioning (MArk)"): given the
// predicted peak rate of each coming unit, the worker types and the workers
// running now, which workers to keep, launch and release so that every
// unit's peak is served at the lowest cost.
//
// The paper's greedy FILL: find the first unit τ whose predicted rate the
// plan cannot serve, and the run of units τ..e that follows with the same
// shortfall; price every candidate at (launch overhead + what it is paid
// over the run) ÷ the requests it would serve there, and add the cheapest
// per request; repeat until no unit is short. Running workers are
// candidates with no launch overhead, each usable once; a worker type is a
// candidate as many times as it is picked. How we read the rest:
//   - a type is paid in whole billing blocks (`billing_units`); a running
//     worker costs nothing until the time it has paid for ends;
//   - a new worker serves `launch_units` after its launch. To serve from τ
//     it is launched at τ − launch_units: the plan launches now only what
//     must start now, and lists later launches, which the next round plans
//     again with a newer forecast (MArk: decisions every unit, launched
//     ahead of the load by the launch time);
//   - units no candidate can reach in time (sooner than any launch, with
//     no running worker left) are reported as uncovered, for the burst
//     pool; they do not stop the plan covering later units;
//   - a running worker left out of the plan is released now if its paid
//     time is over, else when it ends: demand may return before then, and
//     keeping it costs nothing (MArk's cool-down before destroying);
//   - types whose latency misses the SLO are no candidates (MArk meets the
//     SLO per instance), and neither are their running workers.
// A worker's capacity is the rate it serves within the SLO, from its
// profile at the batch the SLO allows (MArk's tuned N_batch).
//
// Thread-safety: a pure function over value types.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace maitre::policy {

struct ProvisionedType {
  std::string name;
  double capacity_qps = 0;     // C_i
  double price_per_unit = 0;   // P_i, per prediction unit
  int billing_units = 1;       // paid in whole blocks of this many units
  int launch_units = 0;        // units from its launch until it serves
  double launch_overhead = 0;  // O_i: what a launch costs beyond its paid time
  bool meets_slo = true;
  // The most workers of the type the plan may use: the running ones it
  // keeps and the new ones it launches (now or later); -1: no limit. At it
  // the type is no candidate, running or new, and the greedy takes the next
  // cheapest (a type at its ceiling must not hide the others). A running
  // worker idle until a later peak is still released when launching one
  // ahead of that peak costs less: the two do not run at once.
  int max_workers = -1;
};

struct RunningWorker {
  int id = 0;
  int type = 0;               // index into the types
  int paid_units_left = 0;    // units from now already paid for
  int ready_in_units = 0;     // 0: serving now; else still starting
};

struct ProvisioningPlan {
  std::vector<int> keep;            // running workers the plan uses
  std::vector<int> release_now;     // not used, and their paid time is over
  std::vector<int> release_later;   // not used; paid time left: release when it ends
  std::vector<int> launch_now;      // types, one entry per worker to launch now
  struct Later {
    int type = 0;
    int launch_at = 0;  // units from now
  };
  std::vector<Later> launch_later;  // planned, launched by a later round if still needed
  std::vector<double> uncovered_qps;  // per unit: predicted rate no worker can serve in time
  double planned_cost = 0;  // the greedy's own prices of what it added
};

// FailedPrecondition when no type meets the SLO; InvalidArgument for a
// negative or non-finite forecast, capacity or price, or a running worker
// of an unknown type.
absl::StatusOr<ProvisioningPlan> PlanProvisioning(absl::Span<const double> forecast_qps,
                                                  absl::Span<const ProvisionedType> types,
                                                  absl::Span<const RunningWorker> running);

}  // namespace maitre::policy
