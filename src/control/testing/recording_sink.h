// An ActionSink that carries nothing out and records every call, for
// allocator tests.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "control/action_sink.h"

namespace maitre::control::testing {

struct RecordingSink : ActionSink {
  struct LoadCall {
    std::string worker;
    VariantKey key;
    int add = 0;
    std::vector<std::pair<VariantKey, int>> then_remove;
    std::function<void()> done;
  };
  void Load(const std::string& worker, const VariantKey& key, int add,
            std::vector<std::pair<VariantKey, int>> then_remove,
            std::function<void()> done) override {
    loads.push_back({worker, key, add, std::move(then_remove), std::move(done)});
  }
  void Remove(const std::string& worker, const VariantKey& key, int replicas) override {
    removes.push_back({worker, key.ToString() + " x" + std::to_string(replicas)});
  }
  void AddWorker(const std::string& type) override { added.push_back(type); }
  bool RetireWorker(const std::string& worker) override {
    retired.push_back(worker);
    return true;
  }
  void SetRouteWeights(std::vector<RouteWeight> weights) override {
    route_weights = std::move(weights);
  }
  void Record(const Decision& decision) override { decisions.push_back(decision); }

  std::vector<LoadCall> loads;
  std::vector<std::pair<std::string, std::string>> removes;
  std::vector<std::string> added;
  std::vector<std::string> retired;
  std::vector<Decision> decisions;
  std::vector<RouteWeight> route_weights;  // the last set
};

}  // namespace maitre::control::testing
