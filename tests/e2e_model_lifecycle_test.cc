// End-to-end: what registration refuses before any work, and deleting
// models and apps, against a real `maitre serve` with a real worker
// (docs/api.md, "Registering a model", "Deleting models and apps").
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/file_util.h"
#include "core/sha256.h"
#include "core/valset.h"
#include "runtime/testing/zoo.h"
#include "testing/server_process.h"
#include "testing/wait.h"
#include "testing/zoo_requests.h"

namespace maitre {
namespace {

using nlohmann::json;
using runtime::testing::ScopedTempDir;
using testing::ServerOptions;
using testing::ServerProcess;

class ModelLifecycleTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScopedTempDir();
    zoo_ = new std::vector<runtime::testing::ZooModel>(*runtime::testing::LoadZoo());
    valset_path_ = dir_->path() + "/valset.npz";
    valset_ = new Valset();
    ASSERT_TRUE(testing::WriteValsetSlice(**runtime::testing::ZooValset(), 200, valset_path_,
                                          valset_)
                    .ok());
    server_ = StartServer();
  }
  static ServerProcess* StartServer() {
    ServerOptions options;
    options.data_dir = dir_->path() + "/data";
    options.workers = "cpu-1:1";
    options.extra_args = {"--profile-sweeps", "1"};
    auto server = ServerProcess::Start(options);
    EXPECT_TRUE(server.ok()) << server.status();
    return server.ok() ? server->release() : nullptr;
  }
  static void TearDownTestSuite() {
    if (server_ != nullptr) EXPECT_TRUE(server_->Stop().ok());
    delete server_;
    delete valset_;
    delete zoo_;
    delete dir_;
  }

  static const runtime::testing::ZooModel& Zoo(const std::string& name) {
    for (const auto& m : *zoo_) {
      if (m.name == name) return m;
    }
    ADD_FAILURE() << "no " << name << " in the zoo";
    return zoo_->front();
  }

  static ScopedTempDir* dir_;
  static std::vector<runtime::testing::ZooModel>* zoo_;
  static std::string valset_path_;
  static Valset* valset_;
  static ServerProcess* server_;
};

ScopedTempDir* ModelLifecycleTest::dir_ = nullptr;
std::vector<runtime::testing::ZooModel>* ModelLifecycleTest::zoo_ = nullptr;
std::string ModelLifecycleTest::valset_path_;
Valset* ModelLifecycleTest::valset_ = nullptr;
ServerProcess* ModelLifecycleTest::server_ = nullptr;

// The MLP's TorchScript with the logistic regression's ONNX: the same
// inputs and outputs, another model. Refused on the validation rows and,
// without a validation set, on synthetic ones; nothing is registered.
TEST_F(ModelLifecycleTest, AnOnnxPartOfAnotherModelIsRefused) {
  const auto& mlp = Zoo("fmnist-mlp");
  const auto& logreg = Zoo("fmnist-logreg");
  for (const std::string& valset : {valset_path_, std::string()}) {
    auto r = server_->Register("mixed", "mixed", mlp.torchscript, logreg.onnx, valset);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->status, 400) << r->body;
    EXPECT_TRUE(absl::StrContains(r->body, "the ONNX part disagrees with the TorchScript part on"))
        << r->body;
    EXPECT_TRUE(absl::StrContains(
        r->body, valset.empty() ? "of 64 synthetic rows" : "of 64 validation rows"))
        << r->body;
    EXPECT_TRUE(absl::StrContains(r->body, "on output 'logits'")) << r->body;
  }
  auto model = server_->Get("/v2/models/mixed");
  ASSERT_TRUE(model.ok());
  EXPECT_EQ(model->status, 404) << model->body;
  EXPECT_EQ(server_->Log().find("variant pipeline: profiling mixed"), std::string::npos);
}

// The zoo's own pairs are the same model and register, with a validation
// set and without one.
TEST_F(ModelLifecycleTest, MatchedPairsRegister) {
  for (const auto& [name, valset] :
       {std::pair{std::string("fmnist-logreg"), valset_path_}, {"fmnist-mlp", ""}}) {
    const auto& m = Zoo(name);
    auto r = server_->Register("fashion", name, m.torchscript, m.onnx, valset);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->status, 201) << name << ": " << r->body;
  }
  EXPECT_TRUE(absl::StrContains(server_->Log(),
                                "the ONNX part agrees with the TorchScript part on 64 validation"));
  EXPECT_TRUE(absl::StrContains(server_->Log(),
                                "the ONNX part agrees with the TorchScript part on 64 synthetic"));
}

// A bad app or model name is refused before the model runs on a worker.
TEST_F(ModelLifecycleTest, BadNamesAreRefusedBeforeAnyWork) {
  const auto& logreg = Zoo("fmnist-logreg");
  for (const auto& [app, model, field] :
       {std::tuple{"fashion", "bad%3Aname", "model name"}, {"bad%3Aapp", "fine", "app name"}}) {
    auto r = server_->Register(app, model, logreg.torchscript, logreg.onnx, valset_path_);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->status, 400) << r->body;
    EXPECT_TRUE(absl::StrContains(r->body, field)) << r->body;
  }
  EXPECT_FALSE(absl::StrContains(server_->Log(), "registering bad"));
  EXPECT_FALSE(absl::StrContains(server_->Log(), "registering fine: checking"));
}

// Whether the blob store holds the file at `path` (it stores by content).
bool Stored(const std::string& data_dir, const std::string& path) {
  std::string hash = Sha256Hex(*ReadFileToString(path));
  return std::filesystem::exists(
      absl::StrCat(data_dir, "/blobs/", hash.substr(0, 2), "/", hash));
}

// The instances of `model` the repository index lists, as "worker/variant".
std::vector<std::string> InstancesOf(ServerProcess& server, const std::string& model) {
  std::vector<std::string> found;
  auto index = server.RepositoryIndex();
  EXPECT_TRUE(index.ok()) << index.status();
  if (!index.ok()) return found;
  for (const json& m : (*index)["models"]) {
    if (m["name"] != model) continue;
    for (const json& i : m["instances"]) {
      found.push_back(absl::StrCat(i["worker"].get<std::string>(), "/",
                                   m["version"].get<std::string>()));
    }
  }
  return found;
}

// Register, serve, delete: the instance leaves the worker, queries get 404,
// the model's own files go and shared ones stay, other models keep serving,
// and a restart keeps it all deleted. Runs last: it restarts the server.
TEST_F(ModelLifecycleTest, DeletedModelsAndAppsAreUnloadedCollectedAndStayDeleted) {
  const std::string data_dir = dir_->path() + "/data";
  const auto& cnn = Zoo("fmnist-cnn");
  const auto& logreg = Zoo("fmnist-logreg");
  // "keep" serves throughout; "doomed" has its own model and one that
  // shares every file with keep's.
  auto r = server_->Register("keep", "keep-logreg", logreg.torchscript, logreg.onnx, valset_path_);
  ASSERT_TRUE(r.ok() && r->status / 100 == 2) << (r.ok() ? r->body : r.status().ToString());
  r = server_->Register("doomed", "doomed-cnn", cnn.torchscript, cnn.onnx, valset_path_);
  ASSERT_TRUE(r.ok() && r->status == 201) << (r.ok() ? r->body : r.status().ToString());
  r = server_->Register("doomed", "doomed-logreg", logreg.torchscript, "", "");
  ASSERT_TRUE(r.ok() && r->status == 201) << (r.ok() ? r->body : r.status().ToString());
  const std::string query = testing::ImageRequest(*valset_, 0, nullptr);
  for (const char* model : {"doomed-cnn", "keep-logreg"}) {
    auto answer = server_->Post(absl::StrCat("/v2/models/", model, "/infer"), query);
    ASSERT_TRUE(answer.ok());
    EXPECT_EQ(answer->status, 200) << model << ": " << answer->body;
  }
  EXPECT_FALSE(InstancesOf(*server_, "doomed-cnn").empty());
  ASSERT_TRUE(Stored(data_dir, cnn.torchscript));

  // Unknown names, and a model asked for under an app that is not its own.
  for (const char* path : {"/v2/apps/nope", "/v2/apps/nope/models/doomed-cnn",
                           "/v2/apps/keep/models/doomed-cnn", "/v2/apps/doomed/models/nope"}) {
    auto missing = server_->client().Send("DELETE", path, "", {});
    ASSERT_TRUE(missing.ok());
    EXPECT_EQ(missing->status, 404) << path << ": " << missing->body;
  }
  auto bad = server_->client().Send("DELETE", "/v2/apps/doomed?force=maybe", "", {});
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->status, 400) << bad->body;

  auto deleted = server_->client().Send("DELETE", "/v2/apps/doomed/models/doomed-cnn", "", {});
  ASSERT_TRUE(deleted.ok());
  ASSERT_EQ(deleted->status, 200) << deleted->body;
  json removal = json::parse(deleted->body);
  EXPECT_EQ(removal["models"], json::array({"doomed-cnn"})) << removal.dump();
  EXPECT_FALSE(removal["unloading"].empty()) << removal.dump();
  EXPECT_GE(removal["blobs_removed"].get<int>(), 2) << removal.dump();  // .pt and .onnx

  // The worker lets the instance go; the index lists it until then.
  absl::Status unloaded = testing::WaitOnProgress([&] {
    std::vector<std::string> left = InstancesOf(*server_, "doomed-cnn");
    return testing::Progress{left.empty(), absl::StrJoin(left, ",")};
  });
  EXPECT_TRUE(unloaded.ok()) << unloaded;
  EXPECT_TRUE(absl::StrContains(server_->Log(), "doomed-cnn:torch unloaded from"));
  auto gone = server_->Post("/v2/models/doomed-cnn/infer", query);
  ASSERT_TRUE(gone.ok());
  EXPECT_EQ(gone->status, 404) << gone->body;
  EXPECT_FALSE(Stored(data_dir, cnn.torchscript));
  EXPECT_FALSE(Stored(data_dir, cnn.onnx));
  EXPECT_TRUE(Stored(data_dir, valset_path_)) << "keep-logreg's validation set too";

  // The app with its last model: the files keep-logreg shares stay.
  deleted = server_->client().Send("DELETE", "/v2/apps/doomed", "", {});
  ASSERT_TRUE(deleted.ok());
  ASSERT_EQ(deleted->status, 200) << deleted->body;
  removal = json::parse(deleted->body);
  EXPECT_EQ(removal["models"], json::array({"doomed-logreg"})) << removal.dump();
  EXPECT_TRUE(removal["app_deleted"].get<bool>());
  EXPECT_EQ(removal["blobs_removed"].get<int>(), 0) << removal.dump();
  EXPECT_TRUE(Stored(data_dir, logreg.torchscript));
  auto served = server_->Post("/v2/models/keep-logreg/infer", query);
  ASSERT_TRUE(served.ok());
  EXPECT_EQ(served->status, 200) << served->body;
  auto app_gone = server_->Post("/v2/apps/doomed/infer", query);
  ASSERT_TRUE(app_gone.ok());
  EXPECT_EQ(app_gone->status, 404) << app_gone->body;

  // Deleted stays deleted.
  ASSERT_TRUE(server_->Stop().ok());
  delete server_;
  server_ = StartServer();
  ASSERT_NE(server_, nullptr);
  for (const char* path :
       {"/v2/apps/doomed", "/v2/models/doomed-cnn", "/v2/models/doomed-logreg"}) {
    auto after = server_->Get(path);
    ASSERT_TRUE(after.ok());
    EXPECT_EQ(after->status, 404) << path << ": " << after->body;
  }
  served = server_->Post("/v2/models/keep-logreg/infer", query);
  ASSERT_TRUE(served.ok());
  EXPECT_EQ(served->status, 200) << served->body;
}

}  // namespace
}  // namespace maitre
