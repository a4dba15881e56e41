#include "sim/selection_router.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "control/leaving.h"
#include "sim/simulator.h"

namespace maitre::sim {
namespace {

template <typename T>
void Put(std::vector<T>& list, int32_t at, T value, T fill) {
  if (at >= static_cast<int32_t>(list.size())) list.resize(at + 1, fill);
  list[at] = value;
}

int32_t At(const std::vector<int32_t>& list, int32_t at) {
  return at >= 0 && at < static_cast<int32_t>(list.size()) ? list[at] : policy::kNoId;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SelectionRouter>> SelectionRouter::Create(
    const SimulationSetup& setup) {
  policy::SelectionCatalogue catalogue;
  for (const SimWorkerType& t : setup.worker_types) catalogue.worker_types.push_back(t.type);
  for (size_t a = 0; a < setup.apps.size(); ++a) {
    const SimApp& app = setup.apps[a];
    // A pipeline's queries are never routed: its stages' are.
    if (IsPipelineApp(setup, static_cast<int32_t>(a))) continue;
    std::vector<std::string> models = app.models;
    if (models.empty()) {
      for (const SimInstanceSpec& s : setup.instances) {
        const std::string& m = setup.variants[s.variant].key.model;
        if (s.app == static_cast<int32_t>(a) &&
            std::find(models.begin(), models.end(), m) == models.end()) {
          models.push_back(m);
        }
      }
    }
    policy::ServableApp entry;
    entry.name = app.name;
    // Variants in the order they first appear among the profiles, each with
    // its profiles on every worker type.
    std::map<VariantKey, size_t> seen;
    for (const SimVariant& v : setup.variants) {
      if (std::find(models.begin(), models.end(), v.key.model) == models.end()) continue;
      if (!AppMayUse(app, v.key)) continue;
      auto [it, fresh] = seen.emplace(v.key, entry.variants.size());
      if (fresh) entry.variants.push_back({v.key, v.accuracy, {}});
      entry.variants[it->second].profiles[setup.worker_types[v.worker_type].type.name] = v.profile;
    }
    if (entry.variants.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("app ", app.name, " has no variants: name its models"));
    }
    catalogue.apps.push_back(std::move(entry));
  }
  auto index = policy::SelectionIndex::Create(catalogue);
  if (!index.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("selection catalogue: ", index.status().message()));
  }
  auto router = std::unique_ptr<SelectionRouter>(new SelectionRouter());
  router->index_ = *std::move(index);
  auto query_router = control::CreateQueryRouter(setup.control.router, setup.control.selection);
  if (!query_router.ok()) return query_router.status();
  router->router_ = *std::move(query_router);
  router->leaving_margin_ = setup.control.leaving_margin;
  for (const SimApp& app : setup.apps) router->app_ids_.push_back(router->index_.FindApp(app.name));
  for (const SimWorkerType& t : setup.worker_types) {
    router->type_ids_.push_back(router->index_.FindType(t.type.name));
  }
  router->option_to_sim_.assign(router->index_.options().size(), -1);
  for (size_t v = 0; v < setup.variants.size(); ++v) {
    const SimVariant& sv = setup.variants[v];
    policy::VariantId id = router->index_.FindVariant(sv.key);
    router->variant_ids_.push_back(id);
    if (id == policy::kNoId) continue;
    policy::OptionId option = router->index_.FindOption(id, router->type_ids_[sv.worker_type]);
    if (option != policy::kNoId) router->option_to_sim_[option] = static_cast<int32_t>(v);
  }
  return router;
}

SelectionRouter::Route SelectionRouter::Decide(const RouteRequest& query,
                                               absl::FunctionRef<bool(int32_t instance)> ready) {
  policy::SelectionRequest request;
  request.app = app_ids_[query.app];
  request.requirements.latency_ms = ToMillis(query.deadline - query.arrival);
  if (query.min_accuracy > 0) request.requirements.min_accuracy = query.min_accuracy;
  request.now = query.arrival;
  request.deadline = query.deadline;
  // The leaving workers that still serve this query (the controller's rule,
  // control/leaving.h).
  const Nanos margin = control::LeavingMargin(leaving_margin_, request.requirements.latency_ms);
  std::vector<policy::WorkerId> serving;
  for (const Leaving& l : leaving_) {
    if (control::ServesWhileLeaving(l.stops_at, request.now, margin)) {
      serving.push_back(At(worker_live_, l.worker));
    }
  }
  policy::SelectionDecision d = control::RouteBesideLeaving(
      *router_, index_, live_, request, serving, [&](policy::InstanceId id) {
        const int32_t sim = At(instance_sim_, id);
        return sim >= 0 && ready(sim);
      });

  Route route;
  route.outcome = d.outcome;
  if (d.load.valid()) {
    route.load_variant = At(option_to_sim_, d.load.option);
    route.load_worker = At(worker_sim_, d.load.worker);
    route.load_rule = d.load_rule;
  }
  switch (d.outcome) {
    case policy::SelectionOutcome::kUseInstance:
    case policy::SelectionOutcome::kServeAndLoad:
      route.action = Route::Action::kServe;
      route.instance = At(instance_sim_, d.instance);
      break;
    case policy::SelectionOutcome::kLoadAndServe:
      route.action = Route::Action::kServe;
      break;
    case policy::SelectionOutcome::kUnsatisfiable:
    case policy::SelectionOutcome::kUnavailable:
      route.action = Route::Action::kReject;
      break;
  }
  return route;
}

void SelectionRouter::AddWorker(int32_t worker, int32_t type, double utilisation,
                                double free_memory_mb) {
  policy::WorkerId id = live_.AddWorker({type_ids_[type], utilisation, free_memory_mb, true});
  Put(worker_live_, worker, id, policy::kNoId);
  Put(worker_sim_, id, worker, -1);
}

void SelectionRouter::RemoveWorker(int32_t worker) {
  policy::WorkerId id = At(worker_live_, worker);
  if (id == policy::kNoId) return;
  // Its instances go with it: forget their mapping first.
  for (policy::InstanceId i : live_.instances_on_worker(id)) {
    int32_t sim = At(instance_sim_, i);
    if (sim >= 0) instance_live_[sim] = policy::kNoId;
    instance_sim_[i] = -1;
  }
  live_.RemoveWorker(id);
  worker_live_[worker] = policy::kNoId;
  worker_sim_[id] = -1;
  leaving_.erase(std::remove_if(leaving_.begin(), leaving_.end(),
                                [worker](const Leaving& l) { return l.worker == worker; }),
                 leaving_.end());
}

void SelectionRouter::SetLeaving(int32_t worker, Nanos stops_at) {
  policy::WorkerId id = At(worker_live_, worker);
  if (id == policy::kNoId) return;
  live_.SetAccepting(id, false);
  for (Leaving& l : leaving_) {
    if (l.worker == worker) {
      l.stops_at = stops_at;
      return;
    }
  }
  leaving_.push_back({worker, stops_at});
}

void SelectionRouter::UpdateWorker(int32_t worker, double utilisation, double free_memory_mb) {
  policy::WorkerId id = At(worker_live_, worker);
  if (id != policy::kNoId) live_.UpdateWorker(id, utilisation, free_memory_mb);
}

absl::Status SelectionRouter::AddInstance(int32_t instance, int32_t variant, int32_t worker,
                                          Nanos ready_at) {
  policy::WorkerId w = At(worker_live_, worker);
  if (w == policy::kNoId) {
    return absl::FailedPreconditionError(absl::StrCat("worker ", worker, " is not registered"));
  }
  policy::LiveInstance live;
  live.variant = variant_ids_[variant];
  live.worker = w;
  live.state = policy::InstanceState::kInactive;
  live.ready_at = ready_at;
  auto id = live_.AddInstance(index_, live);
  if (!id.ok()) return id.status();
  Put(instance_live_, instance, *id, policy::kNoId);
  Put(instance_sim_, *id, instance, -1);
  return absl::OkStatus();
}

void SelectionRouter::RemoveInstance(int32_t instance) {
  policy::InstanceId id = At(instance_live_, instance);
  if (id == policy::kNoId) return;
  live_.RemoveInstance(id);
  instance_live_[instance] = policy::kNoId;
  instance_sim_[id] = -1;
}

void SelectionRouter::SetState(int32_t instance, policy::InstanceState state) {
  policy::InstanceId id = At(instance_live_, instance);
  if (id != policy::kNoId) live_.SetState(id, state);
}

void SelectionRouter::UpdateInstanceLoad(int32_t instance, double mean_batch, int32_t replicas,
                                         double served_qps, double arrival_qps,
                                         int32_t max_batch) {
  policy::InstanceId id = At(instance_live_, instance);
  if (id != policy::kNoId) {
    live_.UpdateInstanceLoad(id, mean_batch, replicas, served_qps, arrival_qps, max_batch);
  }
}

void SelectionRouter::AddWaiting(int32_t instance, int32_t delta) {
  policy::InstanceId id = At(instance_live_, instance);
  if (id != policy::kNoId) live_.AddWaiting(id, delta);
}

void SelectionRouter::Answered(int32_t instance, Nanos compute, int32_t rows, int32_t answers) {
  policy::InstanceId id = At(instance_live_, instance);
  if (id == policy::kNoId) return;
  const policy::LiveInstance& in = live_.instance(id);
  const policy::OptionId option = index_.FindOption(in.variant, live_.worker(in.worker).type);
  if (option == policy::kNoId) return;
  live_.SetSlowdown(id, policy::NextSlowdown(in.slowdown, ToMillis(compute),
                                             index_.option(option).profile.LatencyAt(rows),
                                             answers));
}

void SelectionRouter::Sent(int32_t instance, Nanos now) {
  policy::InstanceId id = At(instance_live_, instance);
  if (id != policy::kNoId) live_.Sent(index_, id, now);
}

void SelectionRouter::SetRouteWeights(const std::vector<RouteWeight>& weights) {
  std::vector<policy::LiveState::RouteWeight> live;
  for (const RouteWeight& w : weights) {
    policy::WorkerId worker = At(worker_live_, w.worker);
    policy::VariantId variant = At(variant_ids_, w.variant);
    if (worker != policy::kNoId && variant != policy::kNoId) {
      live.push_back({worker, variant, w.weight});
    }
  }
  std::vector<policy::WorkerId> leaving;
  for (const Leaving& l : leaving_) leaving.push_back(At(worker_live_, l.worker));
  control::KeepLeavingWeights(live_, leaving, live);
  live_.SetRouteWeights(live);
}

bool SelectionRouter::HasWorker(int32_t worker) const {
  return At(worker_live_, worker) != policy::kNoId;
}

bool SelectionRouter::HasInstance(int32_t instance) const {
  return At(instance_live_, instance) != policy::kNoId;
}

const policy::LiveInstance* SelectionRouter::LiveInstanceOf(int32_t instance) const {
  policy::InstanceId id = At(instance_live_, instance);
  return id == policy::kNoId ? nullptr : &live_.instance(id);
}

policy::WorkerId SelectionRouter::LiveWorkerOf(int32_t worker) const {
  return At(worker_live_, worker);
}

int32_t SelectionRouter::live_instance_count() const {
  int32_t n = 0;
  for (int32_t i = 0; i < live_.instance_slots(); ++i) n += live_.has_instance(i);
  return n;
}

}  // namespace maitre::sim
