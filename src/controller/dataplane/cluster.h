// The controller's live view of its workers and the instances on them: who is
// registered, what each worker last reported, which variants are loading or
// ready where, and how many queries this controller has in flight to each
// instance. It is the metadata store's in-memory half (docs/architecture.md,
// "Controller components"); the registry is the durable half.
//
// Thread-safety: thread-safe. Data-path calls (PickReady, Release) hold the
// lock for a short scan of the workers.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "control/action_sink.h"
#include "control/leaving.h"
#include "control/query_router.h"
#include "controller/dataplane/worker_api.h"
#include "core/clock.h"
#include "core/variant.h"
#include "core/worker_type.h"
#include "policy/admission.h"
#include "policy/instance_state.h"
#include "policy/selection.h"

namespace maitre::controller {

// Where an instance is in its life on a worker (see docs/architecture.md).
//   kLoading --Load ok--> kReady --unload asked--> kUnloading --done--> (removed)
//   kLoading --Load failed--> kFailed --retry after a pause--> kLoading
// A worker's loss removes all its instances.
enum class InstancePhase { kLoading, kReady, kFailed, kUnloading };
absl::string_view InstancePhaseName(InstancePhase phase);

// One instance's figures from its worker's last report.
struct InstanceStats {
  int replicas = 0;
  int queue_length = 0;
  double arrival_qps = 0;
  double served_qps = 0;
  double latency_p50_ms = 0;
  double latency_p99_ms = 0;
  double compute_p50_ms = 0;
  double mean_batch = 0;
  int max_batch = 0;  // the most rows a batch holds there (0: not reported)
  int64_t dropped = 0;
  double dropped_qps = 0;
};

struct InstanceView {
  VariantKey key;
  InstancePhase phase = InstancePhase::kLoading;
  // The INFaaS state from the monitoring reports (docs/policies.md).
  policy::InstanceState state = policy::InstanceState::kInactive;
  std::string error;       // why the last load failed
  Nanos phase_since = 0;
  int64_t outstanding = 0;  // queries in flight from this controller
  InstanceStats stats;
  // Replicas a load under way adds: all it asks for while kLoading, the
  // difference while a ready instance grows (it keeps serving meanwhile).
  int loading_replicas = 0;
};

struct WorkerView {
  std::string id;
  WorkerType type;
  std::string address;
  int pid = 0;
  std::string launch_token;
  Nanos registered_at = 0;
  Nanos last_report = 0;
  // Since when its reports have shown nothing received, served or queued
  // (from the start of the first interval that was so) and this controller
  // had nothing in flight there; unset while it is busy.
  std::optional<Nanos> idle_since;
  double cpu_utilisation = 0;
  double memory_mb = 0;
  // A call to it failed as if it were gone (Cluster::MarkUnreachable): no
  // query or load goes there until it reports again.
  bool unreachable = false;
  // An interruption notice said it stops then (Cluster::BeginLeaving): it
  // stays unreachable, whatever it reports, until it is gone (so the
  // allocator and placement count it gone), while its ready instances
  // still take their share of queries until shortly before then.
  std::optional<Nanos> leaving_at;
  std::vector<InstanceView> instances;
};

// Replicas of a variant on a worker as the autoscalers and placement count
// them: ready ones (at least 1 once ready) and those a load under way adds.
struct HeldReplicas {
  int ready = 0;
  int loading = 0;
};
HeldReplicas HeldOn(const WorkerView& worker, const VariantKey& key);
// The same for one instance record.
HeldReplicas HeldBy(const InstanceView& instance);

// What a worker reports (the transport-free form of ReportRequest).
struct WorkerReport {
  std::string worker_id;
  double cpu_utilisation = 0;
  double memory_mb = 0;
  std::vector<std::pair<VariantKey, InstanceStats>> instances;
};

// A chosen instance for one query. Release() it when the query completes.
struct Route {
  std::string worker_id;
  std::string worker_type;
  std::shared_ptr<WorkerApi> api;
  // Which load of the instance the query went to: a worker's NOT_FOUND
  // speaks for that one only (Cluster::ForgetInstance).
  uint64_t instance_generation = 0;
  // The instance's queries in flight when it was routed, this one counted.
  int64_t outstanding = 0;
};

using LoadWaiter = absl::AnyInvocable<void(absl::Status) &&>;

// The instances admission control judges for one query (admission.h). The
// candidates' profiles live in `index`, which the holder keeps.
struct AdmissionView {
  std::shared_ptr<const policy::SelectionIndex> index;
  std::vector<policy::AdmissionCandidate> candidates;
};

// What a load's waiters are told when the load ended because its worker was
// lost (a call to it failed as unreachable, or it left the cluster) rather
// than because the variant failed to load: UNAVAILABLE, marked so that a
// query waiting on it may choose again elsewhere (IsWorkerLost).
absl::Status WorkerLostError(absl::string_view message);
bool IsWorkerLost(const absl::Status& status);

// A load the selection policy asked for: the cluster has already marked it
// loading; the caller sends the Load to the worker.
struct LoadOrder {
  std::string worker_id;
  VariantKey variant;
};

// What the selection policy decided for one query, in the cluster's terms.
struct SelectionResult {
  policy::SelectionDecision decision;
  VariantKey variant;                 // the variant that serves the query
  std::optional<Route> route;         // send the query here now (Release() it after)
  bool waiting_for_load = false;      // the waiter was attached to a load
  std::optional<LoadOrder> load;      // a load to start (already marked loading)
  std::string explanation;            // for kUnsatisfiable / kUnavailable
};

// What one answered query showed of its instance, for admission control
// (admission.h): its round trip beyond the worker's queue and compute time,
// and the worker's compute time for the batch it ran in.
struct ReplyTimes {
  Nanos overhead = -1;  // < 0: unknown
  Nanos compute = -1;   // < 0: unknown
  int batch = 0;
};

class Cluster {
 public:
  struct Options {
    WorkerTypeTable types = WorkerTypeTable::Default();
    const Clock* clock = SteadyClock::Get();
    // Worker ids are this followed by a number; two clusters that share a
    // membership service (the burst pool's and the main one) differ here.
    std::string id_prefix = "w";
    // A worker that has not reported for this long is considered lost.
    Nanos silence_limit = 3 * kSecond;
    // An instance being unloaded waits for the queries this controller sent
    // it to be answered (BeginUnload), at most this long: each has a
    // deadline, 30 s by default for queries without a latency objective.
    Nanos unload_drain_limit = 35 * kSecond;
    // A worker under an interruption notice takes a query only while at
    // least this long, or the query's latency objective if longer, is left
    // before it stops (BeginLeaving).
    Nanos leaving_margin = control::kLeavingMarginFloor;
    // What chooses each query's instance from the live view (null: the
    // selection policy, "infaas").
    std::shared_ptr<const control::QueryRouter> router;
    // How a WorkerApi is made for a worker's address and call token.
    std::function<std::unique_ptr<WorkerApi>(const std::string& address,
                                             const std::string& call_token)>
        connect = [](const std::string& address, const std::string& call_token) {
          return NewGrpcWorkerApi(address, call_token);
        };
  };

  explicit Cluster(Options options);

  const WorkerTypeTable& types() const { return options_.types; }

  // ---- membership ----
  // Registers a worker, whose service accepts calls carrying `call_token`;
  // InvalidArgument for a type not in the table.
  absl::StatusOr<std::string> AddWorker(const std::string& type, const std::string& address,
                                        int pid, const std::string& launch_token,
                                        const std::string& call_token = "");
  // Updates a worker's figures; false when the worker is unknown.
  bool ApplyReport(const WorkerReport& report);
  // Forgets a worker. Its loading instances' waiters get a WorkerLostError.
  void RemoveWorker(const std::string& worker_id, absl::string_view reason);
  // A call to the worker failed as if it were gone: no query is routed
  // there (nor load placed) until its next report shows it alive, so a
  // query retried after the failure goes elsewhere. The silence limit
  // removes it if no report comes.
  void MarkUnreachable(const std::string& worker_id);
  // An interruption notice: the worker stops at `stops_at`. From now on it
  // is unreachable for good (no load is placed there, it is left out of
  // reachable_worker_count and of what the allocator sees, and its reports
  // do not bring it back), while the queries it holds are answered. Its
  // ready instances go on serving like any other (Select, PickReady) as
  // long as max(leaving_margin, the query's latency objective) is left
  // before `stops_at`; then it drains. While it serves and nothing in a
  // query's scope is on a worker that stays, the load the router would
  // place without it (its replacement) is started. A call to it failing
  // ends its service at once (MarkUnreachable). It goes with RemoveWorker
  // when its process ends (docs/operations.md, "Spot interruptions").
  // False when it is unknown.
  bool BeginLeaving(const std::string& worker_id, Nanos stops_at);
  // Removes workers silent for longer than the limit; returns their ids.
  std::vector<std::string> RemoveSilentWorkers();
  // Called (without the lock held) whenever a worker is removed.
  void OnWorkerRemoved(std::function<void(const WorkerView&)> callback);

  // ---- data path ----
  // The ready instance of `key` with the fewest queries in flight, counting
  // this query, on a worker not in `avoid` (those the query was already
  // lost on) that is reachable or leaving with more than the leaving margin
  // left (BeginLeaving); nullopt when none is ready.
  std::optional<Route> PickReady(const VariantKey& key, const std::vector<std::string>& avoid = {});
  // Moving means of the overhead, and of the compute time over what the
  // profile says for that batch, are kept per instance.
  void Release(const std::string& worker_id, const VariantKey& key, ReplyTimes times = {});

  // ---- loading ----
  // Where `key` is loading on a reachable worker not in `avoid`, if
  // anywhere: adds `waiter` there and returns true. Otherwise returns false
  // and keeps `waiter`.
  bool WaitForLoad(const VariantKey& key, LoadWaiter& waiter,
                   const std::vector<std::string>& avoid = {});
  // Marks `key` as loading on `worker_id` with `replicas` replicas and a
  // first waiter (may be null). An instance already ready there is resized
  // instead: it stays ready and keeps serving while the worker changes its
  // replicas. If the worker is gone, the waiter is told so and the error
  // returned.
  absl::Status BeginLoad(const std::string& worker_id, const VariantKey& key,
                         LoadWaiter waiter, int replicas = 1);
  // Ends a load; waiters are told (outside the lock). A load that failed
  // with UNAVAILABLE (the worker could not be reached) is the worker's loss,
  // not the variant's: the worker is marked unreachable, the instance
  // forgotten (its next report is the truth), no load failure is recorded
  // against the variant, and the waiters get a WorkerLostError.
  void FinishLoad(const std::string& worker_id, const VariantKey& key, absl::Status status);
  // Marks an instance as being unloaded: no query is routed to it, and the
  // worker's reports (which still list it) do not bring it back. It drains:
  // `drained` (may be null) is called, outside the lock, once no query this
  // controller sent it is in flight any more (at once if none is), or after
  // the drain limit (checked on its worker's reports). Only then should the
  // worker be told to unload it, so that every query it took is answered
  // by it rather than handed back. It is never called if, first, the
  // instance is removed or its worker lost (nothing is left to unload), or
  // a load of the variant there takes the instance back (kLoading), which
  // Unloading() then says too.
  void BeginUnload(const std::string& worker_id, const VariantKey& key,
                   absl::AnyInvocable<void() &&> drained = nullptr);
  // Whether the instance is still being unloaded (not taken back by a load).
  bool Unloading(const std::string& worker_id, const VariantKey& key) const;
  // Removes an instance after it was unloaded (or a worker said it does not
  // hold it). Queries waiting on its load are told to choose again (OK).
  void RemoveInstance(const std::string& worker_id, const VariantKey& key);
  // The worker answered a query routed to this instance that it does not
  // hold it: removes it as RemoveInstance does, unless the record is a
  // newer load than the route's (the variant was unloaded and is being
  // loaded again; the answer is about the old one).
  void ForgetInstance(const std::string& worker_id, const VariantKey& key,
                      uint64_t instance_generation);
  // When `key` last failed to load anywhere, and why (for backing off).
  std::optional<std::pair<Nanos, std::string>> LastLoadFailure(const VariantKey& key) const;

  // ---- selection (cluster_selection.cc) ----
  // Replaces the selection index after the catalog changed. `slo_ms` by app
  // is the latency objective instance states judge saturation against.
  void SetSelectionIndex(std::shared_ptr<const policy::SelectionIndex> index,
                         std::map<std::string, double> slo_ms);
  std::shared_ptr<const policy::SelectionIndex> selection_index() const;
  // The allocator's query assignment, for the weighted router: replaces
  // every weight but those of leaving workers' instances, which the
  // allocator does not see (BeginLeaving); unknown workers and variants are
  // skipped.
  void SetRouteWeights(const std::vector<control::RouteWeight>& weights);
  // Runs the selection policy for one query. When the query must wait for a
  // load (an instance still loading, or one the decision starts), `waiter`
  // is moved into that load and `waiting_for_load` is set. The workers in
  // `avoid` (those the query was already lost on) are hidden from the
  // decision as if they were not accepting.
  SelectionResult Select(const policy::SelectionRequest& request, LoadWaiter& waiter,
                         const std::vector<std::string>& avoid = {});
  // The loads Select() started, by variant ("model:variant") and the rule of
  // step 4 that chose it ("quickest" or "capacity"; policy::LoadRule), since
  // the start. Each load is also logged at info with its reason.
  std::map<std::pair<std::string, std::string>, int64_t> SelectionLoadCounts() const;

  // The ready and loading instances of `key.model` (only of `key.variant`
  // when it is set) on reachable workers, and the ready ones on leaving
  // workers with more than the leaving margin left (they still serve), as
  // admission control sees them; only the one on `worker_id` when that is
  // set.
  AdmissionView AdmissionCandidates(const VariantKey& key,
                                    const std::string& worker_id = "") const;

  std::shared_ptr<WorkerApi> Api(const std::string& worker_id) const;
  std::vector<WorkerView> Snapshot() const;
  size_t worker_count() const;
  // Workers not marked unreachable.
  size_t reachable_worker_count() const;

 private:
  // The selection index's option for `key` on worker type `type`; null
  // when the index has none (not profiled there yet).
  const policy::VariantOption* OptionOf(const VariantKey& key, const std::string& type) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  static uint64_t NextInstanceGeneration();
  struct InstanceRecord {
    // Unique per record, so that a newer load of the same variant on the
    // same worker is told apart from the one a query was routed to.
    uint64_t generation = NextInstanceGeneration();
    InstancePhase phase = InstancePhase::kLoading;
    std::string error;
    Nanos phase_since = 0;
    int64_t outstanding = 0;
    Nanos overhead = 0;  // round trips beyond the worker's time: a moving mean
    double slowdown = 1;  // compute time ÷ the profile's for its batch: a moving mean
    InstanceStats stats;
    int target_replicas = 1;  // what the last load asked for
    bool resizing = false;    // a ready instance's replica change is under way
    std::vector<LoadWaiter> waiters;
    // kUnloading: what to do once it has drained (BeginUnload).
    absl::AnyInvocable<void() &&> drained;
    // Its entry in the selection's live view (kNoId while its variant has
    // no profile) and its state machine's memory.
    policy::InstanceId live = policy::kNoId;
    policy::InstanceHistory history;
  };
  struct Worker {
    WorkerView view;  // instances are kept in `instances` below
    std::shared_ptr<WorkerApi> api;
    // Under an interruption notice and not (yet) failed a call: its ready
    // instances still serve until the leaving margin (BeginLeaving).
    bool serves_while_leaving = false;
    std::map<VariantKey, InstanceRecord> instances;
    policy::WorkerId live = policy::kNoId;
  };

  // Live-view bookkeeping (cluster_selection.cc); all under mu_.
  void LiveAddWorkerLocked(Worker& worker) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void LiveAddInstanceLocked(Worker& worker, const VariantKey& key, InstanceRecord& inst,
                             policy::InstanceState state) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void LiveRemoveInstanceLocked(InstanceRecord& inst) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // RemoveInstance, or ForgetInstance when `generation` is set.
  void RemoveInstanceIf(const std::string& worker_id, const VariantKey& key,
                        std::optional<uint64_t> generation);
  void LiveApplyReportLocked(Worker& worker) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  double FreeMemoryLocked(const Worker& worker) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MarkUnreachableLocked(Worker& worker) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether a leaving worker still takes a query at `now`, `margin` or more
  // before it stops.
  static bool ServesWhileLeaving(const Worker& worker, Nanos now, Nanos margin);
  // The router's decision for `request` with the leaving workers that
  // still serve it accepting like any other, and no load on them
  // (BeginLeaving; control::RouteBesideLeaving). The workers in `avoid`
  // are hidden already.
  policy::SelectionDecision RouteLocked(const policy::SelectionRequest& request,
                                        const std::vector<std::string>& avoid)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether the live view's instance `id` is a ready one.
  bool ReadyLocked(policy::InstanceId id) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  WorkerView ViewOf(const Worker& worker) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes the worker and returns what is left to do outside the lock.
  struct Erased {
    WorkerView view;
    std::vector<LoadWaiter> waiters;
    std::vector<absl::AnyInvocable<void() &&>> drained;
  };
  Erased EraseWorkerLocked(const std::string& worker_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void NotifyRemoved(Erased erased, absl::string_view reason);

  const Options options_;
  std::shared_ptr<const control::QueryRouter> router_;
  mutable absl::Mutex mu_;
  std::map<std::string, Worker> workers_ ABSL_GUARDED_BY(mu_);
  std::map<VariantKey, std::pair<Nanos, std::string>> load_failures_ ABSL_GUARDED_BY(mu_);
  int64_t next_worker_ ABSL_GUARDED_BY(mu_) = 1;
  std::shared_ptr<const policy::SelectionIndex> index_ ABSL_GUARDED_BY(mu_);
  policy::LiveState live_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, double> slo_ms_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<std::string, std::string>, int64_t> selection_loads_ ABSL_GUARDED_BY(mu_);
  // Live ids back to the cluster's names.
  std::map<policy::WorkerId, std::string> worker_by_live_ ABSL_GUARDED_BY(mu_);
  std::map<policy::InstanceId, std::pair<std::string, VariantKey>> instance_by_live_
      ABSL_GUARDED_BY(mu_);
  std::vector<std::function<void(const WorkerView&)>> removed_callbacks_ ABSL_GUARDED_BY(mu_);
};

}  // namespace maitre::controller
