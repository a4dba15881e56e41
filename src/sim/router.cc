#include "sim/router.h"

#include "absl/strings/str_cat.h"

namespace maitre::sim {
namespace {

class LeastQueuedRouter final : public Router {
 public:
  absl::string_view name() const override { return "least-queued"; }

  int32_t Route(const RouteRequest& query, const ClusterSnapshot& cluster) const override {
    absl::Span<const int32_t> candidates = cluster.InstancesOf(query.app);
    if (candidates.size() == 1) return candidates[0];
    int32_t best = Pick(candidates, cluster, query.min_accuracy);
    // Nothing accurate enough: serve the query anyway rather than fail it;
    // the reports count it as served below its minimum accuracy.
    return best >= 0 ? best : Pick(candidates, cluster, -1);
  }

 private:
  static int32_t Pick(absl::Span<const int32_t> candidates, const ClusterSnapshot& cluster,
                      double min_accuracy) {
    int32_t best = -1;
    int64_t best_load = 0;
    for (int32_t i : candidates) {
      const InstanceView& v = cluster.instance(i);
      if (v.accuracy < min_accuracy) continue;
      int64_t load = static_cast<int64_t>(v.queued_rows) + v.running_rows;
      if (best < 0 || load < best_load) {
        best = i;
        best_load = load;
      }
    }
    return best;
  }
};

}  // namespace

absl::StatusOr<std::unique_ptr<Router>> CreateRouter(absl::string_view name) {
  if (name == "least-queued") return std::make_unique<LeastQueuedRouter>();
  return absl::InvalidArgumentError(
      absl::StrCat("unknown routing policy \"", name, "\"; choose least-queued"));
}

}  // namespace maitre::sim
