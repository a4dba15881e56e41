// Spreading refused demand (docs/policies.md, "How the control plane drives
// them"): queries turned away before reaching any worker are demand the
// autoscalers must see, so each app's refused rate is added to the offered
// load of the instances serving the app, in proportion to the queries each
// was sent (evenly among them when none was sent any).
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace maitre::control {

struct ServingInstance {
  std::string app;
  double arrival_qps = 0;
};
// Each instance's share of its app's refused rate, keyed by the caller's
// instance index. Apps with no serving instance get nothing (selection
// plans their loads).
std::map<size_t, double> ShareRefused(const std::map<std::string, double>& refused_qps,
                                      const std::vector<ServingInstance>& instances);

}  // namespace maitre::control
