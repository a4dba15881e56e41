// End-to-end: offline jobs on a real `maitre serve` with real workers
// (docs/api.md, "Offline jobs"): a job over the zoo's 10,000 validation images
// completes with the model's accuracy, pauses while online load keeps a worker
// busy and resumes after it, and survives a controller restart without sending
// finished chunks again.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <thread>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "core/file_util.h"
#include "http/client.h"
#include "core/npz.h"
#include "runtime/testing/zoo.h"
#include "core/valset.h"
#include "testing/online_load.h"
#include "testing/server_process.h"
#include "testing/wait.h"

namespace maitre {
namespace {

using nlohmann::json;
using runtime::testing::ScopedTempDir;
using testing::OnlineLoad;
using testing::ServerOptions;
using testing::ServerProcess;
using testing::WaitUntil;

void SleepMs(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

// Runs a command and returns its stdout (and exit status).
std::string RunCommand(const std::string& command, int* status) {
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return "";
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, pipe)) out.append(buf, n);
  *status = pclose(pipe);
  return out;
}

// The server's log lines that explain a job's pauses and resumptions:
// the jobs' own transitions, and what the autoscalers and placer did.
std::string ThrottleLog(const ServerProcess& server) {
  std::string out;
  for (absl::string_view line : absl::StrSplit(server.Log(), '\n')) {
    for (absl::string_view word : {"jobs pause", "job job-", "autoscaler", "loaded"}) {
      if (absl::StrContains(line, word)) {
        absl::StrAppend(&out, line, "\n");
        break;
      }
    }
  }
  return out;
}

class JobsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    zoo_ = new std::vector<runtime::testing::ZooModel>(*runtime::testing::LoadZoo());
    valset_ = *runtime::testing::ZooValset();
    valset_path_ = *runtime::testing::ZooDir() + "/valset.npz";
    dir_ = new ScopedTempDir();
    // Registration measures accuracy on the validation set; 500 images keep
    // it quick where the test does not compare with the measured figure.
    small_valset_ = dir_->path() + "/valset-500.npz";
    Tensor inputs = *SliceRows(valset_->inputs, 0, 500);
    Tensor labels = *SliceRows(valset_->labels, 0, 500);
    inputs.name = "inputs";
    labels.name = "labels";
    ASSERT_TRUE(WriteFileAtomically(small_valset_, WriteNpz({inputs, labels})).ok());
  }
  static void TearDownTestSuite() {
    delete dir_;
    delete zoo_;
  }

  const runtime::testing::ZooModel& Model(const std::string& name) {
    for (const auto& m : *zoo_) {
      if (m.name == name) return m;
    }
    ADD_FAILURE() << "no zoo model " << name;
    return zoo_->front();
  }

  // A server whose jobs read and write beneath `jobs_dir` only.
  std::unique_ptr<ServerProcess> StartServer(const std::string& data_dir,
                                             const std::string& jobs_dir,
                                             const std::string& workers = "cpu-1:1,cpu-2:1",
                                             std::vector<std::string> extra_args = {}) {
    ServerOptions options;
    options.data_dir = data_dir;
    options.workers = workers;
    options.extra_args = std::move(extra_args);
    options.extra_args.insert(options.extra_args.end(), {"--jobs-dir", jobs_dir});
    auto server = ServerProcess::Start(options);
    EXPECT_TRUE(server.ok()) << server.status();
    return server.ok() ? *std::move(server) : nullptr;
  }

  // The validation set, copied into the jobs directory `work` as a job's
  // input; its path.
  std::string StageInput(const ScopedTempDir& work) {
    const std::string input = work.path() + "/valset.npz";
    std::filesystem::copy_file(valset_path_, input);
    return input;
  }

  void RegisterOk(ServerProcess& server, const std::string& name, const std::string& valset) {
    const auto& m = Model(name);
    auto r = server.Register("fashion", name, m.torchscript, m.onnx, valset);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_TRUE(r->status == 201 || r->status == 200) << r->status << " " << r->body;
  }

  json Submit(ServerProcess& server, json body, int expect_status = 201) {
    auto r = server.Post("/v2/apps/fashion/jobs", body.dump());
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return json();
    EXPECT_EQ(r->status, expect_status) << r->body;
    return json::parse(r->body, nullptr, false);
  }

  json Job(ServerProcess& server, const std::string& id) {
    auto j = server.GetJson("/v2/jobs/" + id);
    EXPECT_TRUE(j.ok()) << j.status();
    return j.ok() ? *j : json::object();
  }

  // Waits for the job to end; fails only if its rows stop moving
  // (testing/wait.h) or it ends otherwise.
  json WaitUntilFinished(ServerProcess& server, const std::string& id) {
    json job;
    absl::Status waited = testing::WaitOnProgress([&] {
      job = Job(server, id);
      std::string state = job.value("state", "");
      return testing::Progress{
          state == "succeeded" || state == "failed" || state == "cancelled",
          absl::StrCat(state, " ", job.value("done", int64_t{0}), " rows done")};
    });
    EXPECT_TRUE(waited.ok()) << waited;
    return job;
  }

  // The result file of a job over the zoo valset: every row's prediction is
  // the argmax of its logits; returns the fraction that match the labels.
  double CheckResult(const std::string& path) {
    auto bytes = ReadFileToString(path);
    EXPECT_TRUE(bytes.ok()) << bytes.status();
    if (!bytes.ok()) return -1;
    auto arrays = ParseNpz(*bytes);
    EXPECT_TRUE(arrays.ok()) << arrays.status();
    if (!arrays.ok()) return -1;
    const Tensor& logits = arrays->at("logits");
    const Tensor& predictions = arrays->at("predictions");
    const int64_t rows = valset_->size();
    EXPECT_EQ(logits.shape, (std::vector<int64_t>{rows, 10}));
    EXPECT_EQ(predictions.shape, (std::vector<int64_t>{rows}));
    if (logits.shape != std::vector<int64_t>{rows, 10} || predictions.shape[0] != rows) return -1;
    int64_t correct = 0, consistent = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = logits.As<float>() + r * 10;
      int64_t best = std::max_element(row, row + 10) - row;
      int64_t p = predictions.As<int64_t>()[r];
      consistent += p == best ? 1 : 0;
      correct += p == valset_->labels.As<int64_t>()[r] ? 1 : 0;
    }
    EXPECT_EQ(consistent, rows);
    return static_cast<double>(correct) / rows;
  }

  static std::vector<runtime::testing::ZooModel>* zoo_;
  static const Valset* valset_;
  static std::string valset_path_;
  static ScopedTempDir* dir_;
  static std::string small_valset_;
};

std::vector<runtime::testing::ZooModel>* JobsTest::zoo_ = nullptr;
const Valset* JobsTest::valset_ = nullptr;
std::string JobsTest::valset_path_;
ScopedTempDir* JobsTest::dir_ = nullptr;
std::string JobsTest::small_valset_;

TEST_F(JobsTest, AJobOverTheValidationSetHasTheModelsAccuracy) {
  ScopedTempDir data, work;
  auto server = StartServer(data.path(), work.path());
  ASSERT_NE(server, nullptr);
  const std::string input = StageInput(work);
  // Registered with the full validation set, so the measured accuracy is
  // over the same 10,000 images the job classifies.
  RegisterOk(*server, "fmnist-mlp", valset_path_);
  auto app = server->GetJson("/v2/apps/fashion");
  ASSERT_TRUE(app.ok()) << app.status();
  double model_accuracy = -1;
  for (const json& v : (*app)["models"][0]["variants"]) {
    if (v["variant"] == "torch") model_accuracy = v["accuracy"].get<double>();
  }
  ASSERT_GT(model_accuracy, 0.8);

  // Through the CLI, as a person would: submit and wait.
  std::string output = work.path() + "/out";
  int status = 0;
  std::string printed =
      RunCommand(absl::StrCat(testing::MaitreBinary(), " job submit --server ", server->url(),
                              " --app fashion --model fmnist-mlp --input ", input,
                              " --output ", output, " --wait 2>&1"),
                 &status);
  EXPECT_EQ(status, 0) << printed;
  EXPECT_NE(printed.find("succeeded"), std::string::npos) << printed;

  auto list = server->GetJson("/v2/jobs");
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ((*list)["jobs"].size(), 1u);
  json job = (*list)["jobs"][0];
  EXPECT_EQ(job["state"], "succeeded");
  EXPECT_EQ(job["done"], valset_->size());
  EXPECT_EQ(job["total"], valset_->size());
  ASSERT_TRUE(job.contains("accuracy")) << job.dump();
  double job_accuracy = job["accuracy"].get<double>();
  EXPECT_NEAR(job_accuracy, model_accuracy, 0.005) << job.dump();
  // The result file agrees with what the job reported.
  std::string result = output + "/valset.npz";
  EXPECT_NEAR(CheckResult(result), job_accuracy, 1e-9);

  std::string id = job["id"];
  std::string shown = RunCommand(
      absl::StrCat(testing::MaitreBinary(), " job status ", id, " --server ", server->url()),
      &status);
  EXPECT_EQ(status, 0) << shown;
  EXPECT_NE(shown.find("100.0%"), std::string::npos) << shown;
  shown = RunCommand(absl::StrCat(testing::MaitreBinary(), " job list --server ", server->url()),
                     &status);
  EXPECT_NE(shown.find(id), std::string::npos) << shown;

  // Bad submissions get the right status and change nothing.
  ASSERT_TRUE(WriteFileAtomically(work.path() + "/file", "x").ok());
  struct Bad {
    std::string app;
    json body;
    int status;
  };
  const Bad bad[] = {
      {"nope", {{"input", input}, {"output", work.path() + "/o1"}}, 404},
      {"fashion", {{"input", work.path() + "/missing.npz"}, {"output", work.path() + "/o1"}}, 400},
      {"fashion", {{"input", work.path() + "/file"}, {"output", work.path() + "/o1"}}, 400},
      {"fashion",
       {{"input", input}, {"output", work.path() + "/o1"}, {"model", "fmnist-resnet"}},
       404},
      {"fashion", {{"input", input}, {"output", work.path() + "/file/o1"}}, 400},
      {"fashion", {{"input", input}, {"output", output}}, 409},  // would overwrite
      {"fashion", {{"output", output}}, 400},
      // Outside the jobs directory: the zoo's own copy, and the host's files.
      {"fashion", {{"input", valset_path_}, {"output", work.path() + "/o1"}}, 403},
      {"fashion", {{"input", input}, {"output", "/etc"}}, 403},
  };
  for (const Bad& b : bad) {
    auto r = server->Post(absl::StrCat("/v2/apps/", b.app, "/jobs"), b.body.dump());
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->status, b.status) << b.body.dump() << " -> " << r->body;
    EXPECT_NE(r->body.find("\"error\""), std::string::npos) << r->body;
  }
  EXPECT_EQ((*server->GetJson("/v2/jobs"))["jobs"].size(), 1u);
  EXPECT_TRUE(server->Stop().ok());
}

TEST_F(JobsTest, AJobPausesWhileOnlineLoadKeepsAWorkerBusyAndThenResumes) {
  ScopedTempDir data, work;
  // One one-core worker serves both the job and the online load, and the
  // autoscalers stay off: a replica or a worker they added would relieve the
  // busy worker, and the job would rightly resume while the load goes on.
  // Profiles are measured once and finished before the job starts: while a
  // sweep holds the core, the online load cannot keep it busy.
  auto server = StartServer(data.path(), work.path(), "cpu-1:1",
                            {"--model-autoscaler", "off", "--cluster-autoscaler", "false",
                             "--profile-sweeps", "1"});
  ASSERT_NE(server, nullptr);
  RegisterOk(*server, "fmnist-mlp", small_valset_);
  RegisterOk(*server, "fmnist-cnn-wide", small_valset_);
  absl::Status profiled = server->AwaitProfiles("fashion");
  ASSERT_TRUE(profiled.ok()) << profiled;

  // The online model is loaded before the job starts, so the load can
  // build up at once.
  {
    OnlineLoad warm(server->url(), "fmnist-cnn-wide", *valset_, 1, 1);
    ASSERT_TRUE(WaitUntil([&] { return warm.served() > 0; }, 300));
  }
  // Small chunks make the job last long enough to be caught running.
  json job = Submit(*server, {{"input", StageInput(work)},
                              {"output", work.path() + "/out"},
                              {"model", "fmnist-mlp"},
                              {"batch_size", 4}});
  std::string id = job.value("id", "");
  ASSERT_FALSE(id.empty()) << job.dump();
  ASSERT_TRUE(WaitUntil(
      [&] {
        job = Job(*server, id);
        return job["state"] == "running" && job["done"].get<int64_t>() >= 400;
      },
      300))
      << job.dump();

  // Online load on the other model, heavy enough per query to keep the
  // worker serving it well above 40% busy.
  auto load = std::make_unique<OnlineLoad>(server->url(), "fmnist-cnn-wide", *valset_, 6, 32);
  bool paused = WaitUntil([&] { return Job(*server, id)["state"] == "paused"; }, 120);
  auto index = server->RepositoryIndex();
  EXPECT_TRUE(paused) << Job(*server, id).dump() << "\n"
                      << (index.ok() ? index->dump() : std::string(index.status().message()));
  // It stays paused while the load goes on.
  job = Job(*server, id);
  std::cerr << "paused: " << job.value("reason", "") << " after " << job["done"] << " rows\n";
  EXPECT_NE(job.value("reason", ""), "");
  int64_t done_while_paused = job["done"];
  SleepMs(3000);
  job = Job(*server, id);
  EXPECT_EQ(job["state"], "paused") << job.dump() << "\n" << ThrottleLog(*server);
  EXPECT_LT(job["done"].get<int64_t>(), valset_->size());
  EXPECT_LE(job["done"].get<int64_t>(), done_while_paused + 16) << "progress while paused";
  EXPECT_GT(load->served(), 0);

  load->Stop();
  std::cerr << "online load: " << load->served() << " served, " << load->failed() << " failed\n";
  EXPECT_TRUE(WaitUntil(
      [&] {
        std::string state = Job(*server, id)["state"];
        return state == "running" || state == "succeeded";
      },
      120))
      << Job(*server, id).dump();
  job = WaitUntilFinished(*server, id);
  EXPECT_EQ(job["state"], "succeeded") << job.dump();
  EXPECT_NEAR(job.value("accuracy", 0.0), Model("fmnist-mlp").accuracy, 0.005) << job.dump();
  EXPECT_NEAR(CheckResult(work.path() + "/out/valset.npz"), job.value("accuracy", 0.0), 1e-9);
  EXPECT_TRUE(server->Stop().ok());
}

TEST_F(JobsTest, AJobResumesAfterAControllerRestartWithoutRedoingChunks) {
  ScopedTempDir data, work;
  std::string id;
  int64_t done_before_stop = 0;
  {
    auto server = StartServer(data.path(), work.path());
    ASSERT_NE(server, nullptr);
    RegisterOk(*server, "fmnist-mlp", small_valset_);
    // Small chunks make the job last long enough to stop it half way.
    json job = Submit(*server, {{"input", StageInput(work)},
                                {"output", work.path() + "/out"},
                                {"model", "fmnist-mlp"},
                                {"batch_size", 4}});
    id = job.value("id", "");
    ASSERT_FALSE(id.empty()) << job.dump();
    ASSERT_TRUE(WaitUntil(
        [&] {
          job = Job(*server, id);
          return job["done"].get<int64_t>() >= 2000;
        },
        300))
        << job.dump();
    done_before_stop = job["done"];
    ASSERT_NE(job["state"], "succeeded") << "the job finished before the restart";
    EXPECT_TRUE(server->Stop().ok());
  }
  auto server = StartServer(data.path(), work.path());
  ASSERT_NE(server, nullptr);
  json job = Job(*server, id);
  std::cerr << "after the restart: " << job.dump() << "\n";
  int64_t resumed_from = job["resumed_from"];
  EXPECT_GE(resumed_from, done_before_stop);
  EXPECT_LT(resumed_from, valset_->size());
  job = WaitUntilFinished(*server, id);
  ASSERT_EQ(job["state"], "succeeded") << job.dump();
  // This controller sent exactly the rows that were not durable before.
  EXPECT_EQ(job["rows_sent"].get<int64_t>(), valset_->size() - resumed_from) << job.dump();
  EXPECT_EQ(job["done"], valset_->size());
  EXPECT_NEAR(job.value("accuracy", 0.0), Model("fmnist-mlp").accuracy, 0.005) << job.dump();
  EXPECT_NEAR(CheckResult(work.path() + "/out/valset.npz"), job.value("accuracy", 0.0), 1e-9);
  EXPECT_FALSE(std::filesystem::exists(work.path() + "/out/.maitre-" + id));
  EXPECT_TRUE(server->Stop().ok());
}

}  // namespace
}  // namespace maitre
