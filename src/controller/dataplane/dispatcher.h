// The data path from a parsed request to a worker and back
// (docs/architecture.md, "How a query travels"): resolve what the query names
// (an app, a model, or one variant), check its inputs, let the selection policy
// choose the variant and instance (or a load), send it with its deadline, and
// choose again, elsewhere, if the worker is lost on the way (docs/architecture.md,
// "When a worker is lost"). Until a model's
// variants are profiled, the policy has nothing to price or time them with;
// such queries go to the model's registered variant, loaded on demand.
//
// Thread-safety: thread-safe. Infer never blocks; its callback runs on a
// transport or control thread.
#pragma once

#include <memory>
#include <string>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "controller/models/catalog.h"
#include "controller/dataplane/burst_pool.h"
#include "controller/dataplane/cluster.h"
#include "controller/frontend/infer_codec.h"
#include "controller/dataplane/placer.h"
#include "controller/dataplane/refused_demand.h"
#include "controller/dataplane/service_level.h"
#include "controller/provision/app_usage.h"
#include "controller/serving_metrics.h"
#include "core/timer_thread.h"

namespace maitre::controller {

// What a query names: an app (model-less: Maitre picks model and variant),
// a model (Maitre picks the variant) or one variant.
struct InferTarget {
  std::string app;
  std::string model;
  std::string variant;  // empty: Maitre chooses
};

using InferDone = absl::AnyInvocable<void(absl::StatusOr<InferResponse>) &&>;

class Dispatcher {
 public:
  struct Options {
    Catalog* catalog = nullptr;
    Cluster* cluster = nullptr;
    Placer* placer = nullptr;
    ServingMetrics* metrics = nullptr;  // may be null
    // Where queries selection refuses are counted for the autoscalers; may
    // be null.
    RefusedDemand* refused = nullptr;
    // Where every finished query of an app is counted, in time or not, for
    // the mark allocator's SLO monitor; may be null.
    ServiceLevel* service_level = nullptr;
    const Clock* clock = SteadyClock::Get();
    // The deadline of a query that states no latency objective.
    Nanos default_timeout = 30 * kSecond;
    // A latency objective bounds the serving variant's own latency and
    // queueing (what profiles measure, as in INFaaS); the query's deadline
    // adds this allowance for the front-end and network hops, which no
    // profile sees.
    Nanos serving_allowance = 2 * kMillisecond;
    // Attempts after the first when a worker is lost under a query: a call
    // to it failed as unreachable, it no longer held the instance, or the
    // load the query waited for was lost with it. Each chooses again,
    // never on a worker the query was lost on, and only before the deadline.
    int max_retries = 3;
    // Workers the provider keeps running (the sum of `maitre serve
    // --workers`). While fewer are registered and reachable, replacements
    // are on their way: a query that no worker can take now tries again
    // every worker_wait_poll until its deadline rather than being refused.
    // 0: queries never wait for workers.
    int min_workers = 0;
    Nanos worker_wait_poll = 50 * kMillisecond;
    // Workers aim to answer this long before a query's deadline: the reply's
    // trip back plus scheduling delay on a busy host.
    Nanos reply_margin = kMillisecond;
    // Lanes of the deadline timer, each pinned to its own core of those the
    // process may use (as many as there are, up to this): a 504 then leaves
    // on time while one core stalls (core/timer_thread.h).
    int deadline_timer_lanes = 2;
    // Refuse (429) a query naming a model or variant at once when no
    // instance of it is estimated to answer before its deadline
    // (admission.h).
    bool admission_control = true;
    // MArk's burst pool (burst_pool.h; may be null). With one, the Bouncer
    // sends it, at once, a query that admission control would refuse, that
    // selection finds no room or time for (before waiting for a worker on
    // its way), or whose chosen instance is
    // estimated to answer after its deadline (admission.h's estimate for
    // that instance); what the pool cannot take is answered as without it.
    BurstPool* burst_pool = nullptr;
    // Where each app's answered compute and its queries charged by the
    // request are counted, to split the cluster's cost among apps
    // (provision/app_usage.h); may be null.
    AppUsage* app_usage = nullptr;
  };

  explicit Dispatcher(Options options);
  // Queries still in flight are not answered by their deadline any more;
  // their transports answer them (or drop them) as they stop.
  ~Dispatcher();

  // `received` is when the front-end received the query; deadlines and the
  // reported total time count from it.
  void Infer(InferTarget target, InferRequest request, Nanos received, InferDone done);

 private:
  struct Query;
  // The deadline's answer: who had the query, or what it was waiting for.
  static absl::Status DeadlineError(Query& query);
  void Attempt(std::shared_ptr<Query> query);
  // Admission control (admission.h), once per query before its first
  // attempt (retries are not judged again): false when the query was
  // refused (and answered).
  bool Admit(const std::shared_ptr<Query>& query);
  // Before a model's variants are profiled: its default variant, on demand.
  void AttemptUnprofiled(std::shared_ptr<Query> query);
  // The Bouncer (docs/architecture.md, "The burst pool"): whether `query`,
  // which its instances cannot answer in time, goes to the burst pool;
  // false when there is none, it is full or has no worker yet, or no
  // variant in scope is ready.
  bool Bounce(const std::shared_ptr<Query>& query);
  // Sends `query` to the burst pool's instance of its burst variant, waiting
  // for the pool to load it if need be.
  void AttemptBurst(std::shared_ptr<Query> query);
  // Whether the instance `route` chose for `query` is estimated to answer
  // after its deadline (the route counts the query already); `*estimate`
  // is the estimate, 0 when there is none (no profile: not late).
  bool Late(const Query& query, const Route& route, const VariantKey& key,
            Nanos* estimate) const;
  // The cluster a query's route belongs to: the burst pool's or the main one.
  Cluster& ClusterOf(const Query& query) const;
  // The query's answer (`answered`) or failure came back from `worker`.
  void Release(const Query& query, const std::string& worker, const VariantKey& key,
               bool answered, ReplyTimes times = {});
  // Chooses again after a failed send: in the burst pool for a query sent
  // there, else anywhere.
  void Retry(std::shared_ptr<Query> query);
  // The rows `query` carries (its first input's first dimension), at least 1.
  static int64_t RowsOf(const Query& query);
  // The app `query` is for (its own, or its model's); null before the
  // query names a registered one.
  static const std::string* AppOf(const Query& query);
  // Counts a query selection refused as demand the autoscalers must see.
  void CountRefused(const Query& query);
  // Fixes the serving variant (and, for an app query, the model), checking
  // the inputs against that model the first time.
  absl::Status Choose(Query& query, const VariantKey& key);
  void Send(std::shared_ptr<Query> query, Route route);
  // The worker's call for `query` failed: choose again where another
  // instance may succeed, else answer the failure.
  struct SentTo {
    std::string worker;
    uint64_t instance_generation = 0;  // Route::instance_generation
  };
  void OnSendFailed(std::shared_ptr<Query> query, const VariantKey& key, const SentTo& sent_to,
                    const absl::Status& status);
  // A load `query` waited for ended: choose again if it succeeded, or if it
  // was lost with its worker while a retry is left; else answer its error.
  void OnLoadDone(std::shared_ptr<Query> query, absl::Status status);
  // Whether workers the provider keeps running are missing (lost, and their
  // replacements not yet joined).
  bool WorkersOnTheirWay() const;
  // Attempts `query` again `after` from now, on a timer thread (its
  // deadline still answers it if nothing can take it in time).
  void AttemptLater(std::shared_ptr<Query> query, Nanos after);
  // Notes what an unsent query waits for, for its deadline's message.
  static void WaitsFor(Query& query, std::string what);
  // Answers `query` unless it was answered already (the deadline timer and
  // the worker's reply race; the first wins).
  void Finish(std::shared_ptr<Query> query, absl::StatusOr<InferResponse> result);
  // At the deadline: answers DEADLINE_EXCEEDED if nothing answered yet.
  void Expire(const std::shared_ptr<Query>& query);

  const Options options_;
  // Answers each query at its deadline from threads of its own, rather
  // than waiting for the transport's deadline callback, which on a busy
  // host queues behind a burst of other completions.
  std::unique_ptr<TimerThread> deadline_timer_;
};

}  // namespace maitre::controller
