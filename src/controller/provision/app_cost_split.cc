#include "controller/provision/app_cost_split.h"

namespace maitre::controller {

AppCostSplit SplitCostByApp(const CostReport& report,
                            const std::map<std::string, AppUsed>& usage) {
  double lives_cost = report.cost;
  // By type: what one query charged by the request cost, and how many of
  // those queries no app has counted.
  std::map<std::string, double> price_per_request;
  std::map<std::string, int64_t> unclaimed_requests;
  for (const CostLine& line : report.lines) {
    lives_cost -= line.request_cost;
    if (line.requests > 0) {
      price_per_request[line.type] = line.request_cost / static_cast<double>(line.requests);
      unclaimed_requests[line.type] = line.requests;
    }
  }
  double compute_s = 0;
  for (const auto& [app, used] : usage) compute_s += used.compute_s;

  AppCostSplit split;
  for (const auto& [app, used] : usage) {
    AppCost c{app};
    c.share = compute_s > 0 ? used.compute_s / compute_s : 0;
    c.cost = c.share * lives_cost;
    c.per_hour = c.share * report.per_hour;
    for (const auto& [type, n] : used.requests_by_type) {
      c.requests += n;
      auto price = price_per_request.find(type);
      if (price == price_per_request.end()) continue;  // the report charged none
      c.cost += static_cast<double>(n) * price->second;
      unclaimed_requests[type] -= n;
    }
    split.apps.push_back(std::move(c));
  }
  if (compute_s <= 0) {
    split.unattributed_cost = lives_cost;
    split.unattributed_per_hour = report.per_hour;
  }
  for (const auto& [type, n] : unclaimed_requests) {
    if (n > 0) split.unattributed_cost += static_cast<double>(n) * price_per_request[type];
  }
  return split;
}

}  // namespace maitre::controller
