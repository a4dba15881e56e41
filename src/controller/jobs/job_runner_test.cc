// The job runner against a fake serving path (a recorded infer callback the
// test answers by hand) and a ManualClock; the registry and the files are
// real, in a scratch directory.
#include "controller/jobs/job_runner.h"

#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "controller/registry/registry_test_util.h"
#include "core/file_util.h"
#include "core/npz.h"
#include "runtime/testing/zoo.h"

namespace maitre::jobs {
namespace {

namespace fs = std::filesystem;
using runtime::testing::ScopedTempDir;
using ::testing::HasSubstr;

constexpr int64_t kWallMs = 1700000000000;

struct Call {
  controller::InferTarget target;
  controller::InferRequest request;
  controller::InferDone done;
};

class JobRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto registry = registry::Registry::Open({dir_.path() + "/registry.db"});
    ASSERT_TRUE(registry.ok()) << registry.status();
    registry_ = *std::move(registry);
    AddModel("fashion", "mlp", 2);
    AddModel("audio", "wav", 5);
    ASSERT_TRUE(catalog_.Reload(*registry_).ok());
    in_ = dir_.path() + "/in";
    out_ = dir_.path() + "/out";
    ASSERT_TRUE(MakeDirectories(in_).ok());
  }

  void AddModel(const std::string& app, const std::string& name, int64_t width) {
    registry::ModelRecord model;
    model.app = app;
    model.name = name;
    model.spec.inputs.push_back({"input", DataType::kFp32, {-1, width}});
    model.spec.outputs.push_back({"logits", DataType::kFp32, {-1, 3}});
    model.source_blob = registry::test_util::FakeBlob(name);
    ASSERT_TRUE(registry_
                    ->RegisterModel(model, {registry::test_util::MakeVariant(name, "torch"),
                                            registry::test_util::MakeVariant(name, "opencv")})
                    .ok());
  }

  std::unique_ptr<JobRunner> NewRunner() {
    JobRunner::Options o;
    o.store = &registry_->jobs();
    o.catalog = &catalog_;
    o.jobs_dir = dir_.path();
    o.infer = [this](controller::InferTarget target, controller::InferRequest request, Nanos,
                     controller::InferDone done) {
      calls_.push_back({std::move(target), std::move(request), std::move(done)});
    };
    o.cluster = [this] { return workers_; };
    o.clock = &clock_;
    o.unix_ms = [] { return kWallMs; };
    auto runner = JobRunner::Create(std::move(o));
    EXPECT_TRUE(runner.ok()) << runner.status();
    return runner.ok() ? *std::move(runner) : nullptr;
  }

  // `rows` rows [r, 0]; labels r % 3, except every fifth row (4, 9, ...),
  // which the fake model (class = r % 3) therefore gets wrong.
  std::string WriteInput(const std::string& name, int64_t rows, bool labelled = true) {
    Tensor inputs{"inputs", DataType::kFp32, {rows, 2}, {}};
    Tensor labels{"labels", DataType::kInt64, {rows}, {}};
    inputs.data.resize(rows * 2 * sizeof(float));
    labels.data.resize(rows * sizeof(int64_t));
    for (int64_t r = 0; r < rows; ++r) {
      inputs.MutableAs<float>()[2 * r] = static_cast<float>(r);
      inputs.MutableAs<float>()[2 * r + 1] = 0;
      labels.MutableAs<int64_t>()[r] = r % 5 == 4 ? (r + 1) % 3 : r % 3;
    }
    std::vector<Tensor> arrays{inputs};
    if (labelled) arrays.push_back(labels);
    std::string path = in_ + "/" + name;
    EXPECT_TRUE(WriteFileAtomically(path, WriteNpz(arrays)).ok());
    return path;
  }

  JobSubmission Submission(const std::string& input, int32_t batch_size = 4) {
    JobSubmission s;
    s.app = "fashion";
    s.model = "mlp";
    s.input = input;
    s.output = out_;
    s.batch_size = batch_size;
    return s;
  }

  std::string SubmitOk(JobRunner& runner, const JobSubmission& s) {
    auto status = runner.Submit(s);
    EXPECT_TRUE(status.ok()) << status.status();
    return status.ok() ? status->record.id : "";
  }

  // The fake model: logits one-hot at int(row[0]) % 3.
  static absl::StatusOr<controller::InferResponse> Model(const controller::InferRequest& request) {
    const Tensor& in = request.inputs.at(0);
    int64_t rows = in.shape[0];
    Tensor logits{"logits", DataType::kFp32, {rows, 3}, {}};
    logits.data.assign(rows * 3 * sizeof(float), '\0');
    for (int64_t r = 0; r < rows; ++r) {
      int cls = static_cast<int>(in.As<float>()[r * in.shape[1]]) % 3;
      logits.MutableAs<float>()[r * 3 + cls] = 1;
    }
    controller::InferResponse response;
    response.model_name = "mlp";
    response.model_version = "torch";
    response.outputs.push_back(std::move(logits));
    response.timings.worker = "w1";
    response.timings.compute_us = 1000;
    return response;
  }

  void Answer(size_t i, absl::StatusOr<controller::InferResponse> result) {
    ASSERT_LT(i, calls_.size());
    answered_.resize(calls_.size(), false);
    ASSERT_FALSE(answered_[i]) << "call " << i << " was answered already";
    answered_[i] = true;
    std::move(calls_[i].done)(std::move(result));
  }
  void AnswerOk(size_t i) { Answer(i, Model(calls_.at(i).request)); }

  // Steps, answering every query correctly, until the job ends.
  void RunToEnd(JobRunner& runner, const std::string& id) {
    for (int round = 0; round < 1000; ++round) {
      runner.Step();
      if (IsTerminal(runner.Get(id)->state)) return;
      answered_.resize(calls_.size(), false);
      for (size_t i = 0; i < calls_.size(); ++i) {
        if (!answered_[i]) AnswerOk(i);
      }
      clock_.Advance(10 * kMillisecond);
    }
    ADD_FAILURE() << "job " << id << " did not finish";
  }

  static int64_t RowOf(const Call& call) {
    return static_cast<int64_t>(call.request.inputs.at(0).As<float>()[0]);
  }

  ScopedTempDir dir_;
  std::unique_ptr<registry::Registry> registry_;
  controller::Catalog catalog_;
  ManualClock clock_{kSecond};
  std::vector<controller::WorkerView> workers_;
  std::vector<Call> calls_;
  std::vector<bool> answered_;
  std::string in_, out_;
};

controller::WorkerView Worker(double utilisation, double arrival_qps,
                              policy::InstanceState state = policy::InstanceState::kActive) {
  controller::WorkerView w;
  w.id = "w1";
  w.cpu_utilisation = utilisation;
  controller::InstanceView inst;
  inst.key = {"mlp", "torch"};
  inst.phase = controller::InstancePhase::kReady;
  inst.state = state;
  inst.stats.arrival_qps = arrival_qps;
  w.instances.push_back(inst);
  return w;
}

TEST_F(JobRunnerTest, RunsAJobInChunksThroughTheServingPathAndWritesResults) {
  auto runner = NewRunner();
  std::string input = WriteInput("a.npz", 10);
  std::string id = SubmitOk(*runner, Submission(input));
  EXPECT_EQ(id, "job-000001");
  EXPECT_EQ(runner->Get(id)->state, JobState::kQueued);
  EXPECT_EQ(runner->Get(id)->total, 10);

  runner->Step();
  ASSERT_EQ(calls_.size(), 1u);
  EXPECT_EQ(runner->Get(id)->state, JobState::kRunning);
  // One query per chunk, shaped [rows, ...], for the named model, with no
  // latency objective: best-effort.
  EXPECT_EQ(calls_[0].target.app, "fashion");
  EXPECT_EQ(calls_[0].target.model, "mlp");
  EXPECT_EQ(calls_[0].target.variant, "");
  EXPECT_EQ(calls_[0].request.inputs[0].shape, (std::vector<int64_t>{4, 2}));
  EXPECT_FALSE(calls_[0].request.requirements.latency_ms.has_value());
  // Nothing more is sent while a chunk is out.
  runner->Step();
  EXPECT_EQ(calls_.size(), 1u);

  AnswerOk(0);
  runner->Step();
  ASSERT_EQ(calls_.size(), 2u);
  EXPECT_EQ(RowOf(calls_[1]), 4);
  EXPECT_EQ(runner->Get(id)->done, 4);
  EXPECT_EQ(registry_->jobs().GetJob(id)->files[0].done_rows, 4);  // durable

  AnswerOk(1);
  runner->Step();
  ASSERT_EQ(calls_.size(), 3u);
  EXPECT_EQ(calls_[2].request.inputs[0].shape, (std::vector<int64_t>{2, 2}));  // the tail
  AnswerOk(2);
  runner->Step();

  auto status = runner->Get(id);
  EXPECT_EQ(status->state, JobState::kSucceeded);
  EXPECT_EQ(status->done, 10);
  EXPECT_DOUBLE_EQ(status->progress(), 1.0);
  ASSERT_TRUE(status->accuracy.has_value());
  EXPECT_DOUBLE_EQ(*status->accuracy, 0.8);  // rows 4 and 9 are mislabelled
  EXPECT_EQ(status->record.started_unix_ms, kWallMs);
  EXPECT_EQ(status->record.finished_unix_ms, kWallMs);
  EXPECT_EQ(registry_->jobs().GetJob(id)->state, "succeeded");

  auto result = ParseNpz(*ReadFileToString(out_ + "/a.npz"));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->at("logits").shape, (std::vector<int64_t>{10, 3}));
  const Tensor& predictions = result->at("predictions");
  ASSERT_EQ(predictions.shape, (std::vector<int64_t>{10}));
  for (int64_t r = 0; r < 10; ++r) EXPECT_EQ(predictions.As<int64_t>()[r], r % 3);
  EXPECT_EQ(result->at("labels").shape, (std::vector<int64_t>{10}));
  EXPECT_FALSE(fs::exists(StagingDir(out_, id)));  // staging is cleaned up
  runner->Step();
  EXPECT_EQ(calls_.size(), 3u);
}

TEST_F(JobRunnerTest, ADirectoryOfFilesGivesOneResultEach) {
  auto runner = NewRunner();
  WriteInput("b.npz", 3, /*labelled=*/false);
  WriteInput("a.npz", 5);
  JobSubmission s = Submission(in_);
  s.model = "mlp:opencv";
  s.requirements.latency_ms = 250;
  std::string id = SubmitOk(*runner, s);
  RunToEnd(*runner, id);
  auto status = runner->Get(id);
  EXPECT_EQ(status->state, JobState::kSucceeded);
  EXPECT_EQ(status->record.files[0].path, in_ + "/a.npz");
  EXPECT_EQ(status->files_done, 2);
  EXPECT_EQ(status->labelled_done, 5);  // only a.npz has labels
  EXPECT_DOUBLE_EQ(*status->accuracy, 0.8);
  EXPECT_EQ(calls_[0].target.variant, "opencv");
  EXPECT_EQ(calls_[0].request.requirements.latency_ms, 250);
  auto b = ParseNpz(*ReadFileToString(out_ + "/b.npz"));
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->at("predictions").shape, (std::vector<int64_t>{3}));
  EXPECT_EQ(b->count("labels"), 0u);
}

TEST_F(JobRunnerTest, PausesWhileOnlineLoadIsHighAndResumesAfterTheHold) {
  auto runner = NewRunner();
  std::string id = SubmitOk(*runner, Submission(WriteInput("a.npz", 10)));
  workers_ = {Worker(0.9, 100)};
  runner->Step();
  EXPECT_EQ(runner->Get(id)->state, JobState::kPaused);
  EXPECT_THAT(runner->Get(id)->reason, HasSubstr("90%"));
  EXPECT_TRUE(calls_.empty());
  EXPECT_EQ(registry_->jobs().GetJob(id)->state, "paused");

  workers_ = {Worker(0.1, 100)};  // calm: the hold starts
  runner->Step();
  clock_.Advance(kSecond);
  runner->Step();
  EXPECT_EQ(runner->Get(id)->state, JobState::kPaused);
  EXPECT_TRUE(calls_.empty());
  clock_.Advance(kSecond);
  runner->Step();
  EXPECT_EQ(runner->Get(id)->state, JobState::kRunning);
  ASSERT_EQ(calls_.size(), 1u);

  // Load returns while a chunk is out: the job pauses, the chunk still counts.
  workers_ = {Worker(0.2, 80, policy::InstanceState::kOverloaded)};
  runner->Step();
  EXPECT_EQ(runner->Get(id)->state, JobState::kPaused);
  EXPECT_THAT(runner->Get(id)->reason, HasSubstr("slower than profiled"));
  AnswerOk(0);
  runner->Step();
  EXPECT_EQ(runner->Get(id)->done, 4);
  EXPECT_EQ(calls_.size(), 1u);
}

TEST_F(JobRunnerTest, AJobIsNotPausedByItsOwnLoad) {
  auto runner = NewRunner();
  std::string id = SubmitOk(*runner, Submission(WriteInput("a.npz", 40)));
  for (int i = 0; i < 8; ++i) {
    // The worker is busy, but all its arrivals are the job's own chunks.
    workers_ = {Worker(0.95, static_cast<double>(i))};
    runner->Step();
    ASSERT_EQ(runner->Get(id)->state, JobState::kRunning) << runner->Get(id)->reason;
    ASSERT_EQ(calls_.size(), static_cast<size_t>(i + 1));
    AnswerOk(i);
    clock_.Advance(100 * kMillisecond);
  }
}

// A worker report covers its last interval only. After a slow start the
// job's recent rate is well above its average over the window; the report
// shows that recent rate, which must still be recognised as the job's own.
TEST_F(JobRunnerTest, AJobRampingUpIsNotMistakenForOnlineTraffic) {
  auto runner = NewRunner();
  std::string id = SubmitOk(*runner, Submission(WriteInput("a.npz", 80, false), 2));
  runner->Step();
  AnswerOk(0);
  clock_.Advance(1500 * kMillisecond);
  for (int i = 1; i <= 10; ++i) {  // 10 chunks in the last half second: 20 qps
    runner->Step();
    ASSERT_EQ(calls_.size(), static_cast<size_t>(i + 1));
    AnswerOk(i);
    clock_.Advance(45 * kMillisecond);
  }
  workers_ = {Worker(0.95, 20)};  // all of it the job's
  runner->Step();
  EXPECT_EQ(runner->Get(id)->state, JobState::kRunning) << runner->Get(id)->reason;
  workers_ = {Worker(0.95, 60)};  // 40 qps more than the job sends: online traffic
  runner->Step();
  EXPECT_EQ(runner->Get(id)->state, JobState::kPaused);
}

TEST_F(JobRunnerTest, TransientErrorsAreRetriedWithBackoff) {
  auto runner = NewRunner();
  std::string id = SubmitOk(*runner, Submission(WriteInput("a.npz", 10)));
  runner->Step();
  for (int attempt = 0; attempt < 8; ++attempt) {  // past max_attempts: no limit
    Answer(calls_.size() - 1, absl::UnavailableError("no worker can take the model yet"));
    runner->Step();
    EXPECT_EQ(runner->Get(id)->state, JobState::kRunning);
    EXPECT_THAT(runner->Get(id)->reason, HasSubstr("no worker can take"));
    size_t sent = calls_.size();
    clock_.Advance(200 * kMillisecond);  // shorter than the first backoff (500 ms)
    runner->Step();
    EXPECT_EQ(calls_.size(), sent);
    clock_.Advance(10 * kSecond);  // longer than the longest
    runner->Step();
    ASSERT_EQ(calls_.size(), sent + 1);
    EXPECT_EQ(RowOf(calls_.back()), 0);  // the same chunk again
  }
  AnswerOk(calls_.size() - 1);
  runner->Step();
  EXPECT_EQ(runner->Get(id)->done, 4);
  EXPECT_EQ(runner->Get(id)->reason, "");
  EXPECT_EQ(runner->Get(id)->rows_sent, 8);  // the retried chunk once, and the next
}

TEST_F(JobRunnerTest, TheJobsOwnFaultFailsItAtOnce) {
  auto runner = NewRunner();
  std::string id = SubmitOk(*runner, Submission(WriteInput("a.npz", 10)));
  runner->Step();
  AnswerOk(0);
  runner->Step();
  Answer(1, absl::FailedPreconditionError("no variant meets latency_ms 1"));
  runner->Step();
  auto status = runner->Get(id);
  EXPECT_EQ(status->state, JobState::kFailed);
  EXPECT_THAT(status->record.error, HasSubstr("rows [4, 8)"));
  EXPECT_THAT(status->record.error, HasSubstr("no variant meets"));
  EXPECT_EQ(registry_->jobs().GetJob(id)->state, "failed");
  EXPECT_EQ(status->done, 4);
}

TEST_F(JobRunnerTest, OtherErrorsFailAfterMaxAttempts) {
  auto runner = NewRunner();
  std::string id = SubmitOk(*runner, Submission(WriteInput("a.npz", 10)));
  for (int attempt = 1; attempt <= 5; ++attempt) {
    runner->Step();
    ASSERT_EQ(calls_.size(), static_cast<size_t>(attempt));
    Answer(attempt - 1, absl::InternalError("the executor crashed"));
    runner->Step();
    clock_.Advance(20 * kSecond);
  }
  auto status = runner->Get(id);
  EXPECT_EQ(status->state, JobState::kFailed);
  EXPECT_THAT(status->record.error, HasSubstr("5 attempts"));
}

TEST_F(JobRunnerTest, ARestartedRunnerResumesAfterTheLastDurableChunk) {
  std::string id;
  {
    auto runner = NewRunner();
    id = SubmitOk(*runner, Submission(WriteInput("a.npz", 10)));
    runner->Step();
    AnswerOk(0);
    runner->Step();  // rows [0, 4) durable; rows [4, 8) out when it stops
    ASSERT_EQ(calls_.size(), 2u);
  }
  // The answer to the chunk in flight arrives after the runner is gone.
  AnswerOk(1);

  auto runner = NewRunner();
  auto status = runner->Get(id);
  EXPECT_EQ(status->state, JobState::kRunning);
  EXPECT_EQ(status->done, 4);
  EXPECT_EQ(status->resumed_from, 4);
  runner->Step();
  ASSERT_EQ(calls_.size(), 3u);
  EXPECT_EQ(RowOf(calls_[2]), 4);  // finished chunks are not sent again
  RunToEnd(*runner, id);
  status = runner->Get(id);
  EXPECT_EQ(status->state, JobState::kSucceeded);
  EXPECT_EQ(status->rows_sent, status->total - status->resumed_from);
  EXPECT_DOUBLE_EQ(*status->accuracy, 0.8);
  auto result = ParseNpz(*ReadFileToString(out_ + "/a.npz"));
  ASSERT_TRUE(result.ok());
  const Tensor& predictions = result->at("predictions");
  ASSERT_EQ(predictions.shape, (std::vector<int64_t>{10}));
  for (int64_t r = 0; r < 10; ++r) EXPECT_EQ(predictions.As<int64_t>()[r], r % 3);
  // New ids continue after the stored ones.
  EXPECT_EQ(SubmitOk(*runner, Submission(WriteInput("b.npz", 2))), "job-000002");
}

TEST_F(JobRunnerTest, CancelStopsAJobAndDropsItsLateAnswer) {
  auto runner = NewRunner();
  WriteInput("a.npz", 4);
  WriteInput("b.npz", 10);
  std::string id = SubmitOk(*runner, Submission(in_));
  runner->Step();
  AnswerOk(0);
  runner->Step();  // a.npz is complete; b.npz's first chunk is out
  ASSERT_EQ(calls_.size(), 2u);
  EXPECT_TRUE(fs::exists(out_ + "/a.npz"));
  auto cancelled = runner->Cancel(id);
  ASSERT_TRUE(cancelled.ok());
  EXPECT_EQ(cancelled->state, JobState::kCancelled);
  EXPECT_EQ(registry_->jobs().GetJob(id)->state, "cancelled");
  AnswerOk(1);
  runner->Step();
  EXPECT_EQ(runner->Get(id)->done, 4);
  EXPECT_EQ(calls_.size(), 2u);
  EXPECT_TRUE(fs::exists(out_ + "/a.npz"));  // a finished result stays
  EXPECT_FALSE(fs::exists(out_ + "/b.npz"));
  EXPECT_FALSE(fs::exists(StagingDir(out_, id)));
  EXPECT_EQ(runner->Cancel(id).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(runner->Cancel("job-9").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(JobRunnerTest, JobsRunOneAtATimeInSubmissionOrder) {
  auto runner = NewRunner();
  std::string first = SubmitOk(*runner, Submission(WriteInput("a.npz", 6)));
  JobSubmission s = Submission(WriteInput("b.npz", 6));
  s.output = dir_.path() + "/out2";
  std::string second = SubmitOk(*runner, s);
  runner->Step();
  EXPECT_EQ(runner->Get(first)->state, JobState::kRunning);
  EXPECT_EQ(runner->Get(second)->state, JobState::kQueued);
  RunToEnd(*runner, first);
  RunToEnd(*runner, second);
  EXPECT_EQ(runner->Get(second)->state, JobState::kSucceeded);
  std::vector<std::string> ids;
  for (const JobStatus& j : runner->List()) ids.push_back(j.record.id);
  EXPECT_EQ(ids, (std::vector<std::string>{first, second}));
}

TEST_F(JobRunnerTest, AnInputChangedUnderARunningJobFailsIt) {
  auto runner = NewRunner();
  std::string id = SubmitOk(*runner, Submission(WriteInput("a.npz", 10)));
  WriteInput("a.npz", 7);
  runner->Step();
  EXPECT_EQ(runner->Get(id)->state, JobState::kFailed);
  EXPECT_THAT(runner->Get(id)->record.error, HasSubstr("changed since the job was submitted"));
}

TEST_F(JobRunnerTest, SubmissionsAreCheckedWithClearErrors) {
  auto runner = NewRunner();
  std::string input = WriteInput("a.npz", 3);
  auto code = [&](JobSubmission s) { return runner->Submit(s).status().code(); };
  auto message = [&](JobSubmission s) { return std::string(runner->Submit(s).status().message()); };

  JobSubmission s = Submission(input);
  s.app = "nope";
  EXPECT_EQ(code(s), absl::StatusCode::kNotFound);
  s = Submission(input);
  s.model = "wav";  // another app's model
  EXPECT_EQ(code(s), absl::StatusCode::kNotFound);
  s.model = "mlp:tensorrt";
  EXPECT_THAT(message(s), HasSubstr("torch"));
  s = Submission(in_ + "/missing.npz");
  EXPECT_EQ(code(s), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(message(s), HasSubstr("does not exist"));
  // A relative path is taken from the jobs directory; nothing outside it.
  s = Submission("relative/a.npz");
  EXPECT_THAT(message(s), HasSubstr(dir_.path() + "/relative/a.npz does not exist"));
  s = Submission("../a.npz");
  EXPECT_EQ(code(s), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(message(s), HasSubstr("jobs directory"));
  s = Submission(input);
  s.app = "audio";
  s.model = "";
  EXPECT_THAT(message(s), HasSubstr("does not fit app 'audio'"));
  s = Submission(input, 100000);
  EXPECT_EQ(code(s), absl::StatusCode::kInvalidArgument);
  s = Submission(input);
  s.requirements.min_accuracy = 1.5;
  EXPECT_EQ(code(s), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(WriteFileAtomically(dir_.path() + "/file", "x").ok());
  s = Submission(input);
  s.output = dir_.path() + "/file";
  EXPECT_THAT(message(s), HasSubstr("not a directory"));
  s = Submission(input);
  s.output = in_;  // results named after the inputs would overwrite them
  EXPECT_EQ(code(s), absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(runner->List().empty());  // nothing refused was stored
  EXPECT_TRUE(registry_->jobs().ListJobs().empty());

  // Two live jobs may not write the same result.
  std::string first = SubmitOk(*runner, Submission(input));
  EXPECT_THAT(message(Submission(input)), HasSubstr(first));
  // A model-less job checks the app's models.
  s = Submission(input);
  s.model = "";
  s.output = dir_.path() + "/other";
  EXPECT_TRUE(runner->Submit(s).ok());
}

}  // namespace
}  // namespace maitre::jobs
