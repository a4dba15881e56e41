// Proteus's resource allocation (ASPLOS'24 §4.1, Eqs. 1–7): which variant
// each device hosts (model selection and placement) and what share of each
// query type goes to each device (query assignment), chosen jointly by one
// mixed-integer program solved exactly with CBC. docs/policies.md,
// "Accuracy scaling (Proteus)", writes the formulation out; in short:
//  - a device hosts at most one variant (Eq. 1) and serves only the query
//    type of the variant it hosts (Eq. 3); a variant belongs to exactly one
//    query type (its family, as in the paper's §6.1.2);
//  - what a device serves is bounded by what it is sent (Eq. 4) and by its
//    peak throughput P (Eq. 5);
//  - Eq. 6 ("serve all demand") becomes a served fraction λ ≤ 1 that every
//    query type reaches, maximised first: when the cluster cannot carry the
//    demand even at the lowest accuracy, the plan shrinks every type's
//    demand by the same factor, which is the paper's "decrease s_q and solve
//    again" done in one solve. Then the total served, then effective
//    accuracy Σ_q a_q (Eq. 7), then fewer moves of loaded variants.
// Devices of one type are interchangeable, so the program counts how many
// devices of each type host each variant; the per-device plan (x, y, z) is
// read off that count, keeping loaded variants where they are. This is
// exact, and it removes the devices' symmetry that makes the per-device
// program slow at a hundred devices.
//
// Thread-safety: SolveAllocation is a pure function (each call builds its
// own solver); safe to call from several threads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/profile.h"

namespace maitre::policy {

struct AllocationProblem {
  struct QueryType {
    std::string name;
    double demand_qps = 0;  // s_q
  };
  struct Variant {
    std::string name;
    int query_type = 0;   // the one type it serves (B_{m,q})
    double accuracy = 0;  // A_m, normalised in its family (1 = most accurate)
  };
  struct Device {
    std::string name;
    int type = 0;  // index into device_types
    // The variant it hosts now, -1 for none. One it cannot serve with (peak
    // 0) is always unloaded, and that counts as a move.
    int current = -1;
  };
  std::vector<QueryType> query_types;
  std::vector<Variant> variants;
  std::vector<std::string> device_types;
  std::vector<Device> devices;
  // P_{d,m,q}: peak_qps[type][variant] is the queries per second one device
  // of that type serves with the variant within its type's latency
  // objective; 0 where it cannot host it (no profile, no fit, too slow).
  std::vector<std::vector<double>> peak_qps;
};

struct AllocationOptions {
  // CBC stops here and the best plan found so far is returned (with its gap).
  double time_limit_s = 5;
  // CBC stops once the plan is this close to its best bound, in units of
  // the objective's accuracy tier (effective accuracy × served share): 1e-3
  // is a tenth of a percentage point, well inside the profiles' own noise.
  // Proving 1e-4 takes several times longer at 40 devices
  // (docs/policies.md, "Solve time").
  double absolute_gap = 1e-3;
  // What keeping a loaded variant is worth, in effective accuracy (a share
  // of all queries). A move must raise effective accuracy by more than this
  // to be made, so a re-solve at unchanged demand moves nothing.
  // The solver starts from the current placement and only ever replaces it
  // with a strictly better plan, so any positive penalty keeps an optimal
  // plan in place; with 1e-4, one device of forty moves when that raises
  // the accuracy of its share of the queries by 0.4 percentage points.
  double move_penalty = 1e-4;
};

struct AllocationPlan {
  // x: the variant each device hosts, -1 for none.
  std::vector<int> device_variant;
  // z_{d,q}: queries per second of each type each device is planned to
  // serve; y_{d,q} = z_{d,q} / s_q (0 for a type without demand).
  std::vector<std::vector<double>> served_qps;
  std::vector<std::vector<double>> share;
  // The fraction of every type's demand that the plan serves (λ; 1 when
  // the cluster carries all of it).
  double served_fraction = 0;
  double served_qps_total = 0;
  // Σ_q a_q / Σ served: the mean accuracy of the queries served.
  double effective_accuracy = 0;
  // Per query type: served qps and the mean accuracy they are served at.
  std::vector<double> type_served_qps;
  std::vector<double> type_accuracy;
  // Devices whose loaded variant the plan replaces or unloads, and devices
  // that load a variant (including those replacing one).
  int moves = 0;
  int loads = 0;
  // The solver's view: objective (the weighted sum above: 100·λ + 10·served
  // share + accuracy tier + move_penalty per kept variant), the distance
  // to its best bound in the same units (like absolute_gap), whether it
  // proved the plan within absolute_gap of optimal, and its wall time.
  double objective = 0;
  double gap = 0;
  bool optimal = false;
  double solve_s = 0;
};

// InvalidArgument for a malformed problem: no query types, no variants, no
// devices, a variant or device naming an unknown type, a negative or
// non-finite demand, accuracy or peak. A plan is always returned otherwise:
// with no capacity at all for a type it serves none of it (λ = 0), and a
// solve stopped by the time limit before any plan is found is Unavailable.
absl::StatusOr<AllocationPlan> SolveAllocation(const AllocationProblem& problem,
                                               const AllocationOptions& options = {});

// P_{d,m,q} (the paper's "Estimation of throughput capacity"): `replicas`
// copies of the variant, each running the largest batch whose p99 fits half
// of `slo_ms` (a query may wait one whole batch before riding the next), at
// that batch's median latency. 0 when batch 1's p99 does not fit.
double PeakThroughputQps(const Profile& profile, double slo_ms, int replicas);

// The same objective as SolveAllocation's, for a plan's device_variant
// chosen by someone else: the best query assignment for fixed placements,
// by filling each type's most accurate devices first (exact: with
// placements fixed the types are independent). For tests and baselines.
AllocationPlan AssignForPlacement(const AllocationProblem& problem,
                                  const std::vector<int>& device_variant,
                                  const AllocationOptions& options = {});

// The problem without dominated variants: on each device type, a variant
// of a query type is dropped (its P set to 0) when another of the same type
// is at least as accurate and at least as fast there, and strictly one of
// the two (equal pairs keep the first). Swapping a dominated variant for
// its dominator never lowers λ, the served total or accuracy, so the
// optimum is unchanged; the solver then has fewer columns, and plans do not
// pick, among equally accurate variants, one with less headroom. A variant
// some device of the type hosts now is kept, so that pruning never forces
// a move. SolveAllocation applies it itself.
AllocationProblem WithoutDominatedVariants(AllocationProblem problem);

// A fast placement without the solver: cover every type's demand with
// its fastest variants, least-covered type first, then raise accuracy one
// device at a time while no type serves less. SolveAllocation starts from
// it; it is also what the plan falls back to when the solver finds nothing
// better in time.
std::vector<int> GreedyPlacement(const AllocationProblem& problem);

// Local search from `placement`: changes one device's variant (or empties
// it), or exchanges the variants of two devices of different types, while
// that raises the objective, until nothing does.
std::vector<int> ImprovePlacement(const AllocationProblem& problem, std::vector<int> placement,
                                  const AllocationOptions& options = {});

}  // namespace maitre::policy
