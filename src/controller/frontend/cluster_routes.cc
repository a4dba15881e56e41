#include "controller/frontend/cluster_routes.h"

#include <map>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "controller/frontend/status_http.h"
#include "controller/provision/app_cost_split.h"

namespace maitre::controller {
namespace {

using nlohmann::json;

constexpr char kNoProvider[] =
    "this server starts no workers of its own (they joined by hand), so it neither sends "
    "interruption notices nor pays for workers";

// A notice's lead, in seconds: at most a day, as no cloud warns sooner.
absl::StatusOr<Nanos> ParseLead(absl::string_view text, double default_s) {
  double lead_s = default_s;
  if (!text.empty() && (!absl::SimpleAtod(text, &lead_s) || !(lead_s >= 0) ||
                        lead_s > 24 * 3600)) {
    return absl::InvalidArgumentError(
        absl::StrCat("lead_s must be a number of seconds from 0 to 86400, not \"", text, "\""));
  }
  return FromSeconds(lead_s);
}

// Each app's part of this run's cost (docs/api.md, "The cluster").
json AppsJson(const AppCostSplit& split) {
  json apps = json::array();
  for (const AppCost& a : split.apps) {
    apps.push_back({{"app", a.app},
                    {"share", a.share},
                    {"cost", a.cost},
                    {"per_hour", a.per_hour},
                    {"requests", a.requests}});
  }
  return apps;
}

// This run's cost added to the earlier runs', by worker type: what the
// cluster has cost since the registry's first run.
json HistoryJson(const registry::CostStore& store, const ClusterRoutesOptions& o,
                 const CostReport& now) {
  const registry::CostHistory earlier = store.Before(o.run_started_unix_ms);
  std::map<std::string, std::pair<double, int64_t>> by_type;  // cost, workers
  for (const registry::CostRunLine& l : earlier.lines) by_type[l.type] = {l.cost, l.workers};
  double total = 0;
  for (const CostLine& l : now.lines) {
    by_type[l.type].first += l.cost;
    by_type[l.type].second += l.running + l.ended;
  }
  json types = json::array();
  for (const auto& [type, paid] : by_type) {
    types.push_back({{"type", type}, {"cost", paid.first}, {"workers", paid.second}});
    total += paid.first;
  }
  return {{"runs", earlier.runs + 1},
          {"since_unix_ms", earlier.runs > 0 ? earlier.first_run_unix_ms : o.run_started_unix_ms},
          {"cost", total},
          {"types", types}};
}

json BurstPoolJson(BurstPool& pool) {
  json workers = json::array();
  for (const WorkerView& w : pool.cluster().Snapshot()) {
    json instances = json::array();
    for (const InstanceView& inst : w.instances) {
      instances.push_back({{"model", inst.key.model},
                           {"version", inst.key.variant},
                           {"phase", InstancePhaseName(inst.phase)},
                           {"in_flight", inst.outstanding}});
    }
    workers.push_back({{"id", w.id},
                       {"address", w.address},
                       {"reachable", !w.unreachable},
                       {"instances", instances}});
  }
  const BurstPool::Stats s = pool.stats();
  const BurstPool::Options& o = pool.options();
  return {{"type", o.type.name},
          {"warm_workers", o.warm_workers},
          {"max_workers", o.max_workers},
          {"concurrency", o.concurrency},
          {"price_per_request", o.type.price_per_request},
          {"queries", s.queries},
          {"answered", s.answered},
          {"cold_starts", s.cold_starts},
          {"full", s.full},
          {"in_flight", s.in_flight},
          {"workers", workers}};
}

}  // namespace

void AddClusterRoutes(http::Router& router, const ClusterRoutesOptions& o,
                      const HttpAccess& access) {
  using http::PathParams;
  using http::Request;
  using http::Responder;
  router.Add("POST", "/v2/cluster/workers/{id}/interrupt",
             access.Guard(Reach::kAdmin, [o](Request&& q, const PathParams& p, const Principal&,
                                             Responder respond) {
               if (o.provider == nullptr) {
                 std::move(respond)(http::Response::Error(409, kNoProvider));
                 return;
               }
               auto lead = ParseLead(q.QueryParam("lead_s"), o.default_lead_s);
               if (!lead.ok()) {
                 std::move(respond)(http::Response::Error(400, lead.status().message()));
                 return;
               }
               const std::string& id = p.find("id")->second;
               absl::Status sent = o.provider->Interrupt(id, *lead);
               if (!sent.ok()) {
                 // On-demand or already stopping: a conflict with its state.
                 const int code = absl::IsFailedPrecondition(sent) ? 409 : HttpStatusFor(sent);
                 std::move(respond)(http::Response::Error(code, sent.message()));
                 return;
               }
               json j{{"worker", id}, {"stops_in_s", ToSeconds(*lead)}};
               std::move(respond)(http::Response::Json(202, j.dump()));
             }));
  router.Add("GET", "/v2/cluster/cost",
             access.Guard(Reach::kAdmin, [o](Request&&, const PathParams&, const Principal&,
                                             Responder respond) {
               if (o.cost == nullptr) {
                 std::move(respond)(http::Response::Error(409, kNoProvider));
                 return;
               }
               std::map<std::string, AppUsed> used;  // read before the report
               if (o.app_usage != nullptr) used = o.app_usage->Snapshot();
               const CostReport report = o.cost->At(o.clock->Now());
               json lines = json::array();
               for (const CostLine& l : report.lines) {
                 lines.push_back({{"type", l.type},
                                  {"market", l.market},
                                  {"running", l.running},
                                  {"ended", l.ended},
                                  {"cost", l.cost},
                                  {"per_hour", l.per_hour},
                                  {"requests", l.requests}});
               }
               json j{{"cost", report.cost}, {"per_hour", report.per_hour}, {"types", lines}};
               if (o.app_usage != nullptr) {
                 const AppCostSplit split = SplitCostByApp(report, used);
                 j["apps"] = AppsJson(split);
                 j["unattributed"] = {{"cost", split.unattributed_cost},
                                      {"per_hour", split.unattributed_per_hour}};
               }
               if (o.history != nullptr) j["history"] = HistoryJson(*o.history, o, report);
               std::move(respond)(http::Response::Json(200, j.dump()));
             }));
  router.Add("GET", "/v2/cluster/burst-pool",
             access.Guard(Reach::kAdmin, [o](Request&&, const PathParams&, const Principal&,
                                             Responder respond) {
               if (o.burst_pool == nullptr) {
                 std::move(respond)(http::Response::Error(
                     409, "this server has no burst pool (maitre serve --burst-pool)"));
                 return;
               }
               std::move(respond)(http::Response::Json(200, BurstPoolJson(*o.burst_pool).dump()));
             }));
}

}  // namespace maitre::controller
