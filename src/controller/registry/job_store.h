// The durable records of offline jobs (controller/jobs): each job and its
// input files, with how many rows of each have durable results, so that a
// restarted controller resumes every unfinished job after its last completed
// chunk. They are the `jobs` and `job_files` tables of the registry's SQLite
// file (schema migration 3, schema.cc); the Registry opens that file, brings
// its schema up to date and hands out its JobStore (Registry::jobs()).
//
// Errors: InvalidArgument for a malformed record (names, row counts),
// NotFound for an unknown job or file, AlreadyExists for a taken id or seq,
// DataLoss for a row that cannot be read back, Unavailable when another
// process holds the file's lock too long.
//
// Thread-safety: thread-safe. The store shares the registry's one connection
// and the mutex that guards it, so its calls are serialised with the
// registry's; multi-row writes are BEGIN IMMEDIATE transactions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "core/variant.h"

namespace maitre::registry {

class Connection;

// One input file of an offline job and how far through it the job is.
struct JobFileRecord {
  std::string path;       // the .npz the job reads
  int64_t rows = 0;       // rows in the file
  bool labelled = false;  // the file holds "labels"
  int64_t done_rows = 0;  // rows [0, done_rows) have durable results
  int64_t correct = 0;    // among the done rows, predictions equal to the labels
};

// An offline job (controller/jobs). `state` is the name of a jobs::JobState;
// the jobs library owns the lifecycle and the store keeps the name it is
// given, as the registry does for variants.
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

class JobStore {
 public:
  // Works on `db` under `mu`, which guards it; both belong to the Registry
  // that creates the store and outlive it.
  JobStore(absl::Mutex* mu, Connection* db);

  JobStore(const JobStore&) = delete;
  JobStore& operator=(const JobStore&) = delete;

  // Stores a new job with its files in one transaction; AlreadyExists when
  // the id or seq is taken.
  absl::Status CreateJob(const JobRecord& job);
  absl::StatusOr<JobRecord> GetJob(absl::string_view id) const;
  // Every job with its files, by seq. Like the registry's List* calls it has
  // no error channel: a read that fails part way logs the error and returns
  // the jobs read so far.
  std::vector<JobRecord> ListJobs() const;
  // Sets a job's state, error and timestamps (the other fields never
  // change); NotFound for an unknown id.
  absl::Status UpdateJobState(const JobRecord& job);
  // Records that rows [0, done_rows) of file `index` have durable results,
  // `correct` of them matching the labels; NotFound for an unknown file.
  absl::Status UpdateJobProgress(absl::string_view id, int index, int64_t done_rows,
                                 int64_t correct);

 private:
  absl::Status ReadJobFilesLocked(JobRecord& job) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex* const mu_;
  Connection* const db_ ABSL_PT_GUARDED_BY(mu_);
};

}  // namespace maitre::registry
