// Behaviour of the JobStore's calls on one open registry file. That jobs
// survive a restart, and a data dir from before jobs gains them, is in
// registry_durability_test.cc.
#include "controller/registry/job_store.h"

#include <memory>
#include <string>
#include <vector>

#include "controller/registry/registry.h"
#include "controller/registry/registry_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace maitre::registry {
namespace {

using test_util::TempDir;
using ::testing::ElementsAre;

class JobStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto opened = Registry::Open({tmp_.File("registry.db")});
    ASSERT_TRUE(opened.ok()) << opened.status();
    registry_ = *std::move(opened);
  }

  JobStore& jobs() { return registry_->jobs(); }

  int64_t CountRows(const std::string& table) {
    return test_util::CountRows(tmp_.File("registry.db"), table);
  }

  TempDir tmp_;
  std::unique_ptr<Registry> registry_;
};

JobRecord MakeJob(const std::string& id, int64_t seq) {
  JobRecord job;
  job.id = id;
  job.seq = seq;
  job.app = "fashion";
  job.model = "fmnist-mlp";
  job.input = "/data/in";
  job.output = "/data/out";
  job.requirements.min_accuracy = 0.8;
  job.batch_size = 64;
  job.state = "queued";
  job.created_unix_ms = 1700000000123;
  job.files = {{"/data/in/a.npz", 100, true, 0, 0}, {"/data/in/b.npz", 7, false, 0, 0}};
  return job;
}

TEST_F(JobStoreTest, JobsRoundTripWithTheirFiles) {
  ASSERT_TRUE(jobs().CreateJob(MakeJob("job-000002", 2)).ok());
  ASSERT_TRUE(jobs().CreateJob(MakeJob("job-000001", 1)).ok());
  auto job = jobs().GetJob("job-000002");
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->app, "fashion");
  EXPECT_EQ(job->model, "fmnist-mlp");
  EXPECT_EQ(job->variant, "");
  EXPECT_EQ(job->requirements.min_accuracy, 0.8);
  EXPECT_FALSE(job->requirements.latency_ms.has_value());
  EXPECT_EQ(job->batch_size, 64);
  EXPECT_EQ(job->state, "queued");
  EXPECT_EQ(job->created_unix_ms, 1700000000123);
  ASSERT_EQ(job->files.size(), 2u);
  EXPECT_EQ(job->files[0].path, "/data/in/a.npz");
  EXPECT_EQ(job->files[0].rows, 100);
  EXPECT_TRUE(job->files[0].labelled);
  EXPECT_FALSE(job->files[1].labelled);
  // Listed in submission order, not by id or insertion.
  std::vector<std::string> ids;
  for (const JobRecord& j : jobs().ListJobs()) ids.push_back(j.id);
  EXPECT_THAT(ids, ElementsAre("job-000001", "job-000002"));
  EXPECT_EQ(jobs().ListJobs()[1].files.size(), 2u);
  EXPECT_EQ(jobs().GetJob("job-9").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(JobStoreTest, JobIdsAndSeqsAreUnique) {
  ASSERT_TRUE(jobs().CreateJob(MakeJob("job-000001", 1)).ok());
  EXPECT_EQ(jobs().CreateJob(MakeJob("job-000001", 5)).code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(jobs().CreateJob(MakeJob("job-000005", 1)).code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(CountRows("job_files"), 2);  // the refused jobs left no files behind
}

TEST_F(JobStoreTest, MalformedJobsAreRefused) {
  JobRecord bad = MakeJob("job/1", 1);
  EXPECT_EQ(jobs().CreateJob(bad).code(), absl::StatusCode::kInvalidArgument);
  bad = MakeJob("job-1", 1);
  bad.batch_size = 0;
  EXPECT_EQ(jobs().CreateJob(bad).code(), absl::StatusCode::kInvalidArgument);
  bad = MakeJob("job-1", 1);
  bad.files[0].done_rows = 101;
  EXPECT_EQ(jobs().CreateJob(bad).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CountRows("jobs"), 0);
}

TEST_F(JobStoreTest, JobStateAndProgressUpdates) {
  ASSERT_TRUE(jobs().CreateJob(MakeJob("job-000001", 1)).ok());
  ASSERT_TRUE(jobs().UpdateJobProgress("job-000001", 0, 64, 60).ok());
  ASSERT_TRUE(jobs().UpdateJobProgress("job-000001", 1, 7, 0).ok());
  JobRecord job = *jobs().GetJob("job-000001");
  job.state = "failed";
  job.error = "the input vanished";
  job.started_unix_ms = 5;
  job.finished_unix_ms = 9;
  job.app = "ignored";  // only state, error and timestamps change
  ASSERT_TRUE(jobs().UpdateJobState(job).ok());
  JobRecord back = *jobs().GetJob("job-000001");
  EXPECT_EQ(back.state, "failed");
  EXPECT_EQ(back.error, "the input vanished");
  EXPECT_EQ(back.started_unix_ms, 5);
  EXPECT_EQ(back.finished_unix_ms, 9);
  EXPECT_EQ(back.app, "fashion");
  EXPECT_EQ(back.files[0].done_rows, 64);
  EXPECT_EQ(back.files[0].correct, 60);
  EXPECT_EQ(back.files[1].done_rows, 7);

  // Past the file's end, an unknown file or job, or more correct than done.
  EXPECT_EQ(jobs().UpdateJobProgress("job-000001", 0, 101, 0).code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(jobs().UpdateJobProgress("job-000001", 2, 1, 0).code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(jobs().UpdateJobProgress("job-7", 0, 1, 0).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(jobs().UpdateJobProgress("job-000001", 0, 10, 11).code(),
            absl::StatusCode::kInvalidArgument);
  job.id = "job-7";
  EXPECT_EQ(jobs().UpdateJobState(job).code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace maitre::registry
