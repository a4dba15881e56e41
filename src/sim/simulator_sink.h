// The simulator's ActionSink: carries the allocator's decisions out on the
// simulated cluster (loads with their make-before-break removals, replica
// removals, worker launches and removals) and logs and counts them.
// Private to the simulator's sources.
#pragma once

#include "control/action_sink.h"
#include "sim/simulator.h"

namespace maitre::sim {

class Simulator::ControlSink : public control::ActionSink {
 public:
  explicit ControlSink(Simulator* sim) : sim_(sim) {}
  void Load(const std::string& worker, const VariantKey& key, int add,
            std::vector<std::pair<VariantKey, int>> then_remove,
            std::function<void()> done) override;
  void Remove(const std::string& worker, const VariantKey& key, int replicas) override;
  void AddWorker(const std::string& type) override;
  bool RetireWorker(const std::string& worker) override;
  void SetRouteWeights(std::vector<control::RouteWeight> weights) override;
  void Record(const control::Decision& decision) override;

 private:
  Simulator* sim_;
};

}  // namespace maitre::sim
