#include "controller/registry/registry.h"

#include <filesystem>
#include <set>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "controller/registry/blob_store.h"
#include "controller/registry/sqlite.h"
#include "controller/registry/validation.h"
#include "core/status_macros.h"
#include "core/logging.h"

namespace maitre::registry {
namespace {

// ---- enum names ----
// core/variant.h has name functions but no parsers; these invert them by
// trying every enumerator, so a renamed enumerator cannot drift out of step.

constexpr Runtime kRuntimes[] = {Runtime::kTorch, Runtime::kOpenCv};
constexpr AccuracySource kAccuracySources[] = {AccuracySource::kUnknown, AccuracySource::kMeasured,
                                               AccuracySource::kDeclared};
constexpr VariantState kVariantStates[] = {VariantState::kPending, VariantState::kReady,
                                           VariantState::kFailed};

absl::StatusOr<Runtime> ParseRuntimeName(absl::string_view name) {
  for (Runtime r : kRuntimes) {
    if (RuntimeName(r) == name) return r;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown runtime \"", name, "\""));
}

absl::StatusOr<AccuracySource> ParseAccuracySourceName(absl::string_view name) {
  for (AccuracySource s : kAccuracySources) {
    if (AccuracySourceName(s) == name) return s;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown accuracy source \"", name, "\""));
}

// ---- validation of records before they are written ----

// `required` false lets the hash be empty (an optional file).
absl::Status ValidateBlob(absl::string_view what, absl::string_view hash, bool required) {
  if (hash.empty() && !required) return absl::OkStatus();
  if (BlobStore::IsValidHash(hash)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(what, " must be a blob hash (64 lowercase hex digits)"));
}

absl::Status ValidateModel(const ModelRecord& m) {
  MAITRE_RETURN_IF_ERROR(ValidateName("app name", m.app));
  MAITRE_RETURN_IF_ERROR(ValidateName("model name", m.name));
  MAITRE_RETURN_IF_ERROR(ValidateBlob("source_blob", m.source_blob, /*required=*/true));
  MAITRE_RETURN_IF_ERROR(ValidateBlob("onnx_blob", m.onnx_blob, /*required=*/false));
  MAITRE_RETURN_IF_ERROR(ValidateBlob("valset_blob", m.valset_blob, /*required=*/false));
  // The spec is stored as JSON and parsed on every read; refuse one that
  // would not come back, rather than store a model nobody can load.
  auto round_trip = ParseModelSpecJson(ModelSpecToJson(m.spec));
  if (!round_trip.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model ", m.name, " has an invalid spec: ", round_trip.status().message()));
  }
  return absl::OkStatus();
}

absl::Status ValidateVariant(const VariantRecord& v) {
  MAITRE_RETURN_IF_ERROR(ValidateName("model name", v.key.model));
  MAITRE_RETURN_IF_ERROR(ValidateName("variant name", v.key.variant));
  MAITRE_RETURN_IF_ERROR(
      ValidateBlob(absl::StrCat("blob of ", v.key.ToString()), v.blob, /*required=*/false));
  return ValidateFraction(absl::StrCat("accuracy of ", v.key.ToString()), v.accuracy);
}

absl::Status ValidateProfile(const ProfileRecord& p) {
  MAITRE_RETURN_IF_ERROR(ValidateName("model name", p.key.model));
  MAITRE_RETURN_IF_ERROR(ValidateName("variant name", p.key.variant));
  MAITRE_RETURN_IF_ERROR(ValidateName("worker type", p.worker_type));
  if (p.profile.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the profile of ", p.key.ToString(), " on ", p.worker_type, " has no points"));
  }
  if (p.sweeps_left < 0) {
    return absl::InvalidArgumentError(absl::StrCat("the profile of ", p.key.ToString(), " on ",
                                                   p.worker_type, " has negative sweeps left"));
  }
  return ValidateFraction(absl::StrCat("accuracy of ", p.key.ToString()), p.accuracy);
}

// ---- decoding rows ----
// Column orders match the SELECTs below.

AppRecord AppFromRow(const Statement& st) {
  AppRecord app;
  app.name = st.Text(0);
  app.defaults.latency_ms = st.OptionalDouble(1);
  app.defaults.min_accuracy = st.OptionalDouble(2);
  app.defaults.max_cost = st.OptionalDouble(3);
  app.max_accuracy_drop = st.OptionalDouble(4);
  app.sl_min = st.OptionalDouble(5);
  return app;
}

absl::StatusOr<ModelRecord> ModelFromRow(const Statement& st) {
  ModelRecord m;
  m.name = st.Text(0);
  m.app = st.Text(1);
  auto spec = ParseModelSpecJson(st.Text(2));
  if (!spec.ok()) {
    return absl::DataLossError(
        absl::StrCat("model ", m.name, " has an unreadable spec: ", spec.status().message()));
  }
  m.spec = *std::move(spec);
  m.source_blob = st.Text(3);
  m.onnx_blob = st.Text(4);
  m.valset_blob = st.Text(5);
  m.created_unix_ms = st.Int(6);
  return m;
}

absl::StatusOr<VariantRecord> VariantFromRow(const Statement& st) {
  VariantRecord v;
  v.key = {st.Text(0), st.Text(1)};
  auto runtime = ParseRuntimeName(st.Text(2));
  auto source = ParseAccuracySourceName(st.Text(5));
  auto state = ParseVariantState(st.Text(6));
  for (const absl::Status& s : {runtime.status(), source.status(), state.status()}) {
    if (!s.ok()) {
      return absl::DataLossError(
          absl::StrCat("variant ", v.key.ToString(), " has an unreadable row: ", s.message()));
    }
  }
  v.runtime = *runtime;
  v.blob = st.Text(3);
  v.accuracy = st.Double(4);
  v.accuracy_source = *source;
  v.state = *state;
  v.detail = st.Text(7);
  v.optimize_for_inference = st.Int(8) != 0;
  return v;
}

// Brings the file's schema up to `migrations.back().version`; returns the
// version it ends at.
absl::StatusOr<int> Migrate(Connection& db, const std::vector<Migration>& migrations) {
  for (size_t i = 0; i < migrations.size(); ++i) {
    if (migrations[i].version != static_cast<int>(i) + 1) {
      return absl::InvalidArgumentError(
          "registry migrations must be numbered 1, 2, 3, ... in order without gaps");
    }
  }
  MAITRE_RETURN_IF_ERROR(
      db.Exec("CREATE TABLE IF NOT EXISTS schema_version ("
              " version INTEGER PRIMARY KEY NOT NULL,"
              " description TEXT NOT NULL)"));
  auto current_version = [&db]() -> absl::StatusOr<int> {
    MAITRE_ASSIGN_OR_RETURN(Statement st,
                            db.Prepare("SELECT COALESCE(MAX(version), 0) FROM schema_version"));
    MAITRE_ASSIGN_OR_RETURN(bool row, st.Step());
    return row ? static_cast<int>(st.Int(0)) : 0;
  };
  MAITRE_ASSIGN_OR_RETURN(int version, current_version());
  const int known = static_cast<int>(migrations.size());
  if (version > known) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the registry ", db.path(), " has schema version ", version,
        " but this build knows only up to ", known,
        "; it was written by a newer Maitre, so use that build (or a copy of the data dir)"));
  }
  for (const Migration& m : migrations) {
    if (m.version <= version) continue;
    MAITRE_ASSIGN_OR_RETURN(Transaction tx, Transaction::Begin(&db));
    // Another process may have migrated the file while this one waited for
    // the write lock.
    MAITRE_ASSIGN_OR_RETURN(version, current_version());
    if (m.version <= version) continue;
    absl::Status applied = db.Exec(m.sql);
    if (!applied.ok()) {
      return absl::Status(applied.code(),
                          absl::StrCat("registry schema migration ", m.version, " (", m.description,
                                       ") failed: ", applied.message()));
    }
    MAITRE_ASSIGN_OR_RETURN(
        Statement record,
        db.Prepare("INSERT INTO schema_version(version, description) VALUES (?1, ?2)"));
    MAITRE_RETURN_IF_ERROR(record.BindInt(m.version).BindText(m.description).Run());
    MAITRE_RETURN_IF_ERROR(tx.Commit());
    version = m.version;
    spdlog::info("registry {}: schema migrated to version {} ({})", db.path(), m.version,
                 m.description);
  }
  return version;
}

}  // namespace

absl::string_view VariantStateName(VariantState state) {
  switch (state) {
    case VariantState::kReady:
      return "ready";
    case VariantState::kFailed:
      return "failed";
    case VariantState::kPending:
      break;
  }
  return "pending";
}

absl::StatusOr<VariantState> ParseVariantState(absl::string_view name) {
  for (VariantState s : kVariantStates) {
    if (VariantStateName(s) == name) return s;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown variant state \"", name, "\""));
}

// ---- Registry ----

absl::StatusOr<std::unique_ptr<Registry>> Registry::Open(Options options) {
  if (options.path.empty()) return absl::InvalidArgumentError("the registry needs a file path");
  std::filesystem::path parent = std::filesystem::path(options.path).parent_path();
  std::error_code ec;
  if (!parent.empty()) {
    std::filesystem::create_directories(parent, ec);
    if (ec) {
      return absl::UnavailableError(absl::StrCat("cannot create the registry directory ",
                                                 parent.string(), ": ", ec.message()));
    }
  }
  if (std::filesystem::is_directory(options.path, ec)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the registry path ", options.path, " is a directory; it must name a database file"));
  }
  MAITRE_ASSIGN_OR_RETURN(std::unique_ptr<Connection> db, Connection::Open(options.path));
  MAITRE_ASSIGN_OR_RETURN(int version, Migrate(*db, options.migrations));
  return std::unique_ptr<Registry>(new Registry(std::move(db), options.path, version));
}

Registry::Registry(std::unique_ptr<Connection> db, std::string path, int schema_version)
    : path_(std::move(path)),
      schema_version_(schema_version),
      db_(std::move(db)),
      jobs_(&mu_, db_.get()),
      keys_(&mu_, db_.get()),
      pipelines_(&mu_, db_.get()),
      costs_(&mu_, db_.get()) {}

Registry::~Registry() = default;

absl::StatusOr<bool> Registry::ModelExistsLocked(absl::string_view name) const {
  MAITRE_ASSIGN_OR_RETURN(Statement st, db_->Prepare("SELECT 1 FROM models WHERE name = ?1"));
  return st.BindText(name).Step();
}

absl::StatusOr<bool> Registry::VariantExistsLocked(const VariantKey& key) const {
  MAITRE_ASSIGN_OR_RETURN(Statement st,
                          db_->Prepare("SELECT 1 FROM variants WHERE model = ?1 AND name = ?2"));
  return st.BindText(key.model).BindText(key.variant).Step();
}

absl::StatusOr<int> Registry::SweepsLeftLocked(const VariantKey& key,
                                               absl::string_view worker_type) const {
  MAITRE_ASSIGN_OR_RETURN(
      Statement st, db_->Prepare("SELECT sweeps_left FROM profiles"
                                 " WHERE model = ?1 AND variant = ?2 AND worker_type = ?3"));
  MAITRE_ASSIGN_OR_RETURN(bool row,
                          st.BindText(key.model).BindText(key.variant).BindText(worker_type).Step());
  return row ? static_cast<int>(st.Int(0)) : kNoStoredProfile;
}

// ---- apps ----

absl::Status Registry::PutApp(const AppRecord& app) {
  MAITRE_RETURN_IF_ERROR(ValidateName("app name", app.name));
  MAITRE_RETURN_IF_ERROR(ValidateRequirements(app.defaults));
  if (app.max_accuracy_drop) {
    MAITRE_RETURN_IF_ERROR(ValidateFraction("max_accuracy_drop", *app.max_accuracy_drop));
  }
  if (app.sl_min && !(*app.sl_min > 0 && *app.sl_min <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("sl_min must be in (0, 1], the share of queries answered in time; not ",
                     *app.sl_min));
  }
  absl::MutexLock lock(&mu_);
  MAITRE_ASSIGN_OR_RETURN(
      Statement st,
      db_->Prepare("INSERT INTO apps(name, latency_ms, min_accuracy, max_cost, max_accuracy_drop,"
                   " sl_min) VALUES (?1, ?2, ?3, ?4, ?5, ?6)"
                   " ON CONFLICT(name) DO UPDATE SET latency_ms = excluded.latency_ms,"
                   " min_accuracy = excluded.min_accuracy, max_cost = excluded.max_cost,"
                   " max_accuracy_drop = excluded.max_accuracy_drop, sl_min = excluded.sl_min"));
  return st.BindText(app.name)
      .BindOptionalDouble(app.defaults.latency_ms)
      .BindOptionalDouble(app.defaults.min_accuracy)
      .BindOptionalDouble(app.defaults.max_cost)
      .BindOptionalDouble(app.max_accuracy_drop)
      .BindOptionalDouble(app.sl_min)
      .Run();
}

absl::Status Registry::DeleteApp(absl::string_view name) {
  absl::MutexLock lock(&mu_);
  MAITRE_ASSIGN_OR_RETURN(Transaction tx, Transaction::Begin(db_.get()));
  // Variants, profiles and their points go with the models (ON DELETE
  // CASCADE in schema.cc).
  MAITRE_ASSIGN_OR_RETURN(Statement models, db_->Prepare("DELETE FROM models WHERE app = ?1"));
  MAITRE_RETURN_IF_ERROR(models.BindText(name).Run());
  MAITRE_ASSIGN_OR_RETURN(Statement app, db_->Prepare("DELETE FROM apps WHERE name = ?1"));
  MAITRE_RETURN_IF_ERROR(app.BindText(name).Run());
  if (db_->Changes() == 0) return absl::NotFoundError(absl::StrCat("no app named \"", name, "\""));
  return tx.Commit();
}

absl::StatusOr<AppRecord> Registry::GetApp(absl::string_view name) const {
  absl::MutexLock lock(&mu_);
  MAITRE_ASSIGN_OR_RETURN(Statement st,
                          db_->Prepare("SELECT name, latency_ms, min_accuracy, max_cost,"
                                       " max_accuracy_drop, sl_min FROM apps WHERE name = ?1"));
  MAITRE_ASSIGN_OR_RETURN(bool found, st.BindText(name).Step());
  if (!found) return absl::NotFoundError(absl::StrCat("no app named \"", name, "\""));
  return AppFromRow(st);
}

std::vector<AppRecord> Registry::ListApps() const {
  absl::MutexLock lock(&mu_);
  auto st = db_->Prepare(
      "SELECT name, latency_ms, min_accuracy, max_cost, max_accuracy_drop, sl_min FROM apps"
      " ORDER BY name");
  if (!st.ok()) {
    spdlog::error("listing apps: {}", st.status().ToString());
    return {};
  }
  return ReadAllRows<AppRecord>(*st, AppFromRow, "apps");
}

// ---- models ----

absl::Status Registry::RegisterModel(const ModelRecord& model,
                                     const std::vector<VariantRecord>& variants) {
  MAITRE_RETURN_IF_ERROR(ValidateModel(model));
  std::vector<VariantRecord> owned = variants;
  std::set<std::string> seen;
  for (VariantRecord& v : owned) {
    if (v.key.model.empty()) v.key.model = model.name;
    if (v.key.model != model.name) {
      return absl::InvalidArgumentError(
          absl::StrCat("variant ", v.key.ToString(), " does not belong to model ", model.name));
    }
    MAITRE_RETURN_IF_ERROR(ValidateVariant(v));
    if (!seen.insert(v.key.variant).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("variant ", v.key.ToString(), " is listed twice"));
    }
  }

  absl::MutexLock lock(&mu_);
  MAITRE_ASSIGN_OR_RETURN(Transaction tx, Transaction::Begin(db_.get()));
  {
    MAITRE_ASSIGN_OR_RETURN(Statement st,
                            db_->Prepare("SELECT app, source_blob FROM models WHERE name = ?1"));
    MAITRE_ASSIGN_OR_RETURN(bool exists, st.BindText(model.name).Step());
    if (exists) {
      std::string owner = st.Text(0);
      if (owner != model.app) {
        return absl::AlreadyExistsError(absl::StrCat(
            "model name \"", model.name, "\" is already registered by app \"", owner,
            "\"; model names are global because /v2/models/{name} addresses them, so pick another "
            "name"));
      }
      // Same app, same bytes: registration is idempotent. Returning rolls
      // the (empty) transaction back.
      if (st.Text(1) == model.source_blob) return absl::OkStatus();
    }
  }
  // New bytes under an existing name replace the old model; deleting it
  // cascades to its variants and profiles.
  {
    MAITRE_ASSIGN_OR_RETURN(Statement del, db_->Prepare("DELETE FROM models WHERE name = ?1"));
    MAITRE_RETURN_IF_ERROR(del.BindText(model.name).Run());
  }
  {
    MAITRE_ASSIGN_OR_RETURN(
        Statement app,
        db_->Prepare("INSERT INTO apps(name) VALUES (?1) ON CONFLICT(name) DO NOTHING"));
    MAITRE_RETURN_IF_ERROR(app.BindText(model.app).Run());
  }
  {
    MAITRE_ASSIGN_OR_RETURN(
        Statement ins,
        db_->Prepare("INSERT INTO models(name, app, spec_json, source_blob, onnx_blob, valset_blob,"
                     " created_unix_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"));
    MAITRE_RETURN_IF_ERROR(ins.BindText(model.name)
                               .BindText(model.app)
                               .BindText(ModelSpecToJson(model.spec))
                               .BindText(model.source_blob)
                               .BindText(model.onnx_blob)
                               .BindText(model.valset_blob)
                               .BindInt(model.created_unix_ms)
                               .Run());
  }
  for (const VariantRecord& v : owned) MAITRE_RETURN_IF_ERROR(UpsertVariantLocked(v));
  return tx.Commit();
}

absl::StatusOr<ModelRecord> Registry::GetModel(absl::string_view name) const {
  absl::MutexLock lock(&mu_);
  MAITRE_ASSIGN_OR_RETURN(
      Statement st,
      db_->Prepare(
          "SELECT name, app, spec_json, source_blob, onnx_blob, valset_blob, created_unix_ms"
          " FROM models WHERE name = ?1"));
  MAITRE_ASSIGN_OR_RETURN(bool found, st.BindText(name).Step());
  if (!found) return absl::NotFoundError(absl::StrCat("no model named \"", name, "\""));
  return ModelFromRow(st);
}

std::vector<ModelRecord> Registry::ListModels(absl::string_view app) const {
  absl::MutexLock lock(&mu_);
  auto st = db_->Prepare(
      "SELECT name, app, spec_json, source_blob, onnx_blob, valset_blob, created_unix_ms"
      " FROM models WHERE ?1 = '' OR app = ?1 ORDER BY name");
  if (!st.ok()) {
    spdlog::error("listing models: {}", st.status().ToString());
    return {};
  }
  st->BindText(app);
  return ReadAllRows<ModelRecord>(*st, ModelFromRow, "models");
}

absl::Status Registry::DeleteModel(absl::string_view name) {
  absl::MutexLock lock(&mu_);
  MAITRE_ASSIGN_OR_RETURN(Statement st, db_->Prepare("DELETE FROM models WHERE name = ?1"));
  MAITRE_RETURN_IF_ERROR(st.BindText(name).Run());
  if (db_->Changes() == 0)
    return absl::NotFoundError(absl::StrCat("no model named \"", name, "\""));
  return absl::OkStatus();
}

std::set<std::string> Registry::ReferencedBlobs() const {
  absl::MutexLock lock(&mu_);
  std::set<std::string> blobs;
  auto st = db_->Prepare(
      "SELECT source_blob FROM models UNION SELECT onnx_blob FROM models"
      " UNION SELECT valset_blob FROM models UNION SELECT blob FROM variants");
  if (!st.ok()) {
    spdlog::error("listing referenced blobs: {}", st.status().ToString());
    return blobs;
  }
  auto text = [](Statement& row) -> absl::StatusOr<std::string> { return row.Text(0); };
  for (std::string& blob : ReadAllRows<std::string>(*st, text, "referenced blobs")) {
    if (!blob.empty()) blobs.insert(std::move(blob));
  }
  return blobs;
}

// ---- variants ----

absl::Status Registry::UpsertVariantLocked(const VariantRecord& v) {
  // ON CONFLICT DO UPDATE keeps the row (and so its profiles); INSERT OR
  // REPLACE would delete it and cascade the profiles away.
  MAITRE_ASSIGN_OR_RETURN(
      Statement st,
      db_->Prepare("INSERT INTO variants(model, name, runtime, blob, accuracy, accuracy_source,"
                   " state, detail, optimize_for_inference)"
                   " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
                   " ON CONFLICT(model, name) DO UPDATE SET runtime = excluded.runtime,"
                   " blob = excluded.blob, accuracy = excluded.accuracy,"
                   " accuracy_source = excluded.accuracy_source, state = excluded.state,"
                   " detail = excluded.detail,"
                   " optimize_for_inference = excluded.optimize_for_inference"));
  return st.BindText(v.key.model)
      .BindText(v.key.variant)
      .BindText(RuntimeName(v.runtime))
      .BindText(v.blob)
      .BindDouble(v.accuracy)
      .BindText(AccuracySourceName(v.accuracy_source))
      .BindText(VariantStateName(v.state))
      .BindText(v.detail)
      .BindInt(v.optimize_for_inference ? 1 : 0)
      .Run();
}

absl::Status Registry::PutVariant(const VariantRecord& variant) {
  MAITRE_RETURN_IF_ERROR(ValidateVariant(variant));
  absl::MutexLock lock(&mu_);
  MAITRE_ASSIGN_OR_RETURN(Transaction tx, Transaction::Begin(db_.get()));
  MAITRE_ASSIGN_OR_RETURN(bool exists, ModelExistsLocked(variant.key.model));
  if (!exists) {
    return absl::NotFoundError(absl::StrCat("cannot store variant ", variant.key.ToString(),
                                            ": no model named \"", variant.key.model, "\""));
  }
  MAITRE_RETURN_IF_ERROR(UpsertVariantLocked(variant));
  return tx.Commit();
}

absl::StatusOr<VariantRecord> Registry::GetVariant(const VariantKey& key) const {
  absl::MutexLock lock(&mu_);
  MAITRE_ASSIGN_OR_RETURN(
      Statement st,
      db_->Prepare("SELECT model, name, runtime, blob, accuracy, accuracy_source, state, detail,"
                   " optimize_for_inference FROM variants WHERE model = ?1 AND name = ?2"));
  MAITRE_ASSIGN_OR_RETURN(bool found, st.BindText(key.model).BindText(key.variant).Step());
  if (!found) return absl::NotFoundError(absl::StrCat("no variant ", key.ToString()));
  return VariantFromRow(st);
}

std::vector<VariantRecord> Registry::ListVariants(absl::string_view model) const {
  absl::MutexLock lock(&mu_);
  auto st = db_->Prepare(
      "SELECT model, name, runtime, blob, accuracy, accuracy_source, state, detail,"
      " optimize_for_inference"
      " FROM variants WHERE ?1 = '' OR model = ?1 ORDER BY model, name");
  if (!st.ok()) {
    spdlog::error("listing variants: {}", st.status().ToString());
    return {};
  }
  st->BindText(model);
  return ReadAllRows<VariantRecord>(*st, VariantFromRow, "variants");
}

// ---- profiles ----

absl::Status Registry::UpsertProfileLocked(const ProfileRecord& p) {
  {
    MAITRE_ASSIGN_OR_RETURN(
        Statement st,
        db_->Prepare(
            "INSERT INTO profiles(model, variant, worker_type, accuracy, load_ms, memory_mb,"
            " sweeps_left) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"
            " ON CONFLICT(model, variant, worker_type) DO UPDATE SET"
            " accuracy = excluded.accuracy, load_ms = excluded.load_ms,"
            " memory_mb = excluded.memory_mb, sweeps_left = excluded.sweeps_left"));
    MAITRE_RETURN_IF_ERROR(st.BindText(p.key.model)
                               .BindText(p.key.variant)
                               .BindText(p.worker_type)
                               .BindDouble(p.accuracy)
                               .BindDouble(p.profile.load_ms())
                               .BindDouble(p.profile.memory_mb())
                               .BindInt(p.sweeps_left)
                               .Run());
  }
  {
    // The new profile replaces every old point, including batch sizes the
    // new measurement stopped before.
    MAITRE_ASSIGN_OR_RETURN(
        Statement st, db_->Prepare("DELETE FROM profile_points"
                                   " WHERE model = ?1 AND variant = ?2 AND worker_type = ?3"));
    MAITRE_RETURN_IF_ERROR(
        st.BindText(p.key.model).BindText(p.key.variant).BindText(p.worker_type).Run());
  }
  for (const LatencyPoint& point : p.profile.points()) {
    MAITRE_ASSIGN_OR_RETURN(
        Statement st,
        db_->Prepare(
            "INSERT INTO profile_points(model, variant, worker_type, batch, p50_ms, p99_ms)"
            " VALUES (?1, ?2, ?3, ?4, ?5, ?6)"));
    MAITRE_RETURN_IF_ERROR(st.BindText(p.key.model)
                               .BindText(p.key.variant)
                               .BindText(p.worker_type)
                               .BindInt(point.batch)
                               .BindDouble(point.p50_ms)
                               .BindDouble(point.p99_ms)
                               .Run());
  }
  return absl::OkStatus();
}

absl::Status Registry::PutProfile(const ProfileRecord& profile) {
  return PutProfileChecked(profile, std::nullopt);
}

absl::Status Registry::PutProfileIfUnchanged(const ProfileRecord& profile,
                                             int expected_sweeps_left) {
  return PutProfileChecked(profile, expected_sweeps_left);
}

absl::Status Registry::PutProfileChecked(const ProfileRecord& profile,
                                         std::optional<int> expected_sweeps_left) {
  MAITRE_RETURN_IF_ERROR(ValidateProfile(profile));
  absl::MutexLock lock(&mu_);
  MAITRE_ASSIGN_OR_RETURN(Transaction tx, Transaction::Begin(db_.get()));
  MAITRE_ASSIGN_OR_RETURN(bool exists, VariantExistsLocked(profile.key));
  if (!exists) {
    return absl::NotFoundError(
        absl::StrCat("cannot store a profile for unknown variant ", profile.key.ToString()));
  }
  if (expected_sweeps_left.has_value()) {
    MAITRE_ASSIGN_OR_RETURN(int stored, SweepsLeftLocked(profile.key, profile.worker_type));
    if (stored != *expected_sweeps_left) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the profile of ", profile.key.ToString(), " on ", profile.worker_type,
          " changed since it was read"));
    }
  }
  MAITRE_RETURN_IF_ERROR(UpsertProfileLocked(profile));
  return tx.Commit();
}

std::vector<ProfileRecord> Registry::ListProfiles(absl::string_view model) const {
  absl::MutexLock lock(&mu_);
  auto st = db_->Prepare(
      "SELECT p.model, p.variant, p.worker_type, p.accuracy, p.load_ms, p.memory_mb,"
      " pt.batch, pt.p50_ms, pt.p99_ms, p.sweeps_left"
      " FROM profiles p JOIN profile_points pt"
      " ON pt.model = p.model AND pt.variant = p.variant AND pt.worker_type = p.worker_type"
      " WHERE ?1 = '' OR p.model = ?1"
      " ORDER BY p.model, p.variant, p.worker_type, pt.batch");
  if (!st.ok()) {
    spdlog::error("listing profiles: {}", st.status().ToString());
    return {};
  }
  st->BindText(model);

  // Rows arrive grouped by profile; each group becomes one record.
  std::vector<ProfileRecord> out;
  ProfileRecord current;
  std::vector<LatencyPoint> points;
  double load_ms = 0, memory_mb = 0;
  auto flush = [&]() {
    if (points.empty()) return;
    auto profile = Profile::Create(std::move(points), load_ms, memory_mb);
    points.clear();
    if (!profile.ok()) {
      spdlog::error("listing profiles: skipping {} on {}: {}", current.key.ToString(),
                    current.worker_type, profile.status().ToString());
      return;
    }
    current.profile = *std::move(profile);
    out.push_back(current);
  };
  while (true) {
    absl::StatusOr<bool> row = st->Step();
    if (!row.ok()) {
      spdlog::error("listing profiles: {}", row.status().ToString());
      break;
    }
    if (!*row) break;
    VariantKey key{st->Text(0), st->Text(1)};
    std::string worker_type = st->Text(2);
    if (!points.empty() && !(key == current.key && worker_type == current.worker_type)) flush();
    if (points.empty()) {
      current.key = std::move(key);
      current.worker_type = std::move(worker_type);
      current.accuracy = st->Double(3);
      load_ms = st->Double(4);
      memory_mb = st->Double(5);
      current.sweeps_left = static_cast<int>(st->Int(9));
    }
    points.push_back(LatencyPoint{static_cast<int>(st->Int(6)), st->Double(7), st->Double(8)});
  }
  flush();
  return out;
}

absl::StatusOr<int> Registry::ImportProfiles(const std::vector<ProfileRecord>& profiles) {
  for (const ProfileRecord& p : profiles) MAITRE_RETURN_IF_ERROR(ValidateProfile(p));
  absl::MutexLock lock(&mu_);
  MAITRE_ASSIGN_OR_RETURN(Transaction tx, Transaction::Begin(db_.get()));
  std::set<std::string> missing;
  for (const ProfileRecord& p : profiles) {
    MAITRE_ASSIGN_OR_RETURN(bool exists, VariantExistsLocked(p.key));
    if (!exists) missing.insert(p.key.ToString());
  }
  if (!missing.empty()) {
    return absl::NotFoundError(
        absl::StrCat("cannot import profiles for unknown variants ", absl::StrJoin(missing, ", "),
                     "; register their models first. Nothing was imported."));
  }
  for (const ProfileRecord& p : profiles) MAITRE_RETURN_IF_ERROR(UpsertProfileLocked(p));
  MAITRE_RETURN_IF_ERROR(tx.Commit());
  return static_cast<int>(profiles.size());
}

}  // namespace maitre::registry
