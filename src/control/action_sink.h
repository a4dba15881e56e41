// How an allocator's decisions are carried out in a world (docs/architecture.md,
// "One control plane"). The controller's sink sends Loads and Unloads to
// worker processes and asks its provider for workers; the simulator's
// schedules simulated loads and launches. An allocator never learns which.
//
// Thread-safety: the controller's sink is called from its control thread
// only, and its `done` callbacks may come from another thread.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/time.h"
#include "core/variant.h"

namespace maitre::control {

// One decision as carried out, for logs, counters and tests: which rule
// acted (e.g. "replicate", "vacate", "add-worker"), where, and why.
struct Decision {
  Nanos at = 0;
  std::string kind;
  std::string worker;  // the worker acted on, or the type for add-worker
  std::string target;  // the variant key or model, when there is one
  int replicas = 0;
  std::string reason;
  std::string for_worker = {};  // placement: the worker whose load it takes
  // Why the model autoscaler chose the variant it loads ("headroom",
  // "capacity", "savings": policy::ModelScaleCauseName); empty for
  // decisions that choose no variant. The variant-choice metric's label.
  std::string cause = {};
};
std::string DecisionLine(const Decision& decision);

// A plan's query assignment for one instance: route queries of its app to
// the variant on the worker in proportion to `weight` (the weighted query
// router reads it; others ignore it).
struct RouteWeight {
  std::string worker;
  VariantKey key;
  double weight = 0;
};

class ActionSink {
 public:
  virtual ~ActionSink() = default;
  // Loads `add` more replicas of `key` on `worker` (creating the instance if
  // it has none). Once they serve, removes `then_remove` (variant, replicas)
  // there: make before break. `done` is called once, when the load has
  // ended either way; it may be called from another thread.
  virtual void Load(const std::string& worker, const VariantKey& key, int add,
                    std::vector<std::pair<VariantKey, int>> then_remove,
                    std::function<void()> done) = 0;
  // Removes `replicas` ready replicas of `key` on `worker`; all of them
  // unloads the instance, which first answers what it holds.
  virtual void Remove(const std::string& worker, const VariantKey& key, int replicas) = 0;
  // Asks for one more worker of `type`.
  virtual void AddWorker(const std::string& type) = 0;
  // Gives back an idle worker; false when it cannot (already gone).
  virtual bool RetireWorker(const std::string& worker) = 0;
  // Replaces every route weight (an empty list clears them).
  virtual void SetRouteWeights(std::vector<RouteWeight> weights) = 0;
  // Every decision carried out, in order, after it was.
  virtual void Record(const Decision& decision) = 0;
};

}  // namespace maitre::control
