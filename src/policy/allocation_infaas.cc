#include "policy/allocation_infaas.h"

#include <algorithm>
#include <numeric>
#include <set>
#include <tuple>

namespace maitre::policy {
namespace {

// One type's view of a whole-cluster placement.
class TypeView {
 public:
  TypeView(const AllocationProblem& p, int q) : p_(p), q_(q) {}

  double Peak(int d, int m) const { return m < 0 ? 0.0 : p_.peak_qps[p_.devices[d].type][m]; }
  bool Serves(int m) const { return m >= 0 && p_.variants[m].query_type == q_; }

  double Capacity(const std::vector<int>& placement) const {
    double sum = 0;
    for (size_t d = 0; d < placement.size(); ++d) {
      if (Serves(placement[d])) sum += Peak(static_cast<int>(d), placement[d]);
    }
    return sum;
  }
  // What INFaaS-Accuracy minimises: the accuracy the type's devices give up.
  double Drop(const std::vector<int>& placement) const {
    double sum = 0;
    for (int m : placement) {
      if (Serves(m)) sum += 1 - p_.variants[m].accuracy;
    }
    return sum;
  }
  int Devices(const std::vector<int>& placement) const {
    return static_cast<int>(std::count_if(placement.begin(), placement.end(),
                                          [&](int m) { return Serves(m); }));
  }

  // `placement` with the type moved to `w`: its own devices and the free
  // ones, fastest for `w` first (its own first among equals, so that fewer
  // devices change), until the capacity reaches `target`. Devices it no
  // longer needs are freed.
  std::vector<int> SwitchTo(std::vector<int> placement, int w, double target) const {
    std::vector<int> pool;
    for (size_t d = 0; d < placement.size(); ++d) {
      if (Serves(placement[d]) || placement[d] < 0) pool.push_back(static_cast<int>(d));
    }
    std::stable_sort(pool.begin(), pool.end(), [&](int a, int b) {
      return std::make_tuple(Peak(a, w), Serves(placement[a])) >
             std::make_tuple(Peak(b, w), Serves(placement[b]));
    });
    for (int d : pool) {
      if (Serves(placement[d])) placement[d] = -1;
    }
    double capacity = 0;
    for (int d : pool) {
      if (capacity >= target || Peak(d, w) <= 0) break;
      placement[d] = w;
      capacity += Peak(d, w);
    }
    return placement;
  }

  // `placement` with free devices (fastest for `v` first) given `v` until
  // the capacity reaches `target`.
  std::vector<int> Replicate(std::vector<int> placement, int v, double target) const {
    std::vector<int> free;
    for (size_t d = 0; d < placement.size(); ++d) {
      if (placement[d] < 0 && Peak(static_cast<int>(d), v) > 0) free.push_back(static_cast<int>(d));
    }
    std::stable_sort(free.begin(), free.end(), [&](int a, int b) { return Peak(a, v) > Peak(b, v); });
    double capacity = Capacity(placement);
    for (int d : free) {
      if (capacity >= target) break;
      placement[d] = v;
      capacity += Peak(d, v);
    }
    return placement;
  }

 private:
  const AllocationProblem& p_;
  const int q_;
};

int Changed(const std::vector<int>& a, const std::vector<int>& b) {
  int n = 0;
  for (size_t d = 0; d < a.size(); ++d) n += a[d] != b[d] ? 1 : 0;
  return n;
}

}  // namespace

std::vector<int> InfaasAccuracyPlacement(const AllocationProblem& p,
                                         const InfaasAccuracyOptions& o) {
  const int nd = static_cast<int>(p.devices.size());
  const int nq = static_cast<int>(p.query_types.size());
  const int nm = static_cast<int>(p.variants.size());
  std::vector<int> placement(nd, -1);
  for (int d = 0; d < nd; ++d) {
    const int m = p.devices[d].current;
    if (m >= 0 && m < nm && p.peak_qps[p.devices[d].type][m] > 0) placement[d] = m;
  }
  // The type shortest of capacity first: it gets the first pick of the
  // free devices.
  auto coverage = [&](int q) {
    const double s = p.query_types[q].demand_qps;
    return s > 0 ? TypeView(p, q).Capacity(placement) / s : 1e300;
  };
  std::vector<int> order(nq);
  std::iota(order.begin(), order.end(), 0);
  std::vector<double> covered(nq);
  for (int q = 0; q < nq; ++q) covered[q] = coverage(q);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return covered[a] < covered[b]; });

  for (int q : order) {
    const TypeView view(p, q);
    const double demand = p.query_types[q].demand_qps;
    const double capacity = view.Capacity(placement);
    const bool up = capacity < o.slack * demand;
    if (!up && capacity < o.scale_down_headroom * demand) continue;
    const double target = up ? o.slack * demand : o.scale_down_headroom * demand;

    std::vector<std::vector<int>> moves;
    std::set<int> running;
    for (int d = 0; d < nd; ++d) {
      if (view.Serves(placement[d])) running.insert(placement[d]);
    }
    if (up) {
      for (int v : running) moves.push_back(view.Replicate(placement, v, target));
    } else {
      for (int d = 0; d < nd; ++d) {
        if (!view.Serves(placement[d])) continue;
        std::vector<int> fewer = placement;
        fewer[d] = -1;
        moves.push_back(std::move(fewer));
      }
    }
    for (int w = 0; w < nm; ++w) {
      if (!view.Serves(w)) continue;
      std::vector<int> moved = view.SwitchTo(placement, w, target);
      if (up || view.Devices(moved) <= view.Devices(placement)) moves.push_back(std::move(moved));
    }

    // The least accuracy drop among the moves that reach the target, then
    // the fewest devices, then the fewest changes.
    auto key = [&](const std::vector<int>& m) {
      return std::make_tuple(view.Drop(m), view.Devices(m), Changed(m, placement));
    };
    const std::vector<int>* best = nullptr;
    for (const std::vector<int>& m : moves) {
      if (view.Capacity(m) < target - 1e-9) continue;
      if (best == nullptr || key(m) < key(*best)) best = &m;
    }
    if (up && best == nullptr) {
      // Nothing reaches it: as much capacity as the free devices allow.
      for (const std::vector<int>& m : moves) {
        if (view.Capacity(m) > capacity + 1e-9 &&
            (best == nullptr || view.Capacity(m) > view.Capacity(*best))) {
          best = &m;
        }
      }
    }
    if (best == nullptr) continue;
    if (!up) {
      const auto now = key(placement);
      const auto then = key(*best);
      const bool better = std::get<0>(then) < std::get<0>(now) - 1e-12 ||
                          (std::get<0>(then) <= std::get<0>(now) + 1e-12 &&
                           std::get<1>(then) < std::get<1>(now));
      if (!better) continue;
    }
    placement = *best;
  }
  return placement;
}

}  // namespace maitre::policy
