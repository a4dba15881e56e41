#include "control/refused_share.h"

namespace maitre::control {

std::map<size_t, double> ShareRefused(const std::map<std::string, double>& refused_qps,
                                      const std::vector<ServingInstance>& instances) {
  struct AppTotals {
    double arrivals = 0;
    int serving = 0;
  };
  std::map<std::string, AppTotals> totals;
  for (const ServingInstance& inst : instances) {
    if (refused_qps.count(inst.app) == 0) continue;
    totals[inst.app].arrivals += inst.arrival_qps;
    ++totals[inst.app].serving;
  }
  std::map<size_t, double> shares;
  for (size_t i = 0; i < instances.size(); ++i) {
    auto refused = refused_qps.find(instances[i].app);
    if (refused == refused_qps.end()) continue;
    const AppTotals& t = totals[instances[i].app];
    shares[i] = refused->second * (t.arrivals > 0 ? instances[i].arrival_qps / t.arrivals
                                                  : 1.0 / t.serving);
  }
  return shares;
}

}  // namespace maitre::control
