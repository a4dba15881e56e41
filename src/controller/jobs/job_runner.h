// Offline (batch) jobs (INFaaS; docs/api.md, "Offline jobs"): a job names an
// input set, an output directory and requirements (or a model); the runner
// feeds it through the same serving path as online queries, in chunks of
// `batch_size` rows, on spare capacity only.
//
// How it runs:
//  - Jobs run one at a time, first come first served; one chunk of the head
//    job is in flight at a time. Each chunk is one query with shape
//    [rows, ...], sent through `infer` (serve.cc passes Dispatcher::Infer), so
//    the same variant selection, placement and workers serve it. A chunk
//    sets latency_ms only if the job asked for one, so it is best-effort
//    (never held back to build a batch) unless the job or its app says
//    otherwise.
//  - Before each chunk the throttle (job_throttle.h) decides whether the
//    head job runs or pauses; a paused job keeps its place.
//  - A chunk's results are written to a staging file atomically and durably
//    and only then is its progress recorded in the job store; when an input
//    file is complete its result file is assembled (job_files.h). A restarted
//    controller therefore resumes every unfinished job after its last
//    durable chunk: finished chunks are never sent again.
//  - Errors: a query error that names the job's own fault (bad input, no
//    such model, unsatisfiable requirements) fails the job at once;
//    unavailability, deadlines and backpressure are retried without limit
//    with a growing pause (nothing accepted is lost); other errors are
//    retried up to max_attempts times in a row.
//
// Lifecycle of a job: job_state.h. Records: registry/job_store.h.
//
// Thread-safety: thread-safe. Submit, Get, List and Cancel may be called
// from any thread; Submit reads the input files, so callers keep it off I/O
// threads. Step() is the loop body: Start() runs it on a thread of its own;
// tests call it by hand with a ManualClock instead. Never both.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "controller/models/catalog.h"
#include "controller/dataplane/cluster.h"
#include "controller/dataplane/dispatcher.h"
#include "controller/jobs/job_files.h"
#include "controller/jobs/job_state.h"
#include "controller/jobs/job_throttle.h"
#include "controller/registry/job_store.h"
#include "core/clock.h"

namespace maitre::jobs {

// Sends one query through the serving path: Dispatcher::Infer's signature.
using InferFn = std::function<void(controller::InferTarget, controller::InferRequest,
                                   Nanos received, controller::InferDone)>;

struct JobSubmission {
  std::string app;
  std::string model;   // "", a model name, or "model:variant"
  std::string input;   // absolute path on the controller: a .npz or a directory of them
  std::string output;  // absolute path of a directory (created if missing)
  Requirements requirements;
  int32_t batch_size = 0;  // 0: the runner's default
};

// A job as clients see it.
struct JobStatus {
  registry::JobRecord record;  // state names `state`; files carry progress
  JobState state = JobState::kQueued;
  int64_t done = 0;   // rows with durable results
  int64_t total = 0;  // rows in all input files
  int files_done = 0;
  // Fraction of labelled rows done whose prediction matched; unset until a
  // labelled row is done.
  std::optional<double> accuracy;
  int64_t labelled_done = 0;
  // Why a paused job waits, or the last transient error being retried.
  std::string reason;
  // Rows already done when this controller took the job up (after a
  // restart), and rows this controller has sent since (a chunk counts once,
  // however often it is retried).
  int64_t resumed_from = 0;
  int64_t rows_sent = 0;

  double progress() const { return total == 0 ? 1.0 : static_cast<double>(done) / total; }
};

class JobRunner {
 public:
  struct Options {
    registry::JobStore* store = nullptr;           // required; outlives the runner
    const controller::Catalog* catalog = nullptr;  // required; to check submissions
    InferFn infer;                                 // required
    // The cluster's live view (Cluster::Snapshot). Null: jobs are never
    // throttled.
    std::function<std::vector<controller::WorkerView>()> cluster;
    ThrottlePolicy throttle;
    const Clock* clock = SteadyClock::Get();
    // Wall-clock milliseconds since the epoch for the records' timestamps
    // (the Clock's epoch is arbitrary). Null: the system clock.
    std::function<int64_t()> unix_ms;
    // Jobs read their inputs and write their results beneath this
    // directory only (job_files.h, ResolveUnder); required.
    std::string jobs_dir;
    int32_t default_batch_size = 64;
    int32_t max_batch_size = 4096;
    Nanos tick = 100 * kMillisecond;  // how often the loop looks again
    // The jobs' own load (job_throttle.h) is their peak rate over buckets
    // of one worker report interval within the window: a report covers one
    // such interval ending at an unknown moment, and a job's rate changes
    // quickly (it ramps up after a pause), so an average over the window
    // would miss what the report saw and count the job's own queries as
    // online traffic.
    Nanos own_load_window = 2 * kSecond;
    Nanos own_load_bucket = 500 * kMillisecond;
    int max_attempts = 5;                      // for errors neither transient nor fatal
    Nanos retry_backoff = 500 * kMillisecond;  // doubles per failure in a row...
    Nanos max_retry_backoff = 10 * kSecond;    // ...up to this
  };

  // Loads every job from the store; unfinished ones resume once the loop
  // runs. InvalidArgument when a required option is missing.
  static absl::StatusOr<std::unique_ptr<JobRunner>> Create(Options options);
  ~JobRunner();  // Stop()s

  JobRunner(const JobRunner&) = delete;
  JobRunner& operator=(const JobRunner&) = delete;

  // Checks and stores a new job (state queued). Errors say what to fix:
  // NotFound for an unknown app, model or variant; InvalidArgument for a
  // missing, unreadable or ill-fitting input, an output that cannot be
  // written, or bad parameters; PermissionDenied for an input or output
  // outside the jobs directory; AlreadyExists when a result file would
  // overwrite an existing file.
  absl::StatusOr<JobStatus> Submit(const JobSubmission& submission);
  absl::StatusOr<JobStatus> Get(absl::string_view id) const;  // NotFound
  std::vector<JobStatus> List() const;                        // by submission
  // Cancels a live job (its completed result files stay; staging files
  // are removed). FailedPrecondition for a finished job, NotFound.
  absl::StatusOr<JobStatus> Cancel(absl::string_view id);

  // Runs Step() on a thread every `tick`, and at once when something
  // changes (a submission, a cancellation, a chunk's answer).
  void Start();
  // Stops and joins the loop. Answers to chunks still in flight are dropped;
  // those chunks are sent again after a restart.
  void Stop();
  // One round: handle answers, clean up, throttle, send the next chunk.
  void Step();

 private:
  struct Job;
  struct Outcome;
  struct Inbox;
  struct OwnChunk {
    Nanos at = 0;
    std::string worker;
    VariantKey key;
    Nanos compute = 0;
  };

  explicit JobRunner(Options options);

  void Loop();
  void Wake();
  int64_t UnixMs() const;
  JobStatus StatusOf(const Job& job) const;
  // Validates a submission and builds its record (without id, seq, state).
  absl::StatusOr<registry::JobRecord> Prepare(const JobSubmission& submission) const;

  // All of the following run on the loop's thread only.
  void HandleOutcome(Outcome outcome);
  void Retry(Job& job, const absl::Status& error, bool transient);
  void Throttle(Job& job);
  void SendNext(Job& job);
  // Assembles every complete input file's result not yet assembled; false
  // (having failed the job) on error.
  bool AssembleFinished(Job& job);
  void CleanUp(Job& job);
  OwnLoad OwnLoadNow();

  // Changes `job`'s state if the lifecycle allows it and records it.
  void Transition(Job& job, JobState to, std::string error = "") ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Job* HeadLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Options options_;
  const std::shared_ptr<Inbox> inbox_;

  mutable absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<Job>> jobs_ ABSL_GUARDED_BY(mu_);
  int64_t next_seq_ ABSL_GUARDED_BY(mu_) = 1;

  // Loop-thread state.
  ThrottleState throttle_;
  std::vector<OwnChunk> own_chunks_;  // completed chunks in the last window
  std::string cached_path_;           // the input file last read, kept for its next chunk
  std::shared_ptr<const InputFile> cached_file_;

  std::thread thread_;
};

}  // namespace maitre::jobs
