#include "controller/registry/pipeline_store.h"

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "controller/registry/sqlite.h"
#include "controller/registry/validation.h"
#include "core/status_macros.h"

namespace maitre::registry {
namespace {

absl::Status ValidatePipelineRecord(const PipelineRecord& p) {
  MAITRE_RETURN_IF_ERROR(ValidateName("pipeline name", p.name));
  MAITRE_RETURN_IF_ERROR(ValidateName("app name", p.app));
  if (p.spec_json.empty()) return absl::InvalidArgumentError("a pipeline's spec is empty");
  return absl::OkStatus();
}

PipelineRecord PipelineFromRow(const Statement& st) {
  PipelineRecord p;
  p.name = st.Text(0);
  p.app = st.Text(1);
  p.spec_json = st.Text(2);
  p.created_unix_ms = st.Int(3);
  p.plan_json = st.Text(4);
  return p;
}

}  // namespace

PipelineStore::PipelineStore(absl::Mutex* mu, Connection* db) : mu_(mu), db_(db) {}

absl::Status PipelineStore::PutPipeline(const PipelineRecord& record) {
  MAITRE_RETURN_IF_ERROR(ValidatePipelineRecord(record));
  absl::MutexLock lock(mu_);
  MAITRE_ASSIGN_OR_RETURN(Transaction tx, Transaction::Begin(db_));
  {
    MAITRE_ASSIGN_OR_RETURN(Statement st,
                            db_->Prepare("SELECT app FROM pipelines WHERE name = ?1"));
    MAITRE_ASSIGN_OR_RETURN(bool found, st.BindText(record.name).Step());
    if (found && st.Text(0) != record.app) {
      return absl::AlreadyExistsError(absl::StrCat("pipeline name '", record.name,
                                                   "' is taken by app '", st.Text(0), "'"));
    }
  }
  MAITRE_ASSIGN_OR_RETURN(
      Statement st,
      db_->Prepare("INSERT INTO pipelines(name, app, spec_json, created_unix_ms) "
                   "VALUES (?1, ?2, ?3, ?4) "
                   "ON CONFLICT(name) DO UPDATE SET spec_json = excluded.spec_json, "
                   "plan_json = ''"));
  MAITRE_RETURN_IF_ERROR(st.BindText(record.name)
                             .BindText(record.app)
                             .BindText(record.spec_json)
                             .BindInt(record.created_unix_ms)
                             .Run());
  return tx.Commit();
}

std::vector<PipelineRecord> PipelineStore::ListPipelines() const {
  absl::MutexLock lock(mu_);
  auto st = db_->Prepare(
      "SELECT name, app, spec_json, created_unix_ms, plan_json FROM pipelines ORDER BY name");
  if (!st.ok()) {
    spdlog::error("listing pipelines: {}", st.status().ToString());
    return {};
  }
  return ReadAllRows<PipelineRecord>(*st, PipelineFromRow, "pipelines");
}

absl::Status PipelineStore::DeletePipeline(absl::string_view app, absl::string_view name) {
  absl::MutexLock lock(mu_);
  MAITRE_ASSIGN_OR_RETURN(Statement st,
                          db_->Prepare("DELETE FROM pipelines WHERE app = ?1 AND name = ?2"));
  MAITRE_RETURN_IF_ERROR(st.BindText(app).BindText(name).Run());
  if (db_->Changes() == 0) {
    return absl::NotFoundError(
        absl::StrCat("app '", app, "' has no pipeline named '", name, "'"));
  }
  return absl::OkStatus();
}

absl::Status PipelineStore::SetPlan(absl::string_view app, absl::string_view name,
                                    absl::string_view plan_json) {
  absl::MutexLock lock(mu_);
  MAITRE_ASSIGN_OR_RETURN(
      Statement st,
      db_->Prepare("UPDATE pipelines SET plan_json = ?3 WHERE app = ?1 AND name = ?2"));
  MAITRE_RETURN_IF_ERROR(st.BindText(app).BindText(name).BindText(plan_json).Run());
  if (db_->Changes() == 0) {
    return absl::NotFoundError(
        absl::StrCat("app '", app, "' has no pipeline named '", name, "'"));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> PipelineStore::DeleteAppPipelines(absl::string_view app) {
  absl::MutexLock lock(mu_);
  MAITRE_ASSIGN_OR_RETURN(Statement st, db_->Prepare("DELETE FROM pipelines WHERE app = ?1"));
  MAITRE_RETURN_IF_ERROR(st.BindText(app).Run());
  return static_cast<int>(db_->Changes());
}

}  // namespace maitre::registry
