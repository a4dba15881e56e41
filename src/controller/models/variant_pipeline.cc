#include "controller/models/variant_pipeline.h"

#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "core/logging.h"
#include "core/status_macros.h"
#include "core/valset.h"

namespace maitre::controller {
namespace {

using registry::ModelRecord;
using registry::VariantRecord;
using registry::VariantState;

// The variants a TorchScript model can have besides the registered file.
constexpr char kTorch[] = "torch";
constexpr char kTorchOpt[] = "torch-opt";
constexpr char kTorchInt8[] = "torch-int8";
constexpr char kOpenCv[] = "opencv";

// How long to leave a step that failed for a passing reason (a worker went
// away, say) before trying it again.
constexpr Nanos kRetryPause = 10 * kSecond;

// A larger batch is never truly faster than a smaller one. When a profile
// says otherwise by a wide margin, something else held the cores while the
// smaller batch was timed, and the profile is measured again.
bool Consistent(const Profile& profile) {
  const auto& points = profile.points();
  for (size_t i = 0; i < points.size(); ++i) {
    for (size_t j = i + 1; j < points.size(); ++j) {
      if (points[i].p50_ms > 1.5 * points[j].p50_ms) return false;
    }
  }
  return true;
}

constexpr int kProfileAttempts = 3;

// What retry_after_ and last_sweep_ are keyed by.
std::string PairKey(const VariantKey& key, const std::string& worker_type) {
  return absl::StrCat(key.ToString(), "@", worker_type);
}

bool Transient(const absl::Status& status) {
  return status.code() == absl::StatusCode::kUnavailable ||
         status.code() == absl::StatusCode::kDeadlineExceeded ||
         status.code() == absl::StatusCode::kAborted;
}

// The first input row of the validation set stored as `blob`. Profiles run
// on real data rather than zeros, so that a model whose work depends on its
// input (sparsity, early exits, denormals) is timed as it will serve.
absl::StatusOr<Tensor> FirstValsetRow(const registry::BlobStore& blobs, const std::string& blob) {
  MAITRE_ASSIGN_OR_RETURN(std::string bytes, blobs.Read(blob));
  MAITRE_ASSIGN_OR_RETURN(Valset valset, ParseValset(bytes));
  return SliceRows(valset.inputs, 0, 1);
}

}  // namespace

VariantPipeline::VariantPipeline(Options options) : options_(std::move(options)) {}

VariantPipeline::~VariantPipeline() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void VariantPipeline::Start() { thread_ = std::thread([this] { Loop(); }); }

void VariantPipeline::Kick() {
  absl::MutexLock lock(&mu_);
  kicked_ = true;
  idle_ = false;
}

void VariantPipeline::AwaitIdle() {
  absl::MutexLock lock(&mu_);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return idle_ && !kicked_; };
  mu_.Await(absl::Condition(&idle));
}

void VariantPipeline::Loop() {
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      kicked_ = false;
    }
    bool progressed = false;
    // Keep stepping while there is work; a failing step must not stop the
    // others, so each records its own outcome.
    while (Step()) {
      progressed = true;
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
    }
    if (progressed) (void)options_.catalog->Reload(*options_.registry);
    absl::MutexLock lock(&mu_);
    idle_ = true;
    // Deferred work (a worker type with no worker yet, a paused retry) is
    // looked at again every few seconds even without a kick.
    auto wake = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return kicked_ || stopping_; };
    options_.clock->AwaitWithDeadline(&mu_, absl::Condition(&wake),
                                      options_.clock->Now() + 5 * kSecond);
  }
}

VariantSpec VariantPipeline::SpecOf(const ModelRecord& model, const VariantRecord& v) const {
  VariantSpec spec;
  spec.key = v.key;
  spec.runtime = v.runtime;
  spec.blob = v.blob;
  spec.spec = model.spec;
  spec.spec.format = v.runtime == Runtime::kOpenCv ? ModelFormat::kOnnx : ModelFormat::kTorchScript;
  spec.optimize_for_inference = v.optimize_for_inference;
  return spec;
}

std::shared_ptr<WorkerApi> VariantPipeline::WorkerOfType(const std::string& type) const {
  std::string best;
  double best_utilisation = 2;
  for (const WorkerView& w : options_.cluster->Snapshot()) {
    if (w.type.name == type && w.cpu_utilisation < best_utilisation) {
      best = w.id;
      best_utilisation = w.cpu_utilisation;
    }
  }
  return best.empty() ? nullptr : options_.cluster->Api(best);
}

const std::vector<Tensor>& VariantPipeline::ExampleRow(const ModelRecord& model) {
  // Keyed by the validation set too: a model deleted and registered again
  // under its name may come with another one.
  auto [it, inserted] =
      example_rows_.try_emplace(absl::StrCat(model.name, "@", model.valset_blob));
  if (!inserted || model.valset_blob.empty() || options_.blobs == nullptr ||
      model.spec.inputs.size() != 1) {
    return it->second;
  }
  absl::StatusOr<Tensor> row = FirstValsetRow(*options_.blobs, model.valset_blob);
  if (row.ok()) {
    row->name = model.spec.inputs[0].name;
    it->second.push_back(*std::move(row));
  } else {
    spdlog::warn("variant pipeline: {} is profiled on zeros: its validation set: {}", model.name,
                 row.status().message());
  }
  return it->second;
}

void VariantPipeline::Record(const VariantRecord& variant) {
  absl::Status s = options_.registry->PutVariant(variant);
  if (!s.ok()) spdlog::error("variant pipeline: storing {}: {}", variant.key.ToString(), s.message());
  (void)options_.catalog->Reload(*options_.registry);
}

bool VariantPipeline::EnsureVariantRecords(const ModelRecord& model) {
  if (model.spec.format != ModelFormat::kTorchScript) return false;
  std::set<std::string> have;
  for (const VariantRecord& v : options_.registry->ListVariants(model.name)) {
    have.insert(v.key.variant);
  }
  bool created = false;
  auto create = [&](const char* name, Runtime runtime, std::string blob, bool optimize,
                    std::string detail) {
    if (have.count(name) > 0) return;
    VariantRecord v;
    v.key = {model.name, name};
    v.runtime = runtime;
    v.blob = std::move(blob);
    v.optimize_for_inference = optimize;
    v.state = VariantState::kPending;
    v.detail = std::move(detail);
    Record(v);
    created = true;
  };
  create(kTorchOpt, Runtime::kTorch, model.source_blob, true, "waiting to measure accuracy");
  if (!optimiser_.has_value()) {
    optimiser_ = options_.generators.available ? options_.generators.available()
                                               : absl::UnavailableError("no optimiser configured");
  }
  const absl::Status& optimiser = *optimiser_;
  if (optimiser.ok()) {
    create(kTorchInt8, Runtime::kTorch, "", false, "waiting to be generated");
  } else if (have.count(kTorchInt8) == 0) {
    // Never faked: the variant exists only to say why it is missing.
    spdlog::warn("{}: skipping {}: the optimiser is not available here: {}", model.name,
                 kTorchInt8, optimiser.message());
    create(kTorchInt8, Runtime::kTorch, "", false,
           absl::StrCat("skipped: the optimiser is not available: ", optimiser.message()));
    VariantRecord skipped = *options_.registry->GetVariant({model.name, kTorchInt8});
    skipped.state = VariantState::kFailed;
    Record(skipped);
  }
  // The opencv variant comes from the registered ONNX file when there was
  // one (the registrar made it), else from an export.
  create(kOpenCv, Runtime::kOpenCv, "", false, "waiting to be generated");
  return created;
}

bool VariantPipeline::Generate(const ModelRecord& model, VariantRecord variant) {
  auto source = options_.blobs->Read(model.source_blob);
  absl::StatusOr<std::string> bytes = absl::UnknownError("not generated");
  if (!source.ok()) {
    bytes = source.status();
  } else {
    spdlog::info("variant pipeline: generating {}", variant.key.ToString());
    bytes = variant.key.variant == kTorchInt8
                ? options_.generators.quantize_int8(*source, model.spec)
                : options_.generators.export_onnx(*source, model.spec);
  }
  if (!bytes.ok()) {
    variant.state = VariantState::kFailed;
    variant.detail = absl::StrCat(
        bytes.status().code() == absl::StatusCode::kFailedPrecondition ? "skipped: "
                                                                        : "generation failed: ",
        bytes.status().message());
    spdlog::warn("variant pipeline: {}: {}", variant.key.ToString(), variant.detail);
    Record(variant);
    return true;
  }
  auto blob = options_.blobs->Put(*bytes);
  if (!blob.ok()) {
    variant.state = VariantState::kFailed;
    variant.detail = absl::StrCat("storing the generated file failed: ", blob.status().message());
  } else {
    variant.blob = *blob;
    variant.detail = "waiting to measure accuracy";
  }
  Record(variant);
  return true;
}

bool VariantPipeline::MeasureAccuracy(const ModelRecord& model, VariantRecord variant) {
  if (model.valset_blob.empty()) {
    variant.accuracy = model.spec.declared_accuracy.value_or(0);
    variant.accuracy_source = model.spec.declared_accuracy ? AccuracySource::kDeclared
                                                           : AccuracySource::kUnknown;
    variant.state = VariantState::kReady;
    variant.detail = "";
    Record(variant);
    return true;
  }
  // Accuracy does not depend on the worker type, so the least busy worker
  // of any type measures it.
  std::shared_ptr<WorkerApi> worker;
  double best = 2;
  for (const WorkerView& w : options_.cluster->Snapshot()) {
    if (w.cpu_utilisation < best) {
      best = w.cpu_utilisation;
      worker = options_.cluster->Api(w.id);
    }
  }
  if (worker == nullptr) return false;  // wait for a worker
  absl::MutexLockMaybe measuring(options_.measurement_mu);
  auto result = worker->Evaluate(SpecOf(model, variant), model.valset_blob,
                                 options_.profiling.evaluation_batch);
  if (!result.ok() && Transient(result.status())) {
    retry_after_[variant.key.ToString()] = options_.clock->Now() + kRetryPause;
    return true;
  }
  if (!result.ok()) {
    variant.state = VariantState::kFailed;
    variant.detail = absl::StrCat("the variant does not run: ", result.status().message());
  } else {
    variant.accuracy = result->accuracy;
    variant.accuracy_source = AccuracySource::kMeasured;
    variant.state = VariantState::kReady;
    variant.detail = "";
    spdlog::info("variant pipeline: {} accuracy {:.4f} on {} examples", variant.key.ToString(),
                 result->accuracy, result->examples);
  }
  Record(variant);
  return true;
}

absl::StatusOr<Profile> VariantPipeline::MeasureSweep(WorkerApi& worker,
                                                       const ModelRecord& model,
                                                       const VariantRecord& variant,
                                                       const std::string& type, int sweep,
                                                       int max_sweeps) {
  ProfileRequest request;
  request.batch_sizes = options_.profiling.batch_sizes;
  request.latency_ceiling_ms = options_.profiling.latency_ceiling_ms;
  request.warmup = options_.profiling.warmup;
  request.repetitions = options_.profiling.repetitions;
  // With several sweeps, each is one round and the pipeline spreads them
  // out; with one, the worker's own rounds (a second apart) are all there is.
  request.rounds = options_.profiling.sweeps.max_sweeps > 1 ? 1 : 0;
  request.sample = ExampleRow(model);
  spdlog::info("variant pipeline: profiling {} on {} (sweep {} of at most {})",
               variant.key.ToString(), type, sweep, max_sweeps);
  absl::StatusOr<Profile> profile;
  for (int attempt = 1; attempt <= kProfileAttempts; ++attempt) {
    {
      absl::MutexLockMaybe measuring(options_.measurement_mu);
      profile = worker.ProfileVariant(SpecOf(model, variant), request);
    }
    if (!profile.ok() || Consistent(*profile)) break;
    spdlog::warn("variant pipeline: the profile of {} on {} is inconsistent (a larger batch "
                 "ran much faster: the cores were busy); measuring again",
                 variant.key.ToString(), type);
  }
  last_sweep_[PairKey(variant.key, type)] = options_.clock->Now();
  if (profile.ok() && !profile->empty()) {
    // Per sweep, so an operator can see how far apart the sweeps came out.
    spdlog::info("variant pipeline: {} on {}, sweep {}: p50 {:.4f} ms at batch 1",
                 variant.key.ToString(), type, sweep, profile->LatencyAt(1));
  }
  return profile;
}

void VariantPipeline::StoreSweep(const VariantRecord& variant, const std::string& type,
                                 absl::StatusOr<Profile> profile, int read_sweeps_left,
                                 int sweeps_left) {
  const std::string retry_key = PairKey(variant.key, type);
  const Nanos now = options_.clock->Now();
  if (!profile.ok()) {
    spdlog::warn("variant pipeline: profiling {} on {} failed: {}", variant.key.ToString(), type,
                 profile.status().message());
    // A worker that went away is retried soon; anything else much later.
    retry_after_[retry_key] = now + (Transient(profile.status()) ? kRetryPause : 60 * kSecond);
    return;
  }
  const double batch1_ms = profile->LatencyAt(1);
  absl::Status stored = options_.registry->PutProfileIfUnchanged(
      ProfileRecord{variant.key, type, variant.accuracy, *std::move(profile), sweeps_left},
      read_sweeps_left);
  if (absl::IsFailedPrecondition(stored)) {
    // Imported while it was measured: the import wins, the sweep is dropped.
    spdlog::info("variant pipeline: {}; this sweep is dropped", stored.message());
  } else if (!stored.ok()) {
    spdlog::error("variant pipeline: storing the profile of {}: {}", variant.key.ToString(),
                  stored.message());
    retry_after_[retry_key] = now + 60 * kSecond;
  } else if (sweeps_left == 0 && read_sweeps_left != registry::Registry::kNoStoredProfile) {
    spdlog::info("variant pipeline: the profile of {} on {} is final: p50 {:.4f} ms at batch 1",
                 variant.key.ToString(), type, batch1_ms);
  }
  (void)options_.catalog->Reload(*options_.registry);
}

bool VariantPipeline::ProfileMissing(const ModelRecord& model, const VariantRecord& variant,
                                     const std::vector<ProfileRecord>& profiles) {
  const Nanos now = options_.clock->Now();
  for (const WorkerType& type : options_.cluster->types().types()) {
    bool done = false;
    for (const ProfileRecord& p : profiles) {
      done |= p.key == variant.key && p.worker_type == type.name;
    }
    if (done || retry_after_[PairKey(variant.key, type.name)] > now) continue;
    std::shared_ptr<WorkerApi> worker = WorkerOfType(type.name);
    if (worker == nullptr) continue;  // no worker of this type yet
    const SweepRule& rule = options_.profiling.sweeps;
    StoreSweep(variant, type.name,
               MeasureSweep(*worker, model, variant, type.name, 1, rule.max_sweeps),
               registry::Registry::kNoStoredProfile, rule.SweepsLeftAfterFirst());
    first_sweep_[PairKey(variant.key, type.name)] = options_.clock->Now();
    return true;
  }
  return false;
}

bool VariantPipeline::RefineProfile(const std::vector<ModelRecord>& models,
                                    const std::vector<ProfileRecord>& profiles) {
  const Nanos now = options_.clock->Now();
  for (const ProfileRecord& p : profiles) {
    if (p.sweeps_left <= 0) continue;
    // A profile this controller has not swept yet (it was restarted) may
    // have been swept just before: its time counts from now.
    const Nanos first = first_sweep_.try_emplace(PairKey(p.key, p.worker_type), now).first->second;
    if (options_.profiling.sweeps.OutOfTime(now - first)) return SettleAsItIs(p);
  }
  // The profile with the most sweeps left goes first, so the sweeps go
  // round every profile in turn and each profile's are far apart.
  const ProfileRecord* next = nullptr;
  std::shared_ptr<WorkerApi> worker;
  for (const ProfileRecord& p : profiles) {
    if (p.sweeps_left <= 0 || (next != nullptr && p.sweeps_left <= next->sweeps_left)) continue;
    const std::string key = PairKey(p.key, p.worker_type);
    if (retry_after_[key] > now) continue;
    const Nanos last = last_sweep_.try_emplace(key, now).first->second;
    if (now - last < options_.profiling.sweep_spacing) continue;
    std::shared_ptr<WorkerApi> candidate = WorkerOfType(p.worker_type);
    if (candidate == nullptr) continue;
    next = &p;
    worker = std::move(candidate);
  }
  if (next == nullptr) return false;
  for (const ModelRecord& model : models) {
    if (model.name != next->key.model) continue;
    for (const VariantRecord& v : options_.registry->ListVariants(model.name)) {
      if (v.key.variant != next->key.variant || v.state != VariantState::kReady) continue;
      // The registry may hold sweeps left from a run with more sweeps.
      SweepRule rule = options_.profiling.sweeps;
      rule.max_sweeps = std::max(rule.max_sweeps, next->sweeps_left + 1);
      const int sweep = rule.max_sweeps - next->sweeps_left + 1;
      absl::StatusOr<Profile> measured =
          MeasureSweep(*worker, model, v, next->worker_type, sweep, rule.max_sweeps);
      int sweeps_left = next->sweeps_left;
      if (measured.ok()) {
        sweeps_left = rule.SweepsLeftAfter(sweep, next->profile, *measured);
        measured = Profile::FastestOf(next->profile, *measured);
      }
      StoreSweep(v, next->worker_type, std::move(measured), next->sweeps_left, sweeps_left);
      return true;
    }
  }
  // Its variant is not ready (it failed since): look again later, and let
  // the other profiles go first.
  retry_after_[PairKey(next->key, next->worker_type)] = now + 60 * kSecond;
  return true;
}

bool VariantPipeline::SettleAsItIs(const ProfileRecord& profile) {
  const SweepRule& rule = options_.profiling.sweeps;
  ProfileRecord settled = profile;
  settled.sweeps_left = 0;
  absl::Status stored = options_.registry->PutProfileIfUnchanged(settled, profile.sweeps_left);
  if (absl::IsFailedPrecondition(stored)) return true;  // imported meanwhile: nothing to settle
  if (!stored.ok()) {
    spdlog::error("variant pipeline: storing the profile of {}: {}", profile.key.ToString(),
                  stored.message());
    retry_after_[PairKey(profile.key, profile.worker_type)] = options_.clock->Now() + kRetryPause;
    return true;
  }
  spdlog::info(
      "variant pipeline: the profile of {} on {} is final as it stands (up to {} more sweeps "
      "were allowed): {} s have passed since its first sweep without two sweeps agreeing (a "
      "busy host); p50 {:.4f} ms at batch 1",
      profile.key.ToString(), profile.worker_type, profile.sweeps_left,
      rule.settle_within / kSecond, profile.profile.LatencyAt(1));
  (void)options_.catalog->Reload(*options_.registry);
  return true;
}

bool VariantPipeline::Step() {
  Nanos now = options_.clock->Now();
  std::vector<ModelRecord> models = options_.registry->ListModels();
  // First make every variant exist, be generated and measured, so that the
  // policies have every choice before any profile is complete; then profile.
  for (const ModelRecord& model : models) {
    if (EnsureVariantRecords(model)) return true;
  }
  for (const ModelRecord& model : models) {
    for (VariantRecord& v : options_.registry->ListVariants(model.name)) {
      if (v.state != VariantState::kPending || retry_after_[v.key.ToString()] > now) continue;
      if (v.blob.empty()) return Generate(model, std::move(v));
      if (MeasureAccuracy(model, std::move(v))) return true;
    }
  }
  std::vector<ProfileRecord> profiles = options_.registry->ListProfiles();
  for (const ModelRecord& model : models) {
    for (const VariantRecord& v : options_.registry->ListVariants(model.name)) {
      if (v.state != VariantState::kReady) continue;
      if (ProfileMissing(model, v, profiles)) return true;
    }
  }
  // Every profile has its first sweep; now the later ones.
  return RefineProfile(models, profiles);
}

}  // namespace maitre::controller
