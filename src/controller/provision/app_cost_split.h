// The cluster's cost split among apps by what each used (docs/api.md,
// "The cluster"): the workers' lives (everything but what was
// charged by the request) by each app's share of the compute seconds, and
// each app's own queries charged by the request at their type's price. The
// rate now (`per_hour`) is split by the same share.
//
// Thread-safety: a pure function.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "controller/provision/app_usage.h"
#include "controller/provision/cost_meter.h"

namespace maitre::controller {

struct AppCost {
  std::string app;
  double share = 0;     // of all apps' compute seconds, in [0, 1]
  double cost = 0;      // dollars so far
  double per_hour = 0;  // dollars an hour now
  int64_t requests = 0;  // its queries charged by the request
};

struct AppCostSplit {
  std::vector<AppCost> apps;  // by name
  // What no app accounts for: all of the workers' lives and rate while no
  // app has computed anything, and requests charged for no app's query.
  double unattributed_cost = 0;
  double unattributed_per_hour = 0;
};

// `usage` should be read before `report` is: a request is charged to the
// meter before it is counted for its app, so the report then covers every
// request the usage counts.
AppCostSplit SplitCostByApp(const CostReport& report,
                            const std::map<std::string, AppUsed>& usage);

}  // namespace maitre::controller
