#include "worker/instance_manager.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "core/file_util.h"
#include "core/status_macros.h"
#include "core/zero_row.h"
#include "core/batch.h"
#include "runtime/measure.h"
#include "runtime/process_stats.h"
#include "core/valset.h"
#include "core/logging.h"

namespace maitre::worker {

namespace {

// Runs a new replica's executor twice at each batch size of the ladder up
// to `max_batch` before it takes queries. The first runs at a shape are
// several times slower than warm ones (TorchScript specialises its graph,
// both runtimes size their buffers: the wide zoo CNN at batch 32 took 51 ms,
// then 7 ms), and the instance state machine could read such batches as
// interference. The ladder stops after a size whose two runs took longer
// than twice the profiler's default ceiling (larger batches will not be
// formed under an objective), and at the first size the model refuses:
// CreateExecutor has checked batch 1, and a model that takes no larger
// batch fails those queries whether warmed or not.
void WarmUp(runtime::Executor& executor, const ModelSpec& spec, int max_batch,
            const Clock& clock) {
  const Nanos ceiling = FromMillis(ProfileOptions().latency_ceiling_ms);
  const absl::StatusOr<std::vector<Tensor>> row = ZeroRow(spec.inputs);
  if (!row.ok()) return;
  for (int batch = 1; batch <= max_batch; batch *= 2) {
    absl::StatusOr<std::vector<Tensor>> inputs = TileRows(*row, batch);
    if (!inputs.ok()) return;
    Nanos start = clock.Now();
    for (int i = 0; i < 2; ++i) {
      if (!executor.Run(*inputs).ok()) return;
    }
    if (clock.Now() - start > 2 * ceiling) return;
  }
}

}  // namespace

InstanceManager::InstanceManager(Options options)
    : options_(std::move(options)),
      batching_policy_(options_.batching.policy),
      probe_(options_.clock, options_.host_speed_file) {}

void InstanceManager::SetBatchingPolicy(const std::string& policy) {
  absl::MutexLock lock(&batching_mu_);
  batching_policy_ = policy;
}

InstanceManager::~InstanceManager() { StopAll(); }

absl::StatusOr<std::string> InstanceManager::LocalPath(const std::string& hash) {
  if (options_.blobs == nullptr) return absl::FailedPreconditionError("no blob source");
  std::string dir = absl::StrCat(options_.cache_dir, "/blobs");
  std::string path = absl::StrCat(dir, "/", hash);
  absl::MutexLock lock(&fetch_mu_);
  if (std::filesystem::exists(path)) return path;
  MAITRE_RETURN_IF_ERROR(MakeDirectories(dir));
  MAITRE_RETURN_IF_ERROR(options_.blobs->Fetch(hash, path));
  return path;
}

absl::StatusOr<std::unique_ptr<runtime::Executor>> InstanceManager::NewExecutor(
    const VariantSpec& spec) {
  MAITRE_ASSIGN_OR_RETURN(std::string path, LocalPath(spec.blob));
  runtime::ExecutorOptions options;
  options.runtime = spec.runtime;
  options.model_path = path;
  options.spec = spec.spec;
  options.optimize_for_inference = spec.optimize_for_inference;
  absl::StatusOr<std::unique_ptr<runtime::Executor>> executor = runtime::CreateExecutor(options);
  if (executor.ok()) return executor;
  // The message reaches clients (a registration's 400, a query that waited
  // for the load), to whom this worker's cache path means nothing and tells
  // them where the server keeps its files: they know the file as the variant.
  return absl::Status(executor.status().code(),
                      absl::StrReplaceAll(executor.status().message(),
                                          {{path, spec.key.ToString()}}));
}

policy::BatchingOptions InstanceManager::BatchingFor(const Profile& profile, int32_t max_batch) {
  policy::BatchingOptions batching = options_.batching;
  {
    absl::MutexLock lock(&batching_mu_);
    batching.policy = batching_policy_;
  }
  if (!profile.empty()) batching.max_batch = std::min(batching.max_batch, profile.max_batch());
  if (max_batch > 0) batching.max_batch = std::min(batching.max_batch, max_batch);
  return batching;
}

absl::StatusOr<LoadOutcome> InstanceManager::Load(const VariantSpec& spec, int replicas,
                                                  std::vector<LatencyPoint> profile_points,
                                                  int32_t max_batch) {
  replicas = std::max(1, replicas);
  std::shared_ptr<Instance> existing = Find(spec.key);
  if (existing != nullptr) {
    // A load of a loaded variant sets its replica count.
    LoadOutcome outcome;
    Nanos start = options_.clock->Now();
    while (existing->replicas() < replicas) {
      MAITRE_ASSIGN_OR_RETURN(auto executor, NewExecutor(spec));
      WarmUp(*executor, spec.spec, options_.batching.max_batch, *options_.clock);
      existing->AddReplica(std::move(executor));
    }
    if (existing->replicas() > replicas) existing->RemoveReplicas(existing->replicas() - replicas);
    const policy::BatchingOptions batching = BatchingFor(existing->profile(), max_batch);
    if (batching.max_batch != existing->max_batch()) {
      MAITRE_ASSIGN_OR_RETURN(auto policy,
                              policy::CreateBatchingPolicy(batching, existing->profile()));
      existing->SetBatching(batching.max_batch, std::move(policy));
      spdlog::info("{} now batches up to {}", spec.key.ToString(), batching.max_batch);
    }
    outcome.load_ms = ToMillis(options_.clock->Now() - start);
    return outcome;
  }

  double rss_before = runtime::ResidentMemoryMb();
  Nanos start = options_.clock->Now();
  std::vector<std::unique_ptr<runtime::Executor>> executors;
  for (int i = 0; i < replicas; ++i) {
    MAITRE_ASSIGN_OR_RETURN(auto executor, NewExecutor(spec));
    WarmUp(*executor, spec.spec, options_.batching.max_batch, *options_.clock);
    executors.push_back(std::move(executor));
  }
  LoadOutcome outcome;
  outcome.load_ms = ToMillis(options_.clock->Now() - start);

  Profile profile;
  if (!profile_points.empty()) {
    auto created = Profile::Create(std::move(profile_points), outcome.load_ms, 0);
    if (created.ok()) profile = *std::move(created);
  }
  if (profile.empty() && BatchingFor(profile, max_batch).policy != "timeout") {
    // The planning policies need service times; measure a quick profile on
    // the first replica rather than guess.
    runtime::MeasureOptions quick;
    quick.batch_sizes = {1, 2, 4, 8, 16, 32, 64};
    quick.latency_ceiling_ms = 200;
    quick.warmup = 1;
    quick.min_repetitions = 3;
    quick.min_time_per_batch = 20 * kMillisecond;
    quick.clock = options_.clock;
    MAITRE_ASSIGN_OR_RETURN(std::vector<Tensor> row, ZeroRow(spec.spec.inputs));
    MAITRE_ASSIGN_OR_RETURN(auto points, runtime::MeasureLatencies(*executors[0], row, quick));
    MAITRE_ASSIGN_OR_RETURN(profile, Profile::Create(std::move(points), outcome.load_ms, 0));
  }
  const policy::BatchingOptions batching = BatchingFor(profile, max_batch);
  MAITRE_ASSIGN_OR_RETURN(auto policy, policy::CreateBatchingPolicy(batching, profile));

  Instance::Options instance_options;
  instance_options.key = spec.key;
  instance_options.replicas = std::move(executors);
  instance_options.policy = std::move(policy);
  instance_options.clock = options_.clock;
  instance_options.max_batch = batching.max_batch;
  instance_options.profile = std::move(profile);
  MAITRE_ASSIGN_OR_RETURN(std::unique_ptr<Instance> instance,
                          Instance::Create(std::move(instance_options)));
  outcome.memory_mb = std::max(0.0, runtime::ResidentMemoryMb() - rss_before);
  {
    absl::MutexLock lock(&mu_);
    auto [it, inserted] = instances_.emplace(spec.key, std::move(instance));
    if (!inserted) {
      // A concurrent Load of the same variant won; keep the first.
      return outcome;
    }
  }
  spdlog::info("loaded {} ({} replica(s), {:.1f} ms, {:.1f} MB, batching {} up to {})",
               spec.key.ToString(), replicas, outcome.load_ms, outcome.memory_mb,
               batching.policy, batching.max_batch);
  return outcome;
}

absl::Status InstanceManager::Unload(const VariantKey& key) {
  std::shared_ptr<Instance> instance;
  {
    absl::MutexLock lock(&mu_);
    auto it = instances_.find(key);
    if (it == instances_.end()) {
      return absl::NotFoundError(absl::StrCat(key.ToString(), " is not loaded here"));
    }
    instance = std::move(it->second);
    instances_.erase(it);
  }
  instance->Drain(options_.clock->Now() + options_.unload_drain_limit);
  instance->Stop();
  spdlog::info("unloaded {}", key.ToString());
  return absl::OkStatus();
}

std::shared_ptr<Instance> InstanceManager::Find(const VariantKey& key) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = instances_.find(key);
  return it == instances_.end() ? nullptr : it->second;
}

std::vector<VariantKey> InstanceManager::Loaded() const {
  absl::ReaderMutexLock lock(&mu_);
  std::vector<VariantKey> keys;
  for (const auto& [key, instance] : instances_) keys.push_back(key);
  return keys;
}

std::vector<InstanceReport> InstanceManager::TakeReports() {
  std::vector<std::shared_ptr<Instance>> instances;
  {
    absl::ReaderMutexLock lock(&mu_);
    for (const auto& [key, instance] : instances_) instances.push_back(instance);
  }
  std::vector<InstanceReport> reports;
  reports.reserve(instances.size());
  for (const auto& instance : instances) reports.push_back(instance->TakeReport());
  return reports;
}

absl::StatusOr<Profile> InstanceManager::ProfileVariant(const VariantSpec& spec,
                                                        const ProfileOptions& options) {
  const double rss_before = runtime::ResidentMemoryMb();
  const double heap_before = runtime::HeapInUseMb();
  Nanos start = options_.clock->Now();
  MAITRE_ASSIGN_OR_RETURN(auto executor, NewExecutor(spec));
  const double heap_loaded = runtime::HeapInUseMb();
  // The load time is what a load costs before the instance serves: the
  // executor and its warm-up, as Load does both. Without the warm-up the
  // wide zoo CNN's profile said 3.7 ms where its loads took 96 to 273 ms,
  // and selection sent queries with a 52 ms objective to wait for loads
  // that could not be done in time (50 of them failed at a real run's
  // interruption notice).
  WarmUp(*executor, spec.spec, options_.batching.max_batch, *options_.clock);
  const double load_ms = ToMillis(options_.clock->Now() - start);
  runtime::MeasureOptions measure;
  measure.batch_sizes = options.batch_sizes;
  measure.latency_ceiling_ms = options.latency_ceiling_ms;
  measure.warmup = options.warmup;
  measure.min_repetitions = options.repetitions;
  measure.rounds = std::max(1, options.rounds);
  measure.round_pause = options.round_pause;
  measure.min_time_per_batch = options.min_time_per_batch / measure.rounds;
  measure.clock = options_.clock;
  std::vector<Tensor> sample = options.sample;
  if (sample.empty()) {
    MAITRE_ASSIGN_OR_RETURN(sample, ZeroRow(spec.spec.inputs));
  }
  measure.attempts = std::max(1, options.attempts);
  absl::MutexLock measuring(&probe_mu_);
  measure.host_slowdown = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    const double slowdown = probe_.Slowdown(probe_.Measure());
    if (slowdown > measure.disturbed_slowdown) {
      spdlog::info("worker: the host runs {:.2f}x slow while profiling {}", slowdown,
                   spec.key.ToString());
    }
    return slowdown;
  };
  MAITRE_ASSIGN_OR_RETURN(auto points, runtime::MeasureLatencies(*executor, sample, measure));
  // What an instance of this variant costs: the heap it holds once loaded
  // and after the largest batch (OpenCV keeps that batch's buffers), or the
  // resident growth if more (memory malloc does not see). The resident size
  // alone read ~0 for most variants in a worker that had freed as much
  // before (the allocator reuses it).
  const double memory_mb =
      std::max({0.0, runtime::ResidentMemoryMb() - rss_before, heap_loaded - heap_before,
                runtime::HeapInUseMb() - heap_before});
  return Profile::Create(std::move(points), load_ms, memory_mb);
}

absl::StatusOr<std::vector<Tensor>> InstanceManager::RunOnce(const VariantSpec& spec,
                                                             const std::vector<Tensor>& inputs) {
  if (inputs.size() != spec.spec.inputs.size()) {
    return absl::InvalidArgumentError(absl::StrCat("the model takes ", spec.spec.inputs.size(),
                                                   " input(s); ", inputs.size(), " were given"));
  }
  MAITRE_ASSIGN_OR_RETURN(auto executor, NewExecutor(spec));
  return executor->Run(inputs);
}

absl::StatusOr<runtime::Accuracy> InstanceManager::Evaluate(const VariantSpec& spec,
                                                            const std::string& valset_blob,
                                                            int batch_size) {
  MAITRE_ASSIGN_OR_RETURN(std::string path, LocalPath(valset_blob));
  absl::StatusOr<std::string> bytes = ReadFileToString(path);
  if (!bytes.ok()) {
    // As in NewExecutor: the cache path stays on this worker.
    return absl::Status(bytes.status().code(),
                        absl::StrReplaceAll(bytes.status().message(),
                                            {{path, "the validation set"}}));
  }
  MAITRE_ASSIGN_OR_RETURN(Valset valset, ParseValset(*bytes));
  MAITRE_RETURN_IF_ERROR(CheckValsetFits(valset, spec.spec));
  MAITRE_ASSIGN_OR_RETURN(auto executor, NewExecutor(spec));
  return runtime::EvaluateTop1(*executor, valset, std::max(1, batch_size));
}

void InstanceManager::StopAll() {
  std::map<VariantKey, std::shared_ptr<Instance>> instances;
  {
    absl::MutexLock lock(&mu_);
    instances.swap(instances_);
  }
  for (auto& [key, instance] : instances) instance->Stop();
}

}  // namespace maitre::worker
