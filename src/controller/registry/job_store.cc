#include "controller/registry/job_store.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "controller/registry/sqlite.h"
#include "controller/registry/validation.h"
#include "core/logging.h"
#include "core/status_macros.h"

namespace maitre::registry {
namespace {

absl::Status ValidateJob(const JobRecord& j) {
  MAITRE_RETURN_IF_ERROR(ValidateName("job id", j.id));
  MAITRE_RETURN_IF_ERROR(ValidateName("app name", j.app));
  if (!j.model.empty()) MAITRE_RETURN_IF_ERROR(ValidateName("model name", j.model));
  if (!j.variant.empty()) MAITRE_RETURN_IF_ERROR(ValidateName("variant name", j.variant));
  if (j.batch_size <= 0) return absl::InvalidArgumentError("a job's batch_size must be positive");
  if (j.state.empty()) return absl::InvalidArgumentError("a job needs a state");
  for (const JobFileRecord& f : j.files) {
    if (f.rows < 0 || f.done_rows < 0 || f.done_rows > f.rows || f.correct < 0 ||
        f.correct > f.done_rows) {
      return absl::InvalidArgumentError(
          absl::StrCat("job ", j.id, " has inconsistent row counts for ", f.path));
    }
  }
  return ValidateRequirements(j.requirements);
}

// The columns of `jobs`, in the order JobFromRow reads them.
constexpr char kJobColumns[] =
    "id, seq, app, model, variant, input, output, latency_ms, min_accuracy, max_cost,"
    " batch_size, state, error, created_unix_ms, started_unix_ms, finished_unix_ms";

JobRecord JobFromRow(const Statement& st) {
  JobRecord j;
  j.id = st.Text(0);
  j.seq = st.Int(1);
  j.app = st.Text(2);
  j.model = st.Text(3);
  j.variant = st.Text(4);
  j.input = st.Text(5);
  j.output = st.Text(6);
  j.requirements.latency_ms = st.OptionalDouble(7);
  j.requirements.min_accuracy = st.OptionalDouble(8);
  j.requirements.max_cost = st.OptionalDouble(9);
  j.batch_size = static_cast<int32_t>(st.Int(10));
  j.state = st.Text(11);
  j.error = st.Text(12);
  j.created_unix_ms = st.Int(13);
  j.started_unix_ms = st.Int(14);
  j.finished_unix_ms = st.Int(15);
  return j;
}

// The rows of one new job and its files; the caller holds the transaction.
absl::Status InsertJob(Connection& db, const JobRecord& job) {
  {
    MAITRE_ASSIGN_OR_RETURN(
        Statement st,
        db.Prepare(absl::StrCat("INSERT INTO jobs(", kJobColumns,
                                ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12,"
                                " ?13, ?14, ?15, ?16)")));
    MAITRE_RETURN_IF_ERROR(st.BindText(job.id)
                               .BindInt(job.seq)
                               .BindText(job.app)
                               .BindText(job.model)
                               .BindText(job.variant)
                               .BindText(job.input)
                               .BindText(job.output)
                               .BindOptionalDouble(job.requirements.latency_ms)
                               .BindOptionalDouble(job.requirements.min_accuracy)
                               .BindOptionalDouble(job.requirements.max_cost)
                               .BindInt(job.batch_size)
                               .BindText(job.state)
                               .BindText(job.error)
                               .BindInt(job.created_unix_ms)
                               .BindInt(job.started_unix_ms)
                               .BindInt(job.finished_unix_ms)
                               .Run());
  }
  for (size_t i = 0; i < job.files.size(); ++i) {
    const JobFileRecord& f = job.files[i];
    MAITRE_ASSIGN_OR_RETURN(
        Statement st,
        db.Prepare("INSERT INTO job_files(job, idx, path, rows, labelled, done_rows, correct)"
                   " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"));
    MAITRE_RETURN_IF_ERROR(st.BindText(job.id)
                               .BindInt(static_cast<int64_t>(i))
                               .BindText(f.path)
                               .BindInt(f.rows)
                               .BindInt(f.labelled ? 1 : 0)
                               .BindInt(f.done_rows)
                               .BindInt(f.correct)
                               .Run());
  }
  return absl::OkStatus();
}

}  // namespace

JobStore::JobStore(absl::Mutex* mu, Connection* db) : mu_(mu), db_(db) {}

absl::Status JobStore::CreateJob(const JobRecord& job) {
  MAITRE_RETURN_IF_ERROR(ValidateJob(job));
  absl::MutexLock lock(mu_);
  MAITRE_ASSIGN_OR_RETURN(Transaction tx, Transaction::Begin(db_));
  {
    MAITRE_ASSIGN_OR_RETURN(Statement st,
                            db_->Prepare("SELECT 1 FROM jobs WHERE id = ?1 OR seq = ?2"));
    MAITRE_ASSIGN_OR_RETURN(bool taken, st.BindText(job.id).BindInt(job.seq).Step());
    if (taken) {
      return absl::AlreadyExistsError(
          absl::StrCat("a job with id ", job.id, " or seq ", job.seq, " already exists"));
    }
  }
  MAITRE_RETURN_IF_ERROR(InsertJob(*db_, job));
  return tx.Commit();
}

absl::Status JobStore::ReadJobFilesLocked(JobRecord& job) const {
  MAITRE_ASSIGN_OR_RETURN(
      Statement st, db_->Prepare("SELECT path, rows, labelled, done_rows, correct FROM job_files"
                                 " WHERE job = ?1 ORDER BY idx"));
  st.BindText(job.id);
  job.files.clear();
  while (true) {
    MAITRE_ASSIGN_OR_RETURN(bool row, st.Step());
    if (!row) return absl::OkStatus();
    job.files.push_back({st.Text(0), st.Int(1), st.Int(2) != 0, st.Int(3), st.Int(4)});
  }
}

absl::StatusOr<JobRecord> JobStore::GetJob(absl::string_view id) const {
  absl::MutexLock lock(mu_);
  MAITRE_ASSIGN_OR_RETURN(
      Statement st, db_->Prepare(absl::StrCat("SELECT ", kJobColumns, " FROM jobs WHERE id = ?1")));
  MAITRE_ASSIGN_OR_RETURN(bool found, st.BindText(id).Step());
  if (!found) return absl::NotFoundError(absl::StrCat("no job with id \"", id, "\""));
  JobRecord job = JobFromRow(st);
  MAITRE_RETURN_IF_ERROR(ReadJobFilesLocked(job));
  return job;
}

std::vector<JobRecord> JobStore::ListJobs() const {
  absl::MutexLock lock(mu_);
  std::vector<JobRecord> jobs;
  {
    auto st = db_->Prepare(absl::StrCat("SELECT ", kJobColumns, " FROM jobs ORDER BY seq"));
    if (!st.ok()) {
      spdlog::error("listing jobs: {}", st.status().ToString());
      return {};
    }
    jobs = ReadAllRows<JobRecord>(*st, JobFromRow, "jobs");
  }
  for (JobRecord& job : jobs) {
    if (absl::Status s = ReadJobFilesLocked(job); !s.ok()) {
      spdlog::error("listing the files of job {}: {}", job.id, s.ToString());
    }
  }
  return jobs;
}

absl::Status JobStore::UpdateJobState(const JobRecord& job) {
  MAITRE_RETURN_IF_ERROR(ValidateName("job id", job.id));
  if (job.state.empty()) return absl::InvalidArgumentError("a job needs a state");
  absl::MutexLock lock(mu_);
  MAITRE_ASSIGN_OR_RETURN(
      Statement st,
      db_->Prepare("UPDATE jobs SET state = ?2, error = ?3, started_unix_ms = ?4,"
                   " finished_unix_ms = ?5 WHERE id = ?1"));
  MAITRE_RETURN_IF_ERROR(st.BindText(job.id)
                             .BindText(job.state)
                             .BindText(job.error)
                             .BindInt(job.started_unix_ms)
                             .BindInt(job.finished_unix_ms)
                             .Run());
  if (db_->Changes() == 0) return absl::NotFoundError(absl::StrCat("no job with id ", job.id));
  return absl::OkStatus();
}

absl::Status JobStore::UpdateJobProgress(absl::string_view id, int index, int64_t done_rows,
                                         int64_t correct) {
  if (done_rows < 0 || correct < 0 || correct > done_rows) {
    return absl::InvalidArgumentError(absl::StrCat("inconsistent progress for job ", id));
  }
  absl::MutexLock lock(mu_);
  MAITRE_ASSIGN_OR_RETURN(
      Statement st,
      db_->Prepare("UPDATE job_files SET done_rows = ?3, correct = ?4"
                   " WHERE job = ?1 AND idx = ?2 AND ?3 <= rows"));
  MAITRE_RETURN_IF_ERROR(st.BindText(id).BindInt(index).BindInt(done_rows).BindInt(correct).Run());
  if (db_->Changes() == 0) {
    return absl::NotFoundError(
        absl::StrCat("job ", id, " has no file ", index, " with at least ", done_rows, " rows"));
  }
  return absl::OkStatus();
}

}  // namespace maitre::registry
