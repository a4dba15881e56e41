#include "controller/dataplane/placer.h"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "core/logging.h"
#include "policy/placement.h"

namespace maitre::controller {
namespace {

// Cores the instances on `worker` hold: one per replica, ready or loading.
int ReplicaCoresHeld(const WorkerView& worker) {
  int cores = 0;
  for (const InstanceView& inst : worker.instances) {
    HeldReplicas held = HeldBy(inst);
    cores += held.ready + held.loading;
  }
  return cores;
}

}  // namespace

std::vector<Placer::ReplicaPlacement> Placer::PlaceReplicas(const CatalogVariant& variant,
                                                            const std::string& type,
                                                            int count) const {
  const std::vector<WorkerView> workers = options_.cluster->Snapshot();
  std::vector<policy::PlacementWorker> candidates;
  std::vector<const WorkerView*> views;
  for (const WorkerView& w : workers) {
    if (w.type.name != type) continue;
    // A load of this variant already under way there would be replaced.
    bool loading = false;
    for (const InstanceView& inst : w.instances) {
      loading |= inst.key == variant.spec.key && inst.phase != InstancePhase::kReady;
    }
    policy::PlacementWorker p;
    p.id = w.id;
    p.total_cores = w.type.cores;
    p.free_cores = w.type.cores - ReplicaCoresHeld(w);
    p.total_memory_mb = static_cast<double>(w.type.memory_mb);
    p.free_memory_mb = w.type.memory_mb > 0 ? w.type.memory_mb - w.memory_mb : 0;
    p.accepting = !loading;
    candidates.push_back(p);
    views.push_back(&w);
  }
  const Profile* profile = variant.ProfileOn(type);
  const std::vector<policy::PlacementDemand> demands(
      static_cast<size_t>(std::max(0, count)),
      {1.0, profile != nullptr ? profile->memory_mb() : 0});
  std::map<size_t, int> added;  // by candidate index
  for (const std::optional<size_t>& where : policy::PlaceAll(demands, candidates)) {
    if (where.has_value()) ++added[*where];
  }
  std::vector<ReplicaPlacement> placed;
  for (const auto& [index, n] : added) {
    placed.push_back({views[index]->id, HeldOn(*views[index], variant.spec.key).ready + n});
  }
  return placed;
}

std::string Placer::ChooseWorker(const CatalogVariant& variant,
                                 const std::vector<std::string>& avoid) const {
  // Online placement: the least utilised worker whose memory still fits the
  // variant's profiled footprint, with fewer instances breaking ties.
  std::string best;
  double best_score = std::numeric_limits<double>::infinity();
  for (const WorkerView& w : options_.cluster->Snapshot()) {
    if (w.unreachable || std::find(avoid.begin(), avoid.end(), w.id) != avoid.end()) continue;
    const Profile* profile = variant.ProfileOn(w.type.name);
    double need_mb = profile != nullptr ? profile->memory_mb() : 0;
    if (w.type.memory_mb > 0 && w.memory_mb + need_mb > w.type.memory_mb) continue;
    bool already = false;
    for (const InstanceView& inst : w.instances) already |= inst.key == variant.spec.key;
    if (already) continue;
    double score = w.cpu_utilisation + 0.01 * static_cast<double>(w.instances.size());
    if (score < best_score) {
      best_score = score;
      best = w.id;
    }
  }
  return best;
}

void Placer::Unload(const std::string& worker_id, const VariantKey& key) {
  // Stop routing to it first; once the queries it took are answered, tell
  // the worker; forget it once the worker has let it go. Unloading at once
  // would hand back what the instance still held (the worker answers that
  // NOT_FOUND and the dispatcher sends it elsewhere, often by loading the
  // variant again).
  options_.cluster->BeginUnload(worker_id, key, [this, worker_id, key] {
    options_.control->Post([this, worker_id, key] {
      if (!options_.cluster->Unloading(worker_id, key)) {
        spdlog::info("{} on {}: not unloaded, a load took it back while it drained",
                     key.ToString(), worker_id);
        return;
      }
      std::shared_ptr<WorkerApi> api = options_.cluster->Api(worker_id);
      if (api == nullptr) return;
      absl::Status status = api->Unload(key);
      options_.cluster->RemoveInstance(worker_id, key);
      if (status.ok()) {
        spdlog::info("{} unloaded from {}", key.ToString(), worker_id);
      } else {
        spdlog::warn("unloading {} from {}: {}", key.ToString(), worker_id, status.message());
      }
    });
  });
}

bool Placer::EnsureLoaded(const CatalogVariant& variant, LoadWaiter& done,
                          const std::vector<std::string>& avoid) {
  const VariantKey& key = variant.spec.key;
  std::string worker;
  {
    absl::MutexLock lock(&mu_);
    if (options_.cluster->WaitForLoad(key, done, avoid)) return true;
    if (auto failure = options_.cluster->LastLoadFailure(key);
        failure.has_value() && options_.clock->Now() - failure->first < options_.failure_backoff) {
      std::move(done)(absl::UnavailableError(
          absl::StrCat(key.ToString(), " could not be loaded: ", failure->second)));
      return true;
    }
    worker = ChooseWorker(variant, avoid);
    if (worker.empty()) return false;
    absl::Status begun = options_.cluster->BeginLoad(worker, key, std::move(done));
    if (!begun.ok()) return true;  // the worker vanished; its waiters were told
  }
  StartLoad(worker, variant, 1);
  return true;
}

void Placer::LoadOn(const std::string& worker_id, const CatalogVariant& variant, int replicas,
                    LoadWaiter done) {
  absl::Status begun =
      options_.cluster->BeginLoad(worker_id, variant.spec.key, std::move(done), replicas);
  if (!begun.ok()) return;
  StartLoad(worker_id, variant, replicas);
}

void Placer::Refresh(const CatalogVariant& variant) {
  for (const WorkerView& w : options_.cluster->Snapshot()) {
    for (const InstanceView& inst : w.instances) {
      if (!(inst.key == variant.spec.key) || inst.phase != InstancePhase::kReady) continue;
      const HeldReplicas held = HeldBy(inst);
      LoadOn(w.id, variant, held.ready + held.loading, nullptr);
    }
  }
}

void Placer::StartLoad(const std::string& worker_id, const CatalogVariant& variant,
                       int replicas) {
  std::vector<LatencyPoint> profile;
  for (const WorkerView& w : options_.cluster->Snapshot()) {
    if (w.id != worker_id) continue;
    if (const Profile* p = variant.ProfileOn(w.type.name)) profile = p->points();
  }
  VariantSpec spec = variant.spec;
  const int32_t max_batch = options_.planned_batch ? options_.planned_batch(spec.key) : 0;
  options_.control->Post([this, worker_id, spec, replicas, profile, max_batch] {
    std::shared_ptr<WorkerApi> api = options_.cluster->Api(worker_id);
    absl::Status status = absl::UnavailableError(absl::StrCat("worker ", worker_id, " is gone"));
    if (api != nullptr) {
      auto result = api->Load(spec, replicas, profile, max_batch);
      status = result.status();
      if (result.ok()) {
        spdlog::info("{} loaded on {} in {:.0f} ms", spec.key.ToString(), worker_id,
                     result->load_ms);
      } else {
        spdlog::warn("loading {} on {} failed: {}", spec.key.ToString(), worker_id,
                     status.message());
      }
    }
    options_.cluster->FinishLoad(worker_id, spec.key, status);
  });
}

}  // namespace maitre::controller
