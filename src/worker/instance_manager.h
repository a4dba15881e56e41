// The instances a worker holds, and the control-path work on them: loading
// (fetching the file from the controller into a local cache first),
// unloading, profiling a variant, and measuring its accuracy.
//
// Thread-safety: thread-safe. Find() is on the data path and takes a reader
// lock only; everything else is control path and may take seconds.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core/clock.h"
#include "core/profile.h"
#include "core/variant.h"
#include "policy/batching.h"
#include "runtime/evaluate.h"
#include "runtime/host_speed.h"
#include "worker/instance.h"

namespace maitre::worker {

// Where a worker gets model files: the controller over gRPC in production,
// a directory in tests.
class BlobSource {
 public:
  virtual ~BlobSource() = default;
  // Fetches the blob named `hash` and writes it to `path` atomically.
  virtual absl::Status Fetch(const std::string& hash, const std::string& path) = 0;
};

struct LoadOutcome {
  double load_ms = 0;
  double memory_mb = 0;
};

struct ProfileOptions {
  std::vector<int> batch_sizes = {1, 2, 4, 8, 16, 32, 64};
  double latency_ceiling_ms = 250;
  int warmup = 3;
  int repetitions = 10;             // per batch size and round, at least
  Nanos min_time_per_batch = 200 * kMillisecond;  // in all, split over the rounds
  // Sweeps over the batch sizes; each point keeps its least disturbed one
  // (runtime::MeasureOptions::rounds).
  int rounds = 3;
  Nanos round_pause = kSecond;  // runtime::MeasureOptions::round_pause
  // A reference kernel (runtime::HostSpeedProbe) says whether the host ran
  // slow; if so the rounds are repeated (runtime::MeasureOptions::attempts,
  // with its threshold and pause).
  int attempts = 4;
  std::vector<Tensor> sample;  // one example row; zeros when empty
};

inline policy::BatchingOptions WorkerBatchingDefaults() {
  policy::BatchingOptions o;
  o.dispatch_margin = kMillisecond;
  // Best-effort queries never wait (see Instance); for queries with a
  // latency objective the policy decides.
  o.max_queue_delay = 0;
  return o;
}

class InstanceManager {
 public:
  struct Options {
    std::string cache_dir;         // blobs are cached under cache_dir/blobs
    // Keeps the profiler's host-speed baseline across processes (see
    // runtime/host_speed.h); empty = this process's own only.
    std::string host_speed_file;
    BlobSource* blobs = nullptr;   // not owned
    const Clock* clock = SteadyClock::Get();
    // The instances' batching policy. The worker plans with a dispatch
    // margin of 1 ms (see BatchingOptions) unless this sets another.
    policy::BatchingOptions batching = WorkerBatchingDefaults();
    // Unload lets an instance run what it holds for at most this long
    // (Instance::Drain); the controller drains its queries first, so this
    // bounds stragglers only.
    Nanos unload_drain_limit = 5 * kSecond;
  };

  explicit InstanceManager(Options options);
  ~InstanceManager();

  // Loads `spec` with `replicas` replicas, or sets the replica count of an
  // instance already loaded (adding or retiring replicas). `profile` (may be empty) is what the batching policy
  // plans with; without one, a quick profile is measured when the policy
  // needs one. `max_batch` > 0 caps the instance's batches below the
  // worker's own limit (a pipeline stage's planned batch); a load of a
  // loaded instance sets its cap too, rebuilding its policy when it changes.
  absl::StatusOr<LoadOutcome> Load(const VariantSpec& spec, int replicas,
                                   std::vector<LatencyPoint> profile, int32_t max_batch = 0);
  // Takes the instance out of Find() (new queries get NOT_FOUND), lets it
  // run what it holds (at most `unload_drain_limit`), then stops it.
  absl::Status Unload(const VariantKey& key);

  // The loaded instance of `key`, or null.
  std::shared_ptr<Instance> Find(const VariantKey& key) const;
  std::vector<VariantKey> Loaded() const;

  std::vector<InstanceReport> TakeReports();

  // Measures `spec` on this worker without disturbing loaded instances
  // (apart from sharing the cores): load time, memory and latencies.
  absl::StatusOr<Profile> ProfileVariant(const VariantSpec& spec, const ProfileOptions& options);

  // Top-1 accuracy of `spec` on the validation set stored as `valset_blob`.
  absl::StatusOr<runtime::Accuracy> Evaluate(const VariantSpec& spec,
                                             const std::string& valset_blob, int batch_size);

  // Runs `spec` once on `inputs` (one tensor per spec input) with a fresh
  // executor, leaving loaded instances alone; the outputs in spec order.
  absl::StatusOr<std::vector<Tensor>> RunOnce(const VariantSpec& spec,
                                              const std::vector<Tensor>& inputs);

  // The batching policy instances loaded from now on use (the controller
  // says which when the worker registers).
  void SetBatchingPolicy(const std::string& policy);
  // The batching options for an instance planning with `profile` under a
  // load's `max_batch` (0: none): the worker's, within both limits.
  policy::BatchingOptions BatchingFor(const Profile& profile, int32_t max_batch);

  void StopAll();

 private:
  absl::StatusOr<std::string> LocalPath(const std::string& hash);
  absl::StatusOr<std::unique_ptr<runtime::Executor>> NewExecutor(const VariantSpec& spec);

  const Options options_;
  absl::Mutex batching_mu_;
  std::string batching_policy_ ABSL_GUARDED_BY(batching_mu_);
  absl::Mutex fetch_mu_;  // one fetch at a time; the cache is shared
  absl::Mutex probe_mu_;  // one profile measures at a time
  runtime::HostSpeedProbe probe_ ABSL_GUARDED_BY(probe_mu_);
  mutable absl::Mutex mu_;
  std::map<VariantKey, std::shared_ptr<Instance>> instances_ ABSL_GUARDED_BY(mu_);
};

}  // namespace maitre::worker
