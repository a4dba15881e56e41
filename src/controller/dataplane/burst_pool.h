// MArk's burst pool on the real server (docs/architecture.md, "The burst
// pool"; MArk §3.1, §4.1): workers of their own, started by the provider
// and kept apart from the cluster the allocator provisions, that answer
// what the provisioned instances cannot answer in time. The dispatcher's
// Bouncer sends a query here at once, instead of refusing it or leaving it
// where it would miss its deadline.
//
// The pool keeps `warm_workers` worker processes running, pre-forked, and
// grows to `max_workers` while every instance of the pool is busy; a worker
// beyond the warm ones that has been idle for `keep_warm` is given back. A
// query goes to the least busy ready instance of its variant on a pool
// worker; with none, the variant is loaded on a pool worker and the query
// waits for that load (the pool's cold start), unless the load would
// outlast the query's deadline: then the query is turned away at once
// rather than answered at its deadline, and the load goes on for the
// queries after it. Beyond `concurrency` queries
// in flight the pool takes no more, and the query is answered as it would
// have been without a pool. Each query sent to a pool worker is charged the
// type's `price_per_request` (CostMeter), as a serverless platform bills by
// the invocation.
//
// Thread-safety: thread-safe.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "controller/dataplane/cluster.h"
#include "controller/dataplane/placer.h"
#include "controller/models/catalog.h"
#include "controller/provision/cost_meter.h"
#include "controller/provision/worker_provider.h"
#include "core/work_queue.h"

namespace maitre::controller {

class BurstPool {
 public:
  struct Options {
    // The pool's worker type: market kBurst, with its price per request
    // (and, if any, per hour of a worker's life).
    WorkerType type;
    int warm_workers = 1;
    int max_workers = 2;
    // Queries in flight in the whole pool at most.
    int concurrency = 32;
    // An instance with this many queries in flight is busy: the next query
    // also starts a load of its variant on another pool worker, and asks
    // for another worker if none is free (up to max_workers).
    int busy_at = 4;
    // A worker beyond the warm ones, idle this long, is given back.
    Nanos keep_warm = 600 * kSecond;
    const Clock* clock = SteadyClock::Get();
    WorkQueue* control = nullptr;  // where the pool's loads run
    CostMeter* cost = nullptr;     // charged per query; may be null
    // How a WorkerApi is made for a pool worker (as Cluster::Options).
    std::function<std::unique_ptr<WorkerApi>(const std::string& address,
                                             const std::string& call_token)>
        connect;
  };

  explicit BurstPool(Options options);

  const Options& options() const { return options_; }
  // The pool's own workers: pool workers join here (their ids start "b"),
  // never the allocator's cluster.
  Cluster& cluster() { return *cluster_; }
  // Starts the warm workers through `provider`, which also starts the
  // pool's later workers and takes them back.
  void Start(WorkerProvider* provider);

  // One query for `variant` with `time_left` before its deadline, not to
  // any worker in `avoid`.
  struct Taken {
    enum class Kind { kRoute, kWaiting, kFull } kind = Kind::kFull;
    std::optional<Route> route;  // kRoute: send it there, then Release()
    std::string why;             // kFull: for the refusal's message
  };
  // kRoute: a ready instance took it (charged). kWaiting: `waiter` was
  // moved into a load of the variant on a pool worker; it takes the query
  // again once told. kFull: the pool takes nothing now (full, no pool
  // worker has joined or has the memory, or its load would outlast
  // `time_left`: the variant's slowest profiled load); `waiter` is left
  // with the caller.
  Taken Take(const CatalogVariant& variant, Nanos time_left, LoadWaiter& waiter,
             const std::vector<std::string>& avoid = {});
  // Whether a query would find room (fewer than `concurrency` in flight).
  bool HasRoom() const;
  // A query turned away because HasRoom() said no (counted in stats().full).
  void CountFull() { full_.fetch_add(1, std::memory_order_relaxed); }
  // The answer for a query Take() routed came back (`answered`), or its
  // call failed.
  void Release(const std::string& worker_id, const VariantKey& key, bool answered,
               ReplyTimes times = {});

  // Drops pool workers that stopped reporting, and gives back workers beyond
  // the warm ones idle for `keep_warm`. Called once per report interval.
  void Maintain();

  // Loads on a pool worker each of `variants` (those the provisioned
  // cluster serves now) that no pool worker holds or is loading, so that
  // the overflow of a step finds them ready: MArk's Lambda functions are
  // deployed ahead of the bursts they absorb (§4.1). Within the joined
  // workers' memory only; it starts no worker. Called once per report
  // interval.
  void Prewarm(const std::vector<const CatalogVariant*>& variants);

  struct Stats {
    int64_t queries = 0;      // sent to a pool worker
    int64_t answered = 0;     // of those, answered by it
    int64_t cold_starts = 0;  // queries that waited for a load on the pool
    int64_t full = 0;         // queries the pool could not take
    int in_flight = 0;
    int workers = 0;          // joined
  };
  Stats stats() const;

 private:
  // Asks the provider for one more worker, unless one is starting or the
  // pool is at max_workers.
  void Grow();

  const Options options_;
  std::unique_ptr<Cluster> cluster_;
  std::unique_ptr<Placer> placer_;
  std::atomic<WorkerProvider*> provider_{nullptr};
  std::atomic<int> in_flight_{0};
  std::atomic<int64_t> queries_{0};
  std::atomic<int64_t> answered_{0};
  std::atomic<int64_t> cold_starts_{0};
  std::atomic<int64_t> full_{0};
};

}  // namespace maitre::controller
