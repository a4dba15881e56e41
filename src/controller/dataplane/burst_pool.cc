#include "controller/dataplane/burst_pool.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/logging.h"

namespace maitre::controller {

BurstPool::BurstPool(Options options) : options_(std::move(options)) {
  Cluster::Options cluster;
  cluster.types = WorkerTypeTable({options_.type});
  cluster.clock = options_.clock;
  cluster.id_prefix = "b";
  if (options_.connect) cluster.connect = options_.connect;
  cluster_ = std::make_unique<Cluster>(cluster);
  placer_ = std::make_unique<Placer>(
      Placer::Options{cluster_.get(), options_.control, options_.clock});
}

void BurstPool::Start(WorkerProvider* provider) {
  provider_.store(provider);
  if (provider != nullptr && options_.warm_workers > 0) {
    provider->SetDesired(options_.type, options_.warm_workers);
  }
}

bool BurstPool::HasRoom() const {
  return in_flight_.load(std::memory_order_relaxed) < options_.concurrency;
}

BurstPool::Taken BurstPool::Take(const CatalogVariant& variant, Nanos time_left,
                                 LoadWaiter& waiter, const std::vector<std::string>& avoid) {
  Taken taken;
  if (in_flight_.fetch_add(1, std::memory_order_relaxed) >= options_.concurrency) {
    in_flight_.fetch_sub(1, std::memory_order_relaxed);
    full_.fetch_add(1, std::memory_order_relaxed);
    taken.why = absl::StrCat("the burst pool has ", options_.concurrency,
                             " queries in flight, its limit");
    return taken;
  }
  const VariantKey& key = variant.spec.key;
  if (std::optional<Route> route = cluster_->PickReady(key, avoid)) {
    queries_.fetch_add(1, std::memory_order_relaxed);
    if (options_.cost != nullptr) options_.cost->ChargeRequest(options_.type.name);
    // The instance it went to is busy: spread the variant to another pool
    // worker, and ask for one more if none is free.
    if (route->outstanding >= options_.busy_at) {
      LoadWaiter nobody = [](absl::Status) {};
      if (!placer_->EnsureLoaded(variant, nobody, avoid)) Grow();
    }
    taken.kind = Taken::Kind::kRoute;
    taken.route = std::move(route);
    return taken;
  }
  in_flight_.fetch_sub(1, std::memory_order_relaxed);
  double load_ms = 0;
  for (const auto& [type, profile] : variant.profiles) {
    load_ms = std::max(load_ms, profile.load_ms());
  }
  if (time_left < FromMillis(load_ms)) {
    LoadWaiter nobody = [](absl::Status) {};
    if (!placer_->EnsureLoaded(variant, nobody, avoid)) Grow();
    full_.fetch_add(1, std::memory_order_relaxed);
    taken.why = absl::StrFormat(
        "the burst pool's instance is still loading (about %.0f ms, longer than the query has)",
        load_ms);
    return taken;
  }
  if (placer_->EnsureLoaded(variant, waiter, avoid)) {
    cold_starts_.fetch_add(1, std::memory_order_relaxed);
    taken.kind = Taken::Kind::kWaiting;
    return taken;
  }
  Grow();
  full_.fetch_add(1, std::memory_order_relaxed);
  taken.why = cluster_->reachable_worker_count() == 0
                  ? "no burst pool worker has joined yet"
                  : "no burst pool worker has the memory for it";
  return taken;
}

void BurstPool::Release(const std::string& worker_id, const VariantKey& key, bool answered,
                        ReplyTimes times) {
  cluster_->Release(worker_id, key, times);
  if (answered) answered_.fetch_add(1, std::memory_order_relaxed);
  in_flight_.fetch_sub(1, std::memory_order_relaxed);
}

void BurstPool::Grow() {
  WorkerProvider* provider = provider_.load();
  if (provider == nullptr) return;
  const std::string& type = options_.type.name;
  const std::map<std::string, int> starting = provider->Starting();
  if (auto it = starting.find(type); it != starting.end() && it->second > 0) return;
  const int desired = provider->Desired(type);
  if (desired >= options_.max_workers) return;
  spdlog::info("burst pool: every instance is busy; starting worker {} of at most {}",
               desired + 1, options_.max_workers);
  provider->SetDesired(options_.type, desired + 1);
}

void BurstPool::Maintain() {
  cluster_->RemoveSilentWorkers();
  WorkerProvider* provider = provider_.load();
  if (provider == nullptr) return;
  const Nanos now = options_.clock->Now();
  std::vector<WorkerView> workers = cluster_->Snapshot();
  int extra = provider->Desired(options_.type.name) - options_.warm_workers;
  // The longest idle go first.
  std::sort(workers.begin(), workers.end(), [](const WorkerView& a, const WorkerView& b) {
    return a.idle_since.value_or(Nanos{0}) < b.idle_since.value_or(Nanos{0});
  });
  for (const WorkerView& w : workers) {
    if (extra <= 0) break;
    if (!w.idle_since.has_value() || now - *w.idle_since < options_.keep_warm) continue;
    spdlog::info("burst pool: {} idle for {:.0f} s; giving it back", w.id,
                 ToSeconds(now - *w.idle_since));
    if (provider->Retire(w.id)) --extra;
  }
}

void BurstPool::Prewarm(const std::vector<const CatalogVariant*>& variants) {
  if (variants.empty() || cluster_->reachable_worker_count() == 0) return;
  std::set<VariantKey> held;
  for (const WorkerView& w : cluster_->Snapshot()) {
    for (const InstanceView& inst : w.instances) {
      if (inst.phase == InstancePhase::kReady || inst.phase == InstancePhase::kLoading) {
        held.insert(inst.key);
      }
    }
  }
  for (const CatalogVariant* variant : variants) {
    if (variant == nullptr || held.count(variant->spec.key) > 0) continue;
    LoadWaiter nobody = [](absl::Status) {};
    if (placer_->EnsureLoaded(*variant, nobody)) {
      spdlog::info("burst pool: loading {} ahead of the overflow, as the cluster serves it",
                   variant->spec.key.ToString());
    }
  }
}

BurstPool::Stats BurstPool::stats() const {
  Stats s;
  s.queries = queries_.load(std::memory_order_relaxed);
  s.answered = answered_.load(std::memory_order_relaxed);
  s.cold_starts = cold_starts_.load(std::memory_order_relaxed);
  s.full = full_.load(std::memory_order_relaxed);
  s.in_flight = in_flight_.load(std::memory_order_relaxed);
  s.workers = static_cast<int>(cluster_->worker_count());
  return s;
}

}  // namespace maitre::controller
