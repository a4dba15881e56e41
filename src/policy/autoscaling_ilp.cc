#include "policy/autoscaling_ilp.h"

#include <algorithm>
#include <cmath>

#include <CbcModel.hpp>
#include <CoinPackedVector.hpp>
#include <OsiClpSolverInterface.hpp>

#include "policy/linear_rows.h"

namespace maitre::policy {
namespace {

constexpr double kEps = 1e-9;

// Replicas of `per_replica` qps that cover `qps` (0 when nothing is missing).
int Cover(double qps, double per_replica) {
  if (qps <= kEps) return 0;
  return static_cast<int>(std::ceil(qps / per_replica - 1e-9));
}

}  // namespace

double ScaleActionsCost(const std::vector<ModelScaleAction>& actions) {
  double cost = 0;
  for (const ModelScaleAction& a : actions) {
    if (a.kind != ModelScaleAction::Kind::kNeedsPlacement) cost += a.cost_per_s;
  }
  return cost;
}

double SetupCostPerSecond(const ModelScalingSnapshot& snapshot) {
  double cost = 0;
  for (const ScalingModel& m : snapshot.models) {
    for (const ScalingVariant& v : m.variants) cost += v.cost_per_s * (v.replicas + v.loading);
  }
  return cost;
}

absl::StatusOr<ScaleUpIlpResult> SolveScaleUpIlp(const ModelScalingSnapshot& snapshot,
                                                 const ModelAutoscalerOptions& options,
                                                 const ScaleUpIlpOptions& ilp) {
  if (absl::Status valid = ValidateScalingSnapshot(snapshot); !valid.ok()) return valid;
  if (auto checked = ModelAutoscaler::Create(options); !checked.ok()) return checked.status();

  // Variant k (in snapshot order) owns columns x = 2k, its final replica
  // count, and p = 2k + 1, the replicas it adds.
  std::vector<double> lower, upper, objective;
  double constant = 0;  // -Σ C_v·n_v: δ = x - n
  for (const ScalingModel& m : snapshot.models) {
    double target = options.slack * m.load_qps;
    bool scale = m.load_qps > 0 && ModelCapacityQps(m) < target - kEps;
    double floor = AccuracyFloor(m, options.max_accuracy_drop);
    for (const ScalingVariant& v : m.variants) {
      int n = v.replicas + v.loading;
      // x: a model with enough headroom is left as it is; otherwise replicas
      // may be removed (not those still loading) and, where the variant may
      // be added, added up to what would cover the whole target alone.
      double x_lo = scale ? v.loading : n;
      double x_hi = n;
      if (scale && MayAddReplicas(v, floor)) {
        x_hi = n + std::max(Cover(target, v.saturation_qps), options.min_replicas_per_model);
      }
      lower.push_back(x_lo);
      upper.push_back(x_hi);
      objective.push_back(v.cost_per_s);
      // p >= max(x - n, 0): what loading costs and the peak memory count.
      lower.push_back(0);
      upper.push_back(std::max(0.0, x_hi - n));
      objective.push_back(v.cost_per_s * options.lambda_per_s * v.load_s);
      constant -= v.cost_per_s * n;
    }
  }
  const int ncols = static_cast<int>(objective.size());
  ScaleUpIlpResult result;
  result.replicas.resize(snapshot.models.size());
  for (size_t mi = 0; mi < snapshot.models.size(); ++mi) {
    result.replicas[mi].assign(snapshot.models[mi].variants.size(), 0);
  }
  if (ncols == 0) {
    result.feasible = true;
    result.optimal = true;
    return result;
  }

  LinearRows rows(ncols);
  constexpr double inf = LinearRows::kInfinity;
  size_t col = 0;
  CoinPackedVector cores_row, memory_row;
  for (const ScalingModel& m : snapshot.models) {
    double target = options.slack * m.load_qps;
    bool scale = m.load_qps > 0 && ModelCapacityQps(m) < target - kEps;
    CoinPackedVector throughput, count;
    for (const ScalingVariant& v : m.variants) {
      int x = static_cast<int>(2 * col), p = x + 1;
      int n = v.replicas + v.loading;
      CoinPackedVector link;  // p - x >= -n
      link.insert(p, 1.0);
      link.insert(x, -1.0);
      rows.Add(link, -n, inf);
      if (v.saturation_qps > 0) throughput.insert(x, v.saturation_qps);
      count.insert(x, 1.0);
      if (v.cores > 0) cores_row.insert(x, v.cores);
      if (v.memory_mb > 0) memory_row.insert(p, v.memory_mb);
      ++col;
    }
    if (scale) {
      rows.Add(throughput, target, inf);
      rows.Add(count, options.min_replicas_per_model, inf);
    }
  }
  // Cores once the move is done (a loading replica runs no batches, and the
  // replicas it replaces are drained once it serves); memory at the
  // transition's peak: everything there now plus everything added (removals
  // happen after the new replicas are ready).
  rows.Add(cores_row, -inf, snapshot.cores - snapshot.reserved_cores + kEps);
  if (snapshot.memory_mb > 0) {
    rows.Add(memory_row, -inf, snapshot.memory_mb - UsedMemoryMb(snapshot) + kEps);
  }

  // Costs are ~1e-5 $/s. CBC's tolerances (its cutoff increment, its
  // absolute gap) are absolute, so the objective is scaled to order one.
  double largest = 0;
  for (double c : objective) largest = std::max(largest, std::abs(c));
  if (largest > 0) {
    for (double& c : objective) c /= largest;
  }

  OsiClpSolverInterface solver;
  solver.messageHandler()->setLogLevel(0);
  solver.loadProblem(rows.matrix(), lower.data(), upper.data(), objective.data(), rows.lower(),
                     rows.upper());
  for (int c = 0; c < ncols; ++c) solver.setInteger(c);
  solver.setObjSense(1.0);

  CbcModel model(solver);
  model.setLogLevel(0);
  model.messageHandler()->setLogLevel(0);
  model.setMaximumSeconds(ilp.time_limit_s);
  // Prove optimality to the last replica rather than to CBC's default gaps.
  model.setAllowableGap(1e-9);
  model.setAllowableFractionGap(1e-9);
  model.setDblParam(CbcModel::CbcCutoffIncrement, 1e-9);
  model.branchAndBound();
  result.nodes = model.getNodeCount();
  const double* best = model.bestSolution();
  if (best == nullptr) return result;  // infeasible (or nothing found in time)
  result.feasible = true;
  result.optimal = model.isProvenOptimal();
  double value = constant;
  col = 0;
  for (size_t mi = 0; mi < snapshot.models.size(); ++mi) {
    for (size_t vi = 0; vi < snapshot.models[mi].variants.size(); ++vi) {
      const ScalingVariant& v = snapshot.models[mi].variants[vi];
      int x = static_cast<int>(std::lround(best[2 * col]));
      int n = v.replicas + v.loading;
      result.replicas[mi][vi] = x;
      // Recomputed from the rounded counts, so the value is exact even when
      // the solver's p sits above max(x - n, 0) at zero cost.
      value += v.cost_per_s * x +
               v.cost_per_s * options.lambda_per_s * v.load_s * std::max(0, x - n);
      ++col;
    }
  }
  result.objective_per_s = value;
  return result;
}

}  // namespace maitre::policy
