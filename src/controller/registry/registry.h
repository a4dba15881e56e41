// The durable registry (docs/architecture.md, "Controller components"): apps,
// the models they registered, each model's variants and each variant's
// profiles, kept in one SQLite file under the data dir so that a restart keeps
// everything and never profiles again. Model files themselves live in the
// BlobStore; records here name them by content hash.
//
// Only the durable half of the metadata store lives here. Live state (loaded
// instances, queue lengths, worker health) is in memory elsewhere and is
// never written to this file. Offline jobs' records share the file but have
// their own store (job_store.h), reached through jobs(); so do API keys
// (key_store.h, keys()), pipelines (pipeline_store.h, pipelines()) and what
// earlier runs paid for workers (cost_store.h, costs()).
//
// Errors: InvalidArgument for a malformed record (names, hashes, fractions),
// NotFound for something absent, AlreadyExists for a model name taken by
// another app, DataLoss for a file or row that cannot be read back,
// Unavailable when another process holds the file's lock too long.
//
// Thread-safety: thread-safe. One SQLite connection is shared by all callers
// and guarded by a mutex, so calls are serialised; every call is a short
// control-path operation (the data path never touches this class). Several
// processes may open the same file: writes take SQLite's write lock up front
// (BEGIN IMMEDIATE) and wait up to a busy timeout.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "controller/registry/job_store.h"
#include "controller/registry/key_store.h"
#include "controller/registry/cost_store.h"
#include "controller/registry/pipeline_store.h"
#include "controller/registry/schema.h"
#include "controller/registry/validation.h"
#include "core/model_spec.h"
#include "core/profile.h"
#include "core/profile_csv.h"
#include "core/variant.h"

namespace maitre::registry {

class Connection;

struct AppRecord {
  std::string name;
  Requirements defaults;  // unset fields: no default
  // The fraction of the app's best accuracy (in [0, 1]) that an allocator
  // which scales accuracy may give up for it (control::ModelOption). Not a
  // requirement: queries never carry it. Unset: the allocator's own bound.
  std::optional<double> max_accuracy_drop;
  // The share of its queries (in (0, 1]) the mark allocator keeps within
  // `defaults.latency_ms` (MArk §4.1's SL_min; docs/policies.md,
  // "Provisioning ahead of demand (MArk)"). Unset: --mark-sl-min.
  std::optional<double> sl_min;
};

struct ModelRecord {
  std::string app;
  std::string name;
  ModelSpec spec;               // must have inputs and outputs (it is stored as JSON)
  std::string source_blob;      // the registered file; required
  std::string onnx_blob;        // optional companion ONNX file; empty when none
  std::string valset_blob;      // optional validation set; empty when none
  int64_t created_unix_ms = 0;  // stored as given; the caller owns the clock
};

// A variant's lifecycle (docs/architecture.md, "Lifecycles"). A variant is
// created kPending while it is generated, its accuracy measured and it is
// profiled (`detail` says how far, e.g. "profiling 3/7"), then becomes kReady
// (it may serve) or kFailed (`detail` says why). Allowed transitions: pending
// -> ready | failed; ready -> pending (re-profiling); failed -> pending
// (retry). The registry stores what it is told and does not enforce them: the
// registrar owns the lifecycle, and recovery after a crash may need to reset
// any state.
enum class VariantState { kPending, kReady, kFailed };
absl::string_view VariantStateName(VariantState state);  // "pending" | "ready" | "failed"
absl::StatusOr<VariantState> ParseVariantState(absl::string_view name);

struct VariantRecord {
  VariantKey key;
  Runtime runtime = Runtime::kTorch;
  std::string blob;  // the file the executor loads; may be empty while pending
  double accuracy = 0;
  AccuracySource accuracy_source = AccuracySource::kUnknown;
  VariantState state = VariantState::kPending;
  std::string detail;
  bool optimize_for_inference = false;  // torch: apply the pass when loading
};

using ::maitre::ProfileRecord;

class Registry {
 public:
  struct Options {
    std::string path;  // the SQLite file; its parent directory is created
    // The schema steps to apply. Leave the default: tests pass their own list
    // to simulate a data dir written by an older or newer build.
    std::vector<Migration> migrations = SchemaMigrations();
  };

  // Opens or creates the registry and brings its schema up to date. A file
  // that is not a registry, is corrupt, or was written by a newer build (a
  // schema version above the last migration) is refused with a message
  // naming the file.
  static absl::StatusOr<std::unique_ptr<Registry>> Open(Options options);
  ~Registry();

  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // The schema version of the open file (the last migration applied).
  int schema_version() const { return schema_version_; }
  const std::string& path() const { return path_; }

  // ---- apps ----
  // Creates the app or replaces its default requirements and
  // max_accuracy_drop.
  absl::Status PutApp(const AppRecord& app);
  absl::StatusOr<AppRecord> GetApp(absl::string_view name) const;
  std::vector<AppRecord> ListApps() const;  // by name
  // Deletes the app, its defaults and its models with their variants and
  // profiles, in one transaction; NotFound if there is no such app.
  absl::Status DeleteApp(absl::string_view name);

  // ---- models ----
  // Registers a model and its initial variants in one transaction, creating
  // the app (with no default requirements) when it is new. Each variant's
  // key.model must be the model's name (an empty one is filled in).
  // - The name is registered under another app: AlreadyExists; model names
  //   are global because /v2/models/{name} addresses them.
  // - The same app registers the same name with the same source_blob: OK and
  //   nothing changes (registration is idempotent by content), even if
  //   `variants` differ; call GetModel first to tell the two cases apart.
  // - The same app, different bytes: the old model, its variants and their
  //   profiles are replaced, all in one transaction.
  absl::Status RegisterModel(const ModelRecord& model, const std::vector<VariantRecord>& variants);
  absl::StatusOr<ModelRecord> GetModel(absl::string_view name) const;
  // All models ("") or one app's, by name. An unknown app gives an empty list.
  std::vector<ModelRecord> ListModels(absl::string_view app = "") const;
  // Deletes the model with its variants and profiles; NotFound if absent.
  // The app stays.
  absl::Status DeleteModel(absl::string_view name);
  // Every blob a model (its file, ONNX part, validation set) or a variant
  // refers to: what blob garbage collection must keep.
  std::set<std::string> ReferencedBlobs() const;

  // ---- variants ----
  // Creates or updates one variant; NotFound unless its model is registered.
  // Updating keeps the variant's profiles.
  absl::Status PutVariant(const VariantRecord& variant);
  absl::StatusOr<VariantRecord> GetVariant(const VariantKey& key) const;
  // All variants ("") or one model's, by (model, variant name).
  std::vector<VariantRecord> ListVariants(absl::string_view model = "") const;

  // ---- profiles ----
  // Creates or replaces the profile of (variant, worker type) with all its
  // batch points; NotFound unless the variant exists. The record's accuracy
  // is stored with the profile as given (the variant's own accuracy is in
  // its VariantRecord; the writer keeps the two in step).
  absl::Status PutProfile(const ProfileRecord& profile);
  // PutProfile, but only while the stored profile is the one the writer
  // read: it still has `expected_sweeps_left` sweeps left, or, with
  // kNoStoredProfile, there is none. Otherwise FailedPrecondition and nothing
  // changes: someone else (an import) wrote it since, and a sweep measured
  // before must not overwrite that.
  static constexpr int kNoStoredProfile = -1;
  absl::Status PutProfileIfUnchanged(const ProfileRecord& profile, int expected_sweeps_left);
  // All profiles ("") or one model's, by (model, variant, worker type), each
  // with its points in batch order.
  std::vector<ProfileRecord> ListProfiles(absl::string_view model = "") const;
  // Stores profiles read from CSV (core/profile_csv.h), all or nothing. If
  // any names a variant that is not registered, NotFound lists every such
  // variant and nothing is stored. Returns how many profiles were stored.
  absl::StatusOr<int> ImportProfiles(const std::vector<ProfileRecord>& profiles);

  // ---- offline jobs ----
  // The jobs' records, in this registry's file (job_store.h).
  JobStore& jobs() { return jobs_; }
  const JobStore& jobs() const { return jobs_; }

  // ---- API keys ----
  // The keys' records, in this registry's file (key_store.h).
  KeyStore& keys() { return keys_; }

  // ---- pipelines ----
  // The pipelines' records, in this registry's file (pipeline_store.h).
  PipelineStore& pipelines() { return pipelines_; }

  // ---- cost ----
  // What earlier runs paid for workers, in this registry's file
  // (cost_store.h).
  CostStore& costs() { return costs_; }

  // The List* calls have no error channel: a read that fails part way (disk
  // error, a damaged row) logs the error and returns the rows read so far,
  // skipping rows that cannot be decoded. Get* calls report such errors.

 private:
  Registry(std::unique_ptr<Connection> db, std::string path, int schema_version);

  absl::Status UpsertVariantLocked(const VariantRecord& variant) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // PutProfile, checking the stored sweeps left first when one is expected.
  absl::Status PutProfileChecked(const ProfileRecord& profile,
                                 std::optional<int> expected_sweeps_left);
  absl::Status UpsertProfileLocked(const ProfileRecord& profile) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<bool> ModelExistsLocked(absl::string_view name) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<bool> VariantExistsLocked(const VariantKey& key) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The stored profile's sweeps left, or kNoStoredProfile.
  absl::StatusOr<int> SweepsLeftLocked(const VariantKey& key, absl::string_view worker_type) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  const int schema_version_;
  // Guards the connection: SQLite statements carry state between steps, and
  // even reads borrow them from the connection's cache. Mutable so const
  // reads can lock it.
  mutable absl::Mutex mu_;
  const std::unique_ptr<Connection> db_ ABSL_GUARDED_BY(mu_);
  // Shares db_ and mu_; declared after them so that it is built after them.
  JobStore jobs_;
  KeyStore keys_;
  PipelineStore pipelines_;
  CostStore costs_;
};

}  // namespace maitre::registry
