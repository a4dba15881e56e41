// Generates, measures and profiles every registered model's variants (INFaaS's
// variant-generator and variant-profiler; docs/architecture.md, "Controller
// components"), as a reconciler: the desired state is "every variant the model
// can have exists, its accuracy is measured, and it has a profile on every
// worker type"; one thread looks at the registry, does the next missing step,
// records it, and repeats until nothing is missing. Each step is idempotent and
// recorded as soon as it is done, so a restart resumes where it stopped without
// measuring anything twice, and a worker type with no live worker is simply
// left for later.
//
// Steps run one at a time on purpose: profiles measured while another
// profile runs on the same cores would be wrong.
//
// Thread-safety: thread-safe; Kick() may be called from anywhere.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "controller/models/catalog.h"
#include "controller/dataplane/cluster.h"
#include "controller/models/profile_sweeps.h"
#include "controller/registry/blob_store.h"
#include "controller/registry/registry.h"
#include "core/clock.h"
#include "core/sandbox.h"

namespace maitre::controller {

// The optimiser steps (generator/variant_generator.h), behind a seam so that
// tests of the pipeline need not run Python.
struct VariantGenerators {
  // OK when the optimiser can run here; else why not (logged, variant skipped).
  std::function<absl::Status()> available;
  std::function<absl::StatusOr<std::string>(absl::string_view, const ModelSpec&)> quantize_int8;
  std::function<absl::StatusOr<std::string>(absl::string_view, const ModelSpec&)> export_onnx;
};

// The real generators, running /usr/bin/python3 with scratch under work_dir.
VariantGenerators PythonGenerators(const std::string& work_dir, SandboxMode sandbox,
                                   const std::string& sandbox_user);

struct ProfilingOptions {
  std::vector<int> batch_sizes = {1, 2, 4, 8, 16, 32, 64};
  double latency_ceiling_ms = 250;  // stop growing the batch past this p50
  int warmup = 5;
  int repetitions = 20;
  int evaluation_batch = 64;
  // Each profile is measured in sweeps over the batch sizes, at least
  // `sweep_spacing` apart, and keeps each point's fastest sweep
  // (Profile::FastestOf) until the rule says it is final. This host runs
  // ~1.5x slow for stretches of ~10 s to over a minute (a fixed compute loop
  // showed it); sweeps seconds apart fall inside one stretch, sweeps a minute
  // apart less often. The first sweep makes the profile usable; the later
  // ones refine it in the background.
  SweepRule sweeps;
  Nanos sweep_spacing = 60 * kSecond;
};

class VariantPipeline {
 public:
  struct Options {
    registry::Registry* registry = nullptr;
    registry::BlobStore* blobs = nullptr;
    Catalog* catalog = nullptr;
    Cluster* cluster = nullptr;
    VariantGenerators generators;
    ProfilingOptions profiling;
    // Shared with the registrar: one measurement on the cluster at a time.
    absl::Mutex* measurement_mu = nullptr;
    // Spaces the sweeps and the retries, and paces the reconciling loop.
    const Clock* clock = SteadyClock::Get();
  };

  explicit VariantPipeline(Options options);
  ~VariantPipeline();

  // Starts the reconciling thread; it runs until destruction.
  void Start();
  // Asks for another look (a model was registered, a worker joined).
  void Kick();
  // Blocks until the pipeline has nothing left it can do now (tests).
  void AwaitIdle();

 private:
  // One step toward the desired state; false when nothing could be done.
  bool Step();
  bool EnsureVariantRecords(const registry::ModelRecord& model);
  bool Generate(const registry::ModelRecord& model, registry::VariantRecord variant);
  bool MeasureAccuracy(const registry::ModelRecord& model, registry::VariantRecord variant);
  // The first sweep of a (variant, worker type) that has no profile yet.
  bool ProfileMissing(const registry::ModelRecord& model, const registry::VariantRecord& variant,
                      const std::vector<ProfileRecord>& profiles);
  // A later sweep of a profile with sweeps left, folded into it.
  bool RefineProfile(const std::vector<registry::ModelRecord>& models,
                     const std::vector<ProfileRecord>& profiles);
  // Makes a profile final as it stands (SweepRule::OutOfTime).
  bool SettleAsItIs(const ProfileRecord& profile);
  absl::StatusOr<Profile> MeasureSweep(WorkerApi& worker, const registry::ModelRecord& model,
                                       const registry::VariantRecord& variant,
                                       const std::string& type, int sweep, int max_sweeps);
  // Stores a sweep's profile with `sweeps_left`, unless the stored one
  // changed since it was read with `read_sweeps_left` sweeps left
  // (Registry::kNoStoredProfile: none).
  void StoreSweep(const registry::VariantRecord& variant, const std::string& type,
                  absl::StatusOr<Profile> profile, int read_sweeps_left, int sweeps_left);
  void Record(const registry::VariantRecord& variant);
  // The first input row of the model's validation set, which profiles run
  // on (empty, and so zeros, when it has none or it cannot be read).
  const std::vector<Tensor>& ExampleRow(const registry::ModelRecord& model);
  VariantSpec SpecOf(const registry::ModelRecord& model,
                     const registry::VariantRecord& variant) const;
  // The least utilised live worker of `type`, or null.
  std::shared_ptr<WorkerApi> WorkerOfType(const std::string& type) const;
  void Loop();

  const Options options_;
  // Steps that failed for a passing reason wait until then (pipeline thread
  // only, so not locked).
  std::map<std::string, Nanos> retry_after_;
  // When each "variant@type" was last measured (pipeline thread only). Not
  // kept across restarts: a restarted controller counts the spacing of the
  // sweeps left from when it first sees them.
  std::map<std::string, Nanos> last_sweep_;
  // When each "variant@type" was first measured, or first seen with sweeps
  // left by this controller (pipeline thread only): SweepRule::settle_within
  // counts from then.
  std::map<std::string, Nanos> first_sweep_;
  // ExampleRow's, per model and validation set (pipeline thread only).
  std::map<std::string, std::vector<Tensor>> example_rows_;
  // Whether the optimiser can run here, asked once (it starts Python).
  std::optional<absl::Status> optimiser_;
  absl::Mutex mu_;
  bool kicked_ ABSL_GUARDED_BY(mu_) = false;
  bool idle_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace maitre::controller
