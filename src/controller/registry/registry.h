// The durable registry (docs/architecture.md, "Controller components"): apps,
// the models they registered, each model's variants and each variant's
// profiles, kept in one SQLite file under the data dir so that a restart keeps
// everything and never profiles again. Model files themselves live in the
// BlobStore; records here name them by content hash.
//
// Only the durable half of the metadata store lives here. Live state (loaded
// instances, queue lengths, worker health) is in memory elsewhere and is
// never written to this file.
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
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "controller/registry/schema.h"
#include "core/model_spec.h"
#include "core/profile.h"
#include "core/profile_csv.h"
#include "core/variant.h"

namespace maitre::registry {

class Connection;

// Names of apps, models, variants and worker types: 1 to 128 characters from
// [A-Za-z0-9._-]. They appear in URL paths (/v2/models/{name}) and variant
// ids ("model:variant"), so ':' and '/' are excluded. `what` names the field
// in the error ("app name").
absl::Status ValidateName(absl::string_view what, absl::string_view name);

struct AppRecord {
  std::string name;
  Requirements defaults;  // unset fields: no default
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

// One input file of an offline job and how far through it the job is.
struct JobFileRecord {
  std::string path;       // the .npz the job reads
  int64_t rows = 0;       // rows in the file
  bool labelled = false;  // the file holds "labels"
  int64_t done_rows = 0;  // rows [0, done_rows) have durable results
  int64_t correct = 0;    // among the done rows, predictions equal to the labels
};

// An offline job (controller/jobs). `state` is the name of a jobs::JobState;
// the jobs library owns the lifecycle and the registry stores the name it
// is given, as it does for variants.
struct JobRecord {
  std::string id;
  int64_t seq = 0;  // submission order, unique
  std::string app;
  std::string model;    // empty: the app's models (model-less)
  std::string variant;  // empty: Maitre chooses
  std::string input;    // as submitted: a .npz or a directory of them
  std::string output;   // the directory results are written to
  Requirements requirements;
  int32_t batch_size = 0;
  std::string state;
  std::string error;
  int64_t created_unix_ms = 0;
  int64_t started_unix_ms = 0;   // 0: not started
  int64_t finished_unix_ms = 0;  // 0: not finished
  std::vector<JobFileRecord> files;  // in processing order
};

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
  // Creates the app or replaces its default requirements.
  absl::Status PutApp(const AppRecord& app);
  absl::StatusOr<AppRecord> GetApp(absl::string_view name) const;
  std::vector<AppRecord> ListApps() const;  // by name

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
  // Stores a new job with its files in one transaction; AlreadyExists when
  // the id or seq is taken.
  absl::Status CreateJob(const JobRecord& job);
  absl::StatusOr<JobRecord> GetJob(absl::string_view id) const;
  // Every job with its files, by seq.
  std::vector<JobRecord> ListJobs() const;
  // Sets a job's state, error and timestamps (the other fields never
  // change); NotFound for an unknown id.
  absl::Status UpdateJobState(const JobRecord& job);
  // Records that rows [0, done_rows) of file `index` have durable results,
  // `correct` of them matching the labels; NotFound for an unknown file.
  absl::Status UpdateJobProgress(absl::string_view id, int index, int64_t done_rows,
                                 int64_t correct);

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
  absl::Status ReadJobFilesLocked(JobRecord& job) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  const int schema_version_;
  // Guards the connection: SQLite statements carry state between steps, and
  // even reads borrow them from the connection's cache. Mutable so const
  // reads can lock it.
  mutable absl::Mutex mu_;
  const std::unique_ptr<Connection> db_ ABSL_GUARDED_BY(mu_);
};

}  // namespace maitre::registry
