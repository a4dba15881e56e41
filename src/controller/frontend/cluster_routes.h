// The HTTP routes about the cluster's workers (docs/api.md, "The cluster"):
//   POST /v2/cluster/workers/{id}/interrupt[?lead_s=S]   a spot interruption
//        notice for that worker, as a cloud would send (admin key)
//   GET  /v2/cluster/cost   what the workers cost so far and per hour now,
//        by worker type and market, split among apps by what each used,
//        and with the server's earlier runs (admin key)
//   GET  /v2/cluster/burst-pool   the burst pool's workers, their instances
//        and what the pool took, answered and turned away (admin key)
//
// Thread-safety: the routes are thread-safe; what the options point to
// outlives the router.
#pragma once

#include "controller/access/http_access.h"
#include "controller/dataplane/burst_pool.h"
#include "controller/provision/app_usage.h"
#include "controller/provision/cost_meter.h"
#include "controller/provision/worker_provider.h"
#include "controller/registry/cost_store.h"
#include "core/clock.h"
#include "http/router.h"

namespace maitre::controller {

struct ClusterRoutesOptions {
  WorkerProvider* provider = nullptr;  // null: workers joined by hand
  const CostMeter* cost = nullptr;     // null with no provider
  const AppUsage* app_usage = nullptr;  // null: no split among apps
  BurstPool* burst_pool = nullptr;     // null: no --burst-pool
  // What earlier runs paid (null: none kept), and when this run started.
  const registry::CostStore* history = nullptr;
  int64_t run_started_unix_ms = 0;
  const Clock* clock = SteadyClock::Get();
  // The notice's lead when the call names none: a cloud's two minutes.
  double default_lead_s = 120;
};

void AddClusterRoutes(http::Router& router, const ClusterRoutesOptions& options,
                      const HttpAccess& access);

}  // namespace maitre::controller
