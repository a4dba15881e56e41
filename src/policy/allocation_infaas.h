// INFaaS-Accuracy, Proteus's strongest baseline (ASPLOS'24 §6.1.1;
// docs/accuracy-scaling.md, "Baselines"): INFaaS's autoscaling heuristic
// (INFaaS §4.2: spot a query type whose capacity is in danger, weigh
// replicating its variant against switching to another, take the cheaper
// move) with the two roles of cost and accuracy swapped, as the Proteus
// paper describes: the cost of a setup is its accuracy drop, and the
// budget is the fixed cluster. It plans placements on the same
// AllocationProblem as the MILP (policy/allocation_milp.h), so the two are
// compared on equal terms; AssignForPlacement then splits each type's
// queries over the devices it chose.
//
// One call is one round of the heuristic, from the placement the devices
// hold now (AllocationProblem::Device::current). Query types are visited one
// at a time, the one shortest of capacity first, and each may take only
// devices that host nothing: a type never takes a device from another, and
// nothing looks at all types together. That is the local view that leaves
// INFaaS short of Proteus's accuracy at a peak.
//  - Scale up, when a type's capacity is below `slack` × its demand:
//    either replicate one of its variants onto free devices, or move the
//    whole type (its devices and free ones) to another variant; of the
//    moves that reach `slack` × demand, the one whose devices add up to the
//    least accuracy drop, Σ_d (1 − a_d), fewer devices on a tie. When none
//    does, the move with the most capacity.
//  - Scale down, when a type's capacity is at least `scale_down_headroom`
//    × its demand: give back one device, or move to another variant on
//    fewer or the same devices, when the result still has that headroom
//    and a smaller accuracy drop (or the same drop on fewer devices).
//
// Thread-safety: a pure function.
#pragma once

#include <vector>

#include "policy/allocation_milp.h"

namespace maitre::policy {

struct InfaasAccuracyOptions {
  // INFaaS's thresholds (the model autoscaler's, policy/autoscaling_model.h).
  double slack = 1.05;
  double scale_down_headroom = 1.15;
};

// The placement after one round: a variant index per device, -1 for none.
// The problem must be well formed (as SolveAllocation checks it).
std::vector<int> InfaasAccuracyPlacement(const AllocationProblem& problem,
                                         const InfaasAccuracyOptions& options = {});

}  // namespace maitre::policy
