#include "controller/registry/schema.h"

namespace maitre::registry {
namespace {

// Version 1. Design notes:
// - Model names are the primary key of `models` (not (app, name)) because
//   /v2/models/{name} addresses a model without its app.
// - Requirements are nullable columns: NULL means "no default".
// - Enumerations are stored as their names, not numbers, so the file stays
//   readable with the sqlite3 shell and a reordered C++ enum cannot silently
//   change stored meaning. There are no CHECK constraints on them because
//   SQLite cannot alter a CHECK without rebuilding the table; the code
//   validates instead.
// - Deleting a model cascades to its variants, their profiles and the
//   profiles' points. Upserts use ON CONFLICT DO UPDATE, never INSERT OR
//   REPLACE, which would delete the row and cascade away its children.
// - Profile points are rows, one per batch size, so every measured point is
//   kept exactly (REAL is an IEEE double) and can be queried.
constexpr char kAppsModelsVariantsProfiles[] = R"sql(
CREATE TABLE apps (
  name         TEXT PRIMARY KEY NOT NULL,
  latency_ms   REAL,
  min_accuracy REAL,
  max_cost     REAL
);
CREATE TABLE models (
  name            TEXT PRIMARY KEY NOT NULL,
  app             TEXT NOT NULL REFERENCES apps(name),
  spec_json       TEXT NOT NULL,
  source_blob     TEXT NOT NULL,
  onnx_blob       TEXT NOT NULL DEFAULT '',
  valset_blob     TEXT NOT NULL DEFAULT '',
  created_unix_ms INTEGER NOT NULL
);
CREATE INDEX models_by_app ON models(app);
CREATE TABLE variants (
  model           TEXT NOT NULL REFERENCES models(name) ON DELETE CASCADE,
  name            TEXT NOT NULL,
  runtime         TEXT NOT NULL,
  blob            TEXT NOT NULL,
  accuracy        REAL NOT NULL,
  accuracy_source TEXT NOT NULL,
  state           TEXT NOT NULL,
  detail          TEXT NOT NULL,
  PRIMARY KEY (model, name)
);
CREATE TABLE profiles (
  model       TEXT NOT NULL,
  variant     TEXT NOT NULL,
  worker_type TEXT NOT NULL,
  accuracy    REAL NOT NULL,
  load_ms     REAL NOT NULL,
  memory_mb   REAL NOT NULL,
  PRIMARY KEY (model, variant, worker_type),
  FOREIGN KEY (model, variant) REFERENCES variants(model, name) ON DELETE CASCADE
);
CREATE TABLE profile_points (
  model       TEXT NOT NULL,
  variant     TEXT NOT NULL,
  worker_type TEXT NOT NULL,
  batch       INTEGER NOT NULL,
  p50_ms      REAL NOT NULL,
  p99_ms      REAL NOT NULL,
  PRIMARY KEY (model, variant, worker_type, batch),
  FOREIGN KEY (model, variant, worker_type)
    REFERENCES profiles(model, variant, worker_type) ON DELETE CASCADE
);
)sql";

// torch-opt is the registered file run with optimize_for_inference
// applied at load time (a CNN saved after that pass does not load
// again), so a variant needs to say how it is loaded, not only what.
constexpr char kVariantsOptimizeForInference[] = R"sql(
ALTER TABLE variants ADD COLUMN optimize_for_inference INTEGER NOT NULL DEFAULT 0;
)sql";

// Offline jobs (controller/jobs): a job and its input files, with the
// rows of each file whose results are durable, so a restarted
// controller resumes after the last completed chunk. `seq` orders jobs
// by submission (they run first come, first served). There is no
// foreign key to apps or models: a finished job's record outlives the
// model that served it. `correct` counts rows whose prediction matched
// the file's labels, among the rows done.
// The jobs' records are read and written by JobStore (job_store.h).
constexpr char kOfflineJobs[] = R"sql(
CREATE TABLE jobs (
  id               TEXT PRIMARY KEY NOT NULL,
  seq              INTEGER NOT NULL UNIQUE,
  app              TEXT NOT NULL,
  model            TEXT NOT NULL DEFAULT '',
  variant          TEXT NOT NULL DEFAULT '',
  input            TEXT NOT NULL,
  output           TEXT NOT NULL,
  latency_ms       REAL,
  min_accuracy     REAL,
  max_cost         REAL,
  batch_size       INTEGER NOT NULL,
  state            TEXT NOT NULL,
  error            TEXT NOT NULL DEFAULT '',
  created_unix_ms  INTEGER NOT NULL,
  started_unix_ms  INTEGER NOT NULL DEFAULT 0,
  finished_unix_ms INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE job_files (
  job       TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
  idx       INTEGER NOT NULL,
  path      TEXT NOT NULL,
  rows      INTEGER NOT NULL,
  labelled  INTEGER NOT NULL,
  done_rows INTEGER NOT NULL DEFAULT 0,
  correct   INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (job, idx)
);
)sql";

// The profiler measures each profile in sweeps minutes apart and keeps
// the fastest (controller/models/variant_pipeline.h); a profile with sweeps
// left is usable but still being refined. Profiles stored before
// sweeps count as final.
constexpr char kProfilesSweepsLeft[] = R"sql(
ALTER TABLE profiles ADD COLUMN sweeps_left INTEGER NOT NULL DEFAULT 0;
)sql";

// An app's bound on accuracy scaling (AppRecord::max_accuracy_drop). It is
// not a requirement a query carries, so it is a column of apps only, not of
// jobs. NULL: unset, as for the defaults; apps stored before it have none.
constexpr char kAppsMaxAccuracyDrop[] = R"sql(
ALTER TABLE apps ADD COLUMN max_accuracy_drop REAL;
)sql";

// API keys (key_store.h). Only the SHA-256 of each secret is kept: the
// secrets are 256 random bits, so a fast hash suffices (nobody can search
// that space), and a copy of the file lets nobody call the server. `scope`
// is "admin" or "app"; an app key names its app, an admin key has app ''.
// No foreign key to apps: a key may be made for an app before its first
// model is registered.
constexpr char kApiKeys[] = R"sql(
CREATE TABLE api_keys (
  id              TEXT PRIMARY KEY NOT NULL,
  secret_sha256   TEXT NOT NULL,
  scope           TEXT NOT NULL,
  app             TEXT NOT NULL,
  name            TEXT NOT NULL,
  created_unix_ms INTEGER NOT NULL
);
)sql";

// Pipelines (pipeline_store.h; docs/pipelines.md, "Serving a pipeline").
// Keyed by name alone: /v2/models/{name} reaches a pipeline as it does a
// model. The spec is kept as JSON and validated again on reading, so no
// column depends on the models it names; no foreign key to apps either,
// for the same reason as api_keys, and deleting an app deletes its
// pipelines in code.
constexpr char kPipelines[] = R"sql(
CREATE TABLE pipelines (
  name            TEXT PRIMARY KEY NOT NULL,
  app             TEXT NOT NULL,
  spec_json       TEXT NOT NULL,
  created_unix_ms INTEGER NOT NULL
);
CREATE INDEX pipelines_by_app ON pipelines(app);
)sql";

// An app's SL_min for the mark allocator (AppRecord::sl_min), a column of
// apps only for the reason max_accuracy_drop is. NULL: --mark-sl-min.
constexpr char kAppsSlMin[] = R"sql(
ALTER TABLE apps ADD COLUMN sl_min REAL;
)sql";

// The plan a pipeline was last asked to provision (PipelineStore::SetPlan;
// docs/api.md, "Pipelines"), as the client sent it; empty for none.
constexpr char kPipelinePlans[] = R"sql(
ALTER TABLE pipelines ADD COLUMN plan_json TEXT NOT NULL DEFAULT '';
)sql";

// What each run of the server paid by worker type (cost_store.h): a run is
// keyed by its start time, and saved again as it goes, so a line is
// replaced, never added to.
constexpr char kCostRuns[] = R"sql(
CREATE TABLE cost_runs (
  run_started_unix_ms INTEGER NOT NULL,
  type                TEXT NOT NULL,
  market              TEXT NOT NULL,
  cost                REAL NOT NULL,
  workers             INTEGER NOT NULL,
  PRIMARY KEY (run_started_unix_ms, type)
);
)sql";

}  // namespace

// A new migration is appended with the next version; shipped ones never
// change (schema.h).
const std::vector<Migration>& SchemaMigrations() {
  static const auto* migrations = new std::vector<Migration>{
      {1, "apps, models, variants, profiles", kAppsModelsVariantsProfiles},
      {2, "variants: optimize_for_inference", kVariantsOptimizeForInference},
      {3, "offline jobs", kOfflineJobs},
      {4, "profiles: sweeps left", kProfilesSweepsLeft},
      {5, "apps: max_accuracy_drop", kAppsMaxAccuracyDrop},
      {6, "api keys", kApiKeys},
      {7, "pipelines", kPipelines},
      {8, "apps: sl_min", kAppsSlMin},
      {9, "pipelines: plan_json", kPipelinePlans},
      {10, "cost runs", kCostRuns},
  };
  return *migrations;
}

}  // namespace maitre::registry
