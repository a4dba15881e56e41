#include "controller/jobs/job_runner.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "core/file_util.h"
#include "core/logging.h"
#include "core/status_macros.h"
#include "core/valset.h"

namespace maitre::jobs {
namespace {

namespace fs = std::filesystem;

// Errors that say the job itself is wrong: sending the chunk again cannot
// help, so the job fails at once.
bool IsFatal(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kUnauthenticated:
    case absl::StatusCode::kUnimplemented:
      return true;
    default:
      return false;
  }
}

// Errors that pass with time (no capacity yet, a lost worker, a full
// queue): retried without limit, so an accepted job is never lost to them.
bool IsTransient(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kCancelled:
      return true;
    default:
      return false;
  }
}

}  // namespace

struct JobRunner::Job {
  registry::JobRecord record;
  JobState state = JobState::kQueued;
  std::string reason;
  int attempts = 0;             // failures in a row of the current chunk
  Nanos retry_at = 0;           // no chunk is sent before this
  bool in_flight = false;       // a chunk is out
  bool needs_cleanup = false;   // finished: remove its staging directory
  std::vector<bool> assembled;  // per file: its result file is complete
  int64_t resumed_from = 0;
  int64_t rows_sent = 0;
};

struct JobRunner::Outcome {
  std::string job;
  int file = 0;
  int64_t begin = 0;
  int64_t end = 0;
  absl::StatusOr<controller::InferResponse> result;
};

// Where answers to chunks land. Shared with the callbacks that carry them,
// so an answer arriving after the runner is gone finds nothing to touch.
struct JobRunner::Inbox {
  absl::Mutex mu;
  std::vector<Outcome> outcomes ABSL_GUARDED_BY(mu);
  bool wake ABSL_GUARDED_BY(mu) = false;
  bool stopping ABSL_GUARDED_BY(mu) = false;

  bool Ready() const ABSL_SHARED_LOCKS_REQUIRED(mu) { return wake || stopping; }
};

JobRunner::JobRunner(Options options)
    : options_(std::move(options)), inbox_(std::make_shared<Inbox>()) {}

JobRunner::~JobRunner() { Stop(); }

absl::StatusOr<std::unique_ptr<JobRunner>> JobRunner::Create(Options options) {
  if (options.store == nullptr || options.catalog == nullptr || !options.infer ||
      options.clock == nullptr || options.jobs_dir.empty()) {
    return absl::InvalidArgumentError(
        "the job runner needs a job store, a catalog, infer and a jobs directory");
  }
  MAITRE_RETURN_IF_ERROR(MakeDirectories(options.jobs_dir));
  if (options.default_batch_size < 1 || options.max_batch_size < options.default_batch_size) {
    return absl::InvalidArgumentError("the job runner's batch sizes are inconsistent");
  }
  std::unique_ptr<JobRunner> runner(new JobRunner(std::move(options)));
  absl::MutexLock lock(&runner->mu_);
  for (registry::JobRecord& record : runner->options_.store->ListJobs()) {
    auto job = std::make_unique<Job>();
    auto state = ParseJobState(record.state);
    if (!state.ok()) {
      spdlog::error("job {} has an unreadable state ({}); treating it as failed", record.id,
                    state.status().message());
      job->state = JobState::kFailed;
    } else {
      job->state = *state;
    }
    for (const registry::JobFileRecord& f : record.files) {
      job->resumed_from += f.done_rows;
      std::error_code ec;
      job->assembled.push_back(f.done_rows == f.rows &&
                               fs::exists(ResultPath(record.output, f.path), ec));
    }
    std::error_code ec;
    job->needs_cleanup =
        IsTerminal(job->state) && fs::exists(StagingDir(record.output, record.id), ec);
    if (!IsTerminal(job->state)) {
      spdlog::info("job {} ({}) resumes after {} rows", record.id, record.state, job->resumed_from);
    }
    runner->next_seq_ = std::max(runner->next_seq_, record.seq + 1);
    job->record = std::move(record);
    std::string id = job->record.id;
    runner->jobs_[id] = std::move(job);
  }
  return runner;
}

int64_t JobRunner::UnixMs() const {
  return options_.unix_ms ? options_.unix_ms() : absl::ToUnixMillis(absl::Now());
}

void JobRunner::Wake() {
  absl::MutexLock lock(&inbox_->mu);
  inbox_->wake = true;
}

// ---- the client's side ----

absl::StatusOr<registry::JobRecord> JobRunner::Prepare(const JobSubmission& sub) const {
  std::shared_ptr<const controller::CatalogSnapshot> catalog = options_.catalog->Get();
  auto app = catalog->apps.find(sub.app);
  if (app == catalog->apps.end()) {
    return absl::NotFoundError(
        absl::StrCat("no app named '", sub.app, "'; GET /v2/apps lists them"));
  }
  registry::JobRecord record;
  record.app = sub.app;
  // The models whose inputs the files must fit: the one named, or any of the app's.
  std::vector<const controller::CatalogModel*> models;
  if (!sub.model.empty()) {
    size_t colon = sub.model.find(':');
    record.model = sub.model.substr(0, colon);
    if (colon != std::string::npos) record.variant = sub.model.substr(colon + 1);
    auto model = catalog->models.find(record.model);
    if (model == catalog->models.end() || model->second.app != sub.app) {
      return absl::NotFoundError(absl::StrCat("app '", sub.app, "' has no model named '",
                                              record.model, "'; GET /v2/apps/", sub.app,
                                              " lists its models"));
    }
    if (!record.variant.empty()) {
      std::vector<std::string> names;
      bool found = false;
      for (const controller::CatalogVariant& v : model->second.variants) {
        names.push_back(v.spec.key.variant);
        found |= v.spec.key.variant == record.variant;
      }
      if (!found) {
        return absl::NotFoundError(absl::StrCat("model '", record.model, "' has no variant '",
                                                record.variant, "'; it has ",
                                                absl::StrJoin(names, ", ")));
      }
    }
    models.push_back(&model->second);
  } else {
    for (const std::string& name : app->second.models) {
      if (auto m = catalog->models.find(name); m != catalog->models.end()) {
        models.push_back(&m->second);
      }
    }
    if (models.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("app '", sub.app, "' has no models yet; register one first"));
    }
  }

  record.batch_size = sub.batch_size == 0 ? options_.default_batch_size : sub.batch_size;
  if (record.batch_size < 1 || record.batch_size > options_.max_batch_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "batch_size must be between 1 and ", options_.max_batch_size, ", got ", sub.batch_size));
  }
  const Requirements& r = sub.requirements;
  if ((r.latency_ms && !(*r.latency_ms > 0)) ||
      (r.min_accuracy && !(*r.min_accuracy >= 0 && *r.min_accuracy <= 1)) ||
      (r.max_cost && !(*r.max_cost >= 0))) {
    return absl::InvalidArgumentError(
        "parameters: latency_ms must be positive, min_accuracy a fraction in [0,1] and "
        "max_cost not negative");
  }
  record.requirements = r;

  MAITRE_ASSIGN_OR_RETURN(record.input, ResolveUnder(options_.jobs_dir, sub.input, "input"));
  MAITRE_ASSIGN_OR_RETURN(record.output, ResolveUnder(options_.jobs_dir, sub.output, "output"));
  MAITRE_ASSIGN_OR_RETURN(std::vector<std::string> paths, ListInputFiles(record.input));
  for (const std::string& listed : paths) {
    // A file in an input directory may itself be a link out of it.
    MAITRE_ASSIGN_OR_RETURN(std::string path, ResolveUnder(options_.jobs_dir, listed, "input"));
    MAITRE_ASSIGN_OR_RETURN(InputFile file, ReadInputFile(path));
    absl::Status fits;
    for (const controller::CatalogModel* model : models) {
      fits = CheckInputsFit(file, model->spec);
      if (fits.ok()) break;
    }
    if (!fits.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the input ", path, " does not fit ", sub.model.empty() ? "app '" : "model '",
          sub.model.empty() ? sub.app : record.model, "': ", fits.message()));
    }
    std::string result = ResultPath(record.output, path);
    std::error_code ec;
    if (fs::exists(result, ec)) {
      return absl::AlreadyExistsError(
          absl::StrCat("the result ", result,
                       " would overwrite an existing file; choose another output "
                       "directory (results are named after their inputs) or remove it"));
    }
    record.files.push_back({path, file.rows, file.labels.has_value(), 0, 0});
  }
  MAITRE_RETURN_IF_ERROR(CheckWritableDirectory(record.output));
  return record;
}

absl::StatusOr<JobStatus> JobRunner::Submit(const JobSubmission& submission) {
  MAITRE_ASSIGN_OR_RETURN(registry::JobRecord record, Prepare(submission));
  absl::MutexLock lock(&mu_);
  // Two live jobs must not write the same result file.
  for (const auto& [id, job] : jobs_) {
    if (IsTerminal(job->state) || job->record.output != record.output) continue;
    for (const registry::JobFileRecord& mine : record.files) {
      for (const registry::JobFileRecord& theirs : job->record.files) {
        if (fs::path(mine.path).filename() == fs::path(theirs.path).filename()) {
          return absl::AlreadyExistsError(absl::StrCat("job ", id, " is writing ",
                                                       ResultPath(record.output, mine.path),
                                                       "; choose another output directory"));
        }
      }
    }
  }
  record.seq = next_seq_++;
  record.id = absl::StrFormat("job-%06d", record.seq);
  record.state = std::string(JobStateName(JobState::kQueued));
  record.created_unix_ms = UnixMs();
  MAITRE_RETURN_IF_ERROR(options_.store->CreateJob(record));
  auto job = std::make_unique<Job>();
  job->record = std::move(record);
  job->assembled.assign(job->record.files.size(), false);
  Job& stored = *job;
  jobs_[stored.record.id] = std::move(job);
  spdlog::info("job {} accepted: {} rows in {} file(s) for app {}", stored.record.id,
               StatusOf(stored).total, stored.record.files.size(), stored.record.app);
  Wake();
  return StatusOf(stored);
}

JobStatus JobRunner::StatusOf(const Job& job) const {
  JobStatus s;
  s.record = job.record;
  s.state = job.state;
  s.reason = job.reason;
  s.resumed_from = job.resumed_from;
  s.rows_sent = job.rows_sent;
  int64_t correct = 0;
  for (const registry::JobFileRecord& f : job.record.files) {
    s.done += f.done_rows;
    s.total += f.rows;
    s.files_done += f.done_rows == f.rows ? 1 : 0;
    if (f.labelled) {
      s.labelled_done += f.done_rows;
      correct += f.correct;
    }
  }
  if (s.labelled_done > 0) s.accuracy = static_cast<double>(correct) / s.labelled_done;
  return s;
}

absl::StatusOr<JobStatus> JobRunner::Get(absl::string_view id) const {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(std::string(id));
  if (it == jobs_.end()) {
    return absl::NotFoundError(absl::StrCat("no job with id '", id, "'; GET /v2/jobs lists them"));
  }
  return StatusOf(*it->second);
}

std::vector<JobStatus> JobRunner::List() const {
  absl::MutexLock lock(&mu_);
  std::vector<JobStatus> out;
  for (const auto& [id, job] : jobs_) out.push_back(StatusOf(*job));
  std::sort(out.begin(), out.end(),
            [](const JobStatus& a, const JobStatus& b) { return a.record.seq < b.record.seq; });
  return out;
}

absl::StatusOr<JobStatus> JobRunner::Cancel(absl::string_view id) {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(std::string(id));
  if (it == jobs_.end()) {
    return absl::NotFoundError(absl::StrCat("no job with id '", id, "'; GET /v2/jobs lists them"));
  }
  Job& job = *it->second;
  if (IsTerminal(job.state)) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", id, " has already ", JobStateName(job.state)));
  }
  Transition(job, JobState::kCancelled);
  job.needs_cleanup = true;
  Wake();
  return StatusOf(job);
}

void JobRunner::Transition(Job& job, JobState to, std::string error) {
  if (!CanTransition(job.state, to)) {
    spdlog::error("job {}: refusing the transition {} -> {}", job.record.id,
                  JobStateName(job.state), JobStateName(to));
    return;
  }
  spdlog::info("job {}: {} -> {}{}{}", job.record.id, JobStateName(job.state), JobStateName(to),
               job.reason.empty() && error.empty() ? "" : ": ", error.empty() ? job.reason : error);
  job.state = to;
  job.record.state = std::string(JobStateName(to));
  if (to == JobState::kRunning && job.record.started_unix_ms == 0) {
    job.record.started_unix_ms = UnixMs();
  }
  if (IsTerminal(to)) {
    job.record.finished_unix_ms = UnixMs();
    job.reason.clear();
  }
  if (!error.empty()) job.record.error = std::move(error);
  // A failed write leaves the old state on disk; after a restart the job
  // is taken up again from there, which loses nothing.
  if (absl::Status s = options_.store->UpdateJobState(job.record); !s.ok()) {
    spdlog::error("job {}: recording state {}: {}", job.record.id, job.record.state, s.message());
  }
}

JobRunner::Job* JobRunner::HeadLocked() {
  Job* head = nullptr;
  for (auto& [id, job] : jobs_) {
    if (IsTerminal(job->state)) continue;
    if (head == nullptr || job->record.seq < head->record.seq) head = job.get();
  }
  return head;
}

// ---- the loop ----

void JobRunner::Start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] { Loop(); });
}

void JobRunner::Stop() {
  {
    absl::MutexLock lock(&inbox_->mu);
    inbox_->stopping = true;
    inbox_->outcomes.clear();
  }
  if (thread_.joinable()) thread_.join();
}

void JobRunner::Loop() {
  while (true) {
    {
      absl::MutexLock lock(&inbox_->mu);
      if (inbox_->stopping) return;
    }
    Step();
    absl::MutexLock lock(&inbox_->mu);
    options_.clock->AwaitWithDeadline(&inbox_->mu, absl::Condition(inbox_.get(), &Inbox::Ready),
                                      options_.clock->Now() + options_.tick);
  }
}

void JobRunner::Step() {
  std::vector<Outcome> outcomes;
  {
    absl::MutexLock lock(&inbox_->mu);
    outcomes.swap(inbox_->outcomes);
    inbox_->wake = false;
  }
  for (Outcome& outcome : outcomes) HandleOutcome(std::move(outcome));
  std::vector<Job*> finished;
  Job* head = nullptr;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, job] : jobs_) {
      if (job->needs_cleanup && !job->in_flight) finished.push_back(job.get());
    }
    head = HeadLocked();
  }
  for (Job* job : finished) CleanUp(*job);
  if (head == nullptr) return;
  Throttle(*head);
  SendNext(*head);
}

OwnLoad JobRunner::OwnLoadNow() {
  const Nanos now = options_.clock->Now();
  const Nanos bucket = std::max<Nanos>(options_.own_load_bucket, 1);
  const Nanos window = std::max(options_.own_load_window, bucket);
  own_chunks_.erase(std::remove_if(own_chunks_.begin(), own_chunks_.end(),
                                   [&](const OwnChunk& c) { return c.at <= now - window; }),
                    own_chunks_.end());
  // Per bucket (0 = the latest), then the peak over buckets.
  const size_t buckets = static_cast<size_t>((window + bucket - 1) / bucket);
  std::map<std::string, std::vector<double>> busy;
  std::map<std::pair<std::string, VariantKey>, std::vector<double>> queries;
  for (const OwnChunk& c : own_chunks_) {
    size_t b = std::min(buckets - 1, static_cast<size_t>((now - c.at) / bucket));
    auto& worker = busy[c.worker];
    auto& instance = queries[{c.worker, c.key}];
    worker.resize(buckets, 0);
    instance.resize(buckets, 0);
    worker[b] += static_cast<double>(c.compute) / static_cast<double>(bucket);
    instance[b] += 1 / ToSeconds(bucket);
  }
  OwnLoad own;
  for (const auto& [worker, per_bucket] : busy) {
    own.busy_by_worker[worker] = *std::max_element(per_bucket.begin(), per_bucket.end());
  }
  for (const auto& [instance, per_bucket] : queries) {
    own.qps_by_instance[instance] = *std::max_element(per_bucket.begin(), per_bucket.end());
  }
  return own;
}

void JobRunner::Throttle(Job& job) {
  ThrottleSignals signals;
  if (options_.cluster) {
    signals = MeasureThrottleSignals(options_.cluster(), OwnLoadNow(), options_.throttle);
  }
  const bool was_paused = throttle_.paused;
  throttle_ = NextThrottleState(throttle_, signals, options_.clock->Now(), options_.throttle);
  if (throttle_.paused && !was_paused) {
    spdlog::info("jobs pause: {}; cluster utilisation {:.2f} (the jobs' {:.2f}), {:.0f} online qps",
                 throttle_.reason, signals.utilisation, signals.own_utilisation,
                 signals.online_qps);
  }
  absl::MutexLock lock(&mu_);
  if (IsTerminal(job.state)) return;
  if (throttle_.paused) {
    job.reason = throttle_.reason;
    if (job.state != JobState::kPaused) Transition(job, JobState::kPaused);
  } else if (job.state != JobState::kRunning) {
    job.reason.clear();
    Transition(job, JobState::kRunning);
  }
}

void JobRunner::SendNext(Job& job) {
  const Nanos now = options_.clock->Now();
  {
    absl::MutexLock lock(&mu_);
    if (job.state != JobState::kRunning || job.in_flight || now < job.retry_at) return;
  }
  if (!AssembleFinished(job)) return;
  int file = -1;
  int64_t begin = 0, end = 0;
  registry::JobRecord record;
  {
    absl::MutexLock lock(&mu_);
    if (job.state != JobState::kRunning) return;
    for (size_t i = 0; i < job.record.files.size() && file < 0; ++i) {
      const registry::JobFileRecord& f = job.record.files[i];
      if (f.done_rows < f.rows) {
        file = static_cast<int>(i);
        begin = f.done_rows;
        end = std::min<int64_t>(f.rows, begin + job.record.batch_size);
      }
    }
    if (file < 0) {
      Transition(job, JobState::kSucceeded);
      job.needs_cleanup = true;
      return;
    }
    record = job.record;
  }
  const registry::JobFileRecord& f = record.files[file];
  if (cached_path_ != f.path) {
    cached_file_.reset();
    auto read = ReadInputFile(f.path);
    absl::Status status = read.status();
    if (read.ok() && read->rows != f.rows) {
      status = absl::InvalidArgumentError(absl::StrCat("the input ", f.path,
                                                       " changed since the job was submitted (",
                                                       f.rows, " rows, now ", read->rows, ")"));
    }
    if (!status.ok()) {
      absl::MutexLock lock(&mu_);
      Transition(job, JobState::kFailed, std::string(status.message()));
      job.needs_cleanup = true;
      return;
    }
    cached_path_ = f.path;
    cached_file_ = std::make_shared<const InputFile>(*std::move(read));
  }
  controller::InferRequest request;
  request.id = absl::StrCat(record.id, "/", file, "/", begin);
  request.requirements = record.requirements;
  request.offline = true;
  for (const Tensor& t : cached_file_->inputs) {
    auto rows = SliceRows(t, begin, end);
    if (!rows.ok()) {
      absl::MutexLock lock(&mu_);
      Transition(job, JobState::kFailed, std::string(rows.status().message()));
      job.needs_cleanup = true;
      return;
    }
    request.inputs.push_back(*std::move(rows));
  }
  {
    absl::MutexLock lock(&mu_);
    job.in_flight = true;
    if (job.attempts == 0) job.rows_sent += end - begin;  // a retry is not new work
  }
  std::weak_ptr<Inbox> inbox = inbox_;
  options_.infer(controller::InferTarget{record.app, record.model, record.variant},
                 std::move(request), now,
                 [inbox, id = record.id, file, begin,
                  end](absl::StatusOr<controller::InferResponse> result) mutable {
                   std::shared_ptr<Inbox> in = inbox.lock();
                   if (in == nullptr) return;
                   absl::MutexLock lock(&in->mu);
                   if (in->stopping) return;
                   in->outcomes.push_back({std::move(id), file, begin, end, std::move(result)});
                   in->wake = true;
                 });
}

void JobRunner::HandleOutcome(Outcome outcome) {
  Job* found = nullptr;
  registry::JobFileRecord file;
  std::string output;
  {
    absl::MutexLock lock(&mu_);
    auto it = jobs_.find(outcome.job);
    if (it == jobs_.end()) return;
    found = it->second.get();
    found->in_flight = false;
    if (IsTerminal(found->state) || outcome.file >= static_cast<int>(found->record.files.size()) ||
        found->record.files[outcome.file].done_rows != outcome.begin) {
      return;  // cancelled meanwhile, or an answer that is no longer wanted
    }
    file = found->record.files[outcome.file];
    output = found->record.output;
  }
  Job& job = *found;
  const std::string where =
      absl::StrFormat("rows [%d, %d) of %s", outcome.begin, outcome.end, file.path);
  if (!outcome.result.ok()) {
    const absl::Status& error = outcome.result.status();
    absl::Status described(error.code(), absl::StrCat(where, ": ", error.message()));
    if (IsFatal(error.code())) {
      absl::MutexLock lock(&mu_);
      Transition(job, JobState::kFailed, std::string(described.message()));
      job.needs_cleanup = true;
      return;
    }
    return Retry(job, described, IsTransient(error.code()));
  }
  controller::InferResponse& response = *outcome.result;
  own_chunks_.push_back({options_.clock->Now(), response.timings.worker,
                         VariantKey{response.model_name, response.model_version},
                         response.timings.compute_us * kMicrosecond});

  std::optional<Tensor> labels;
  if (file.labelled) {
    if (cached_path_ != file.path) {
      auto read = ReadInputFile(file.path);
      if (!read.ok()) return Retry(job, read.status(), false);
      cached_path_ = file.path;
      cached_file_ = std::make_shared<const InputFile>(*std::move(read));
    }
    auto slice = SliceRows(*cached_file_->labels, outcome.begin, outcome.end);
    if (!slice.ok()) return Retry(job, slice.status(), false);
    labels = *std::move(slice);
  }
  auto chunk = SummariseChunk(std::move(response.outputs), outcome.end - outcome.begin,
                              labels ? &*labels : nullptr);
  if (!chunk.ok()) {
    return Retry(job, absl::InternalError(absl::StrCat(where, ": ", chunk.status().message())),
                 false);
  }
  // The chunk's results are durable before its progress is recorded, so a
  // crash in between only sends the chunk again.
  std::string path = ChunkPath(StagingDir(output, job.record.id), outcome.file, outcome.begin);
  if (absl::Status s = WriteChunk(path, chunk->arrays); !s.ok()) return Retry(job, s, false);
  const int64_t correct = file.correct + chunk->correct;
  if (absl::Status s =
          options_.store->UpdateJobProgress(job.record.id, outcome.file, outcome.end, correct);
      !s.ok()) {
    return Retry(job, s, false);
  }
  bool all_done = true;
  {
    absl::MutexLock lock(&mu_);
    registry::JobFileRecord& f = job.record.files[outcome.file];
    f.done_rows = outcome.end;
    f.correct = correct;
    job.attempts = 0;
    job.retry_at = 0;
    if (job.state == JobState::kRunning) job.reason.clear();
    for (const registry::JobFileRecord& g : job.record.files) all_done &= g.done_rows == g.rows;
  }
  if (outcome.end == file.rows && !AssembleFinished(job)) return;
  if (all_done) {
    absl::MutexLock lock(&mu_);
    if (!IsTerminal(job.state)) {
      Transition(job, JobState::kSucceeded);
      job.needs_cleanup = true;
    }
  }
}

void JobRunner::Retry(Job& job, const absl::Status& error, bool transient) {
  absl::MutexLock lock(&mu_);
  if (IsTerminal(job.state)) return;
  ++job.attempts;
  if (!transient && job.attempts >= options_.max_attempts) {
    Transition(job, JobState::kFailed,
               absl::StrCat(error.message(), " (", job.attempts, " attempts)"));
    job.needs_cleanup = true;
    return;
  }
  Nanos backoff = options_.retry_backoff;
  for (int i = 1; i < job.attempts && backoff < options_.max_retry_backoff; ++i) backoff *= 2;
  backoff = std::min(backoff, options_.max_retry_backoff);
  job.retry_at = options_.clock->Now() + backoff;
  job.reason = absl::StrCat("retrying: ", error.message());
  spdlog::warn("job {}: {}; retrying in {} ms", job.record.id, error.message(),
               backoff / kMillisecond);
}

bool JobRunner::AssembleFinished(Job& job) {
  std::vector<int> ready;
  registry::JobRecord record;
  {
    absl::MutexLock lock(&mu_);
    for (size_t i = 0; i < job.record.files.size(); ++i) {
      const registry::JobFileRecord& f = job.record.files[i];
      if (f.done_rows == f.rows && !job.assembled[i]) ready.push_back(static_cast<int>(i));
    }
    if (ready.empty()) return true;
    record = job.record;
  }
  const std::string staging = StagingDir(record.output, record.id);
  for (int i : ready) {
    const registry::JobFileRecord& f = record.files[i];
    std::vector<std::string> chunks;
    for (int64_t begin = 0; begin < f.rows; begin += record.batch_size) {
      chunks.push_back(ChunkPath(staging, i, begin));
    }
    absl::Status s = AssembleResult(chunks, ResultPath(record.output, f.path));
    absl::MutexLock lock(&mu_);
    if (!s.ok()) {
      if (!IsTerminal(job.state)) {
        Transition(job, JobState::kFailed,
                   absl::StrCat("writing the result of ", f.path, ": ", s.message()));
      }
      job.needs_cleanup = true;
      return false;
    }
    job.assembled[i] = true;
  }
  return true;
}

void JobRunner::CleanUp(Job& job) {
  std::string staging;
  {
    absl::MutexLock lock(&mu_);
    staging = StagingDir(job.record.output, job.record.id);
    job.needs_cleanup = false;
  }
  std::error_code ec;
  fs::remove_all(staging, ec);
  if (ec) spdlog::warn("job {}: cannot remove {}: {}", job.record.id, staging, ec.message());
}

}  // namespace maitre::jobs
