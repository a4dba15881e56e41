// The seam where a query meets an instance. A static cluster routes each
// query to one of its app's instances through a Router; a managed cluster
// (routing "selection") uses the real variant-selection policy instead
// (selection_router.h).
//
// A Router is a pure policy (docs/architecture.md, "Policies and one clock"):
// Route() reads the snapshot and the query and returns an instance index, with
// no side effects.
//
// Thread-safety: routers are immutable after creation; a ClusterSnapshot is
// a view that is valid only during the call it is passed to.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/time.h"

namespace maitre::sim {

// What the router may know about one loaded instance.
struct InstanceView {
  int32_t app = 0;           // the app the instance serves
  int32_t variant = 0;       // index into the experiment's variants
  int32_t worker_type = 0;   // index into the experiment's worker types
  double accuracy = 0;       // the variant's accuracy
  int32_t queued_rows = 0;   // waiting, not yet dispatched
  int32_t running_rows = 0;  // in the batch now executing (0 when idle)
};

class ClusterSnapshot {
 public:
  ClusterSnapshot(absl::Span<const InstanceView> instances,
                  absl::Span<const std::vector<int32_t>> by_app, Nanos now)
      : instances_(instances), by_app_(by_app), now_(now) {}

  Nanos now() const { return now_; }
  absl::Span<const InstanceView> instances() const { return instances_; }
  const InstanceView& instance(int32_t i) const { return instances_[i]; }
  // Indices of the instances serving `app`.
  absl::Span<const int32_t> InstancesOf(int32_t app) const { return by_app_[app]; }

 private:
  absl::Span<const InstanceView> instances_;
  absl::Span<const std::vector<int32_t>> by_app_;
  Nanos now_;
};

struct RouteRequest {
  int32_t app = 0;
  int32_t rows = 1;
  Nanos arrival = 0;
  Nanos deadline = kInfiniteFuture;
  double min_accuracy = 0;
};

class Router {
 public:
  virtual ~Router() = default;
  virtual absl::string_view name() const = 0;
  // The instance to queue the query on, or -1 to reject it (no instance).
  virtual int32_t Route(const RouteRequest& query, const ClusterSnapshot& cluster) const = 0;
};

// "least-queued": among the app's instances whose variant meets the query's
// minimum accuracy (all of them if none does), the one with the fewest rows
// queued or running; ties go to the lowest index, so routing is
// deterministic.
absl::StatusOr<std::unique_ptr<Router>> CreateRouter(absl::string_view name);

}  // namespace maitre::sim
