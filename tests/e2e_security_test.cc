// What an attacker on the network, or an uploaded model, can do to a running
// server: join as a rogue worker, report as a real one, fetch model files,
// call a worker directly, read and write the host's files from a model's
// forward pass. Each is refused with a clear error, and the server keeps
// serving its honest clients throughout (docs/operations.md, "Security"
// and "Sandbox").
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/file_util.h"
#include "core/secret_token.h"
#include "inference.grpc.pb.h"
#include "maitre/worker.grpc.pb.h"
#include "runtime/testing/zoo.h"
#include "testing/server_process.h"
#include "testing/wait.h"
#include "testing/zoo_requests.h"

namespace maitre {
namespace {

namespace v1 = ::maitre::worker::v1;
using nlohmann::json;
using runtime::testing::ScopedTempDir;
using testing::ServerOptions;
using testing::ServerProcess;

constexpr char kModel[] = "fmnist-logreg";

template <typename Service>
std::unique_ptr<typename Service::Stub> StubFor(const std::string& address) {
  return Service::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
}

void Deadline(grpc::ClientContext* context) {
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
}

class SecurityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto zoo = runtime::testing::LoadZoo();
    ASSERT_TRUE(zoo.ok()) << zoo.status();
    dir_ = new ScopedTempDir;
    ServerOptions options;
    options.data_dir = dir_->path() + "/data";
    options.workers = "cpu-1:1";
    // Keys required, as beyond loopback; the helpers present the admin key.
    options.extra_args = {"--cluster-autoscaler", "false", "--profile-sweeps", "1", "--auth", "on"};
    auto started = ServerProcess::Start(options);
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = started->release();
    ASSERT_FALSE(server_->admin_key().empty()) << "no <data-dir>/admin-key was made";
    valset_path_ = dir_->path() + "/valset.npz";
    ASSERT_TRUE(testing::WriteValsetSlice(**runtime::testing::ZooValset(), 200, valset_path_).ok());
    for (const auto& m : *zoo) {
      if (m.name != kModel) continue;
      auto r = server_->Register("fashion", m.name, m.torchscript, m.onnx, valset_path_);
      ASSERT_TRUE(r.ok() && r->status / 100 == 2) << (r.ok() ? r->body : r.status().ToString());
    }
  }
  static void TearDownTestSuite() {
    if (server_ != nullptr) EXPECT_TRUE(server_->Stop().ok());
    delete server_;
    delete dir_;
  }

  // An honest client's query still gets its answer.
  static void ExpectServing() {
    const Valset& valset = **runtime::testing::ZooValset();
    auto answer = server_->Post(absl::StrCat("/v2/models/", kModel, "/infer"),
                                testing::ImageRequest(valset, 0, nullptr));
    ASSERT_TRUE(answer.ok()) << answer.status();
    EXPECT_EQ(answer->status, 200) << answer->body;
  }

  // A TorchScript model made by `body` (python defining `Model`).
  static std::string MakeModel(const std::string& name, const std::string& body) {
    const std::string dir = dir_->path();
    absl::Status made = runtime::testing::RunPython(
        dir, absl::StrCat("import torch\n", body, "\ntorch.jit.script(Model()).save('", name,
                          "')\n"));
    EXPECT_TRUE(made.ok()) << made;
    return dir + "/" + name;
  }

  static ScopedTempDir* dir_;
  static ServerProcess* server_;
  static std::string valset_path_;
};

ScopedTempDir* SecurityTest::dir_ = nullptr;
ServerProcess* SecurityTest::server_ = nullptr;
std::string SecurityTest::valset_path_;

TEST_F(SecurityTest, ARogueWorkerCannotJoinReportOrFetchModelFiles) {
  auto membership = StubFor<v1::Membership>(server_->control_address());
  for (const std::string& token : {std::string(), std::string("guessed-guessed-guessed")}) {
    v1::RegisterWorkerRequest request;
    request.set_worker_type("cpu-1");
    request.set_address("127.0.0.1:1");
    request.set_call_token(std::string(32, 'a'));
    v1::RegisterWorkerResponse response;
    grpc::ClientContext context;
    Deadline(&context);
    if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
    grpc::Status status = membership->RegisterWorker(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
    EXPECT_TRUE(absl::StrContains(status.error_message(), "join token"));
  }

  // Reports under the real worker's id, and a model file by its hash.
  auto index = server_->RepositoryIndex();
  ASSERT_TRUE(index.ok());
  ASSERT_FALSE((*index)["workers"].empty());
  const std::string real_id = (*index)["workers"][0]["id"];
  EXPECT_FALSE((*index)["workers"][0].contains("pid")) << "clients are shown no worker pids";
  v1::ReportRequest report;
  report.set_worker_id(real_id);
  report.set_cpu_utilisation(1.0);
  v1::ReportResponse reported;
  grpc::ClientContext report_context;
  Deadline(&report_context);
  report_context.AddMetadata("authorization", "Bearer " + std::string(64, '0'));
  grpc::Status status = membership->Report(&report_context, report, &reported);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();

  v1::FetchBlobRequest fetch;
  fetch.set_blob(std::string(64, 'f'));  // refused before the hash is looked at
  fetch.set_worker_id(real_id);
  grpc::ClientContext fetch_context;
  Deadline(&fetch_context);
  auto reader = membership->FetchBlob(&fetch_context, fetch);
  v1::BlobChunk chunk;
  EXPECT_FALSE(reader->Read(&chunk));
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);

  // Workers join only on the control port, not the clients' gRPC port.
  auto public_port = StubFor<v1::Membership>(server_->grpc_address());
  v1::RegisterWorkerRequest request;
  v1::RegisterWorkerResponse response;
  grpc::ClientContext context;
  Deadline(&context);
  EXPECT_EQ(public_port->RegisterWorker(&context, request, &response).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
  ExpectServing();
}

TEST_F(SecurityTest, AWorkerTakesCallsFromItsControllerOnly) {
  auto index = server_->RepositoryIndex();
  ASSERT_TRUE(index.ok());
  const std::string address = (*index)["workers"][0]["address"];
  auto worker = StubFor<v1::Worker>(address);

  v1::UnloadRequest unload;
  unload.set_model(kModel);
  unload.set_variant("torch");
  v1::UnloadResponse unloaded;
  grpc::ClientContext context;
  Deadline(&context);
  grpc::Status status = worker->Unload(&context, unload, &unloaded);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();

  v1::InferRequest infer;
  infer.set_model(kModel);
  infer.set_variant("torch");
  v1::InferResponse inferred;
  grpc::ClientContext infer_context;
  Deadline(&infer_context);
  infer_context.AddMetadata("authorization", "Bearer " + std::string(64, '1'));
  status = worker->Infer(&infer_context, infer, &inferred);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << status.error_message();
  ExpectServing();
}

TEST_F(SecurityTest, WorkersRunConfinedAsAnUnprivilegedUser) {
  auto pids = server_->WorkerPids();
  ASSERT_TRUE(pids.ok()) << pids.status();
  ASSERT_FALSE(pids->empty());
  for (pid_t pid : *pids) {
    auto status = ReadFileToString(absl::StrCat("/proc/", pid, "/status"));
    ASSERT_TRUE(status.ok());
    if (geteuid() == 0) {
      EXPECT_FALSE(absl::StrContains(*status, "\nUid:\t0\t")) << "worker " << pid << " is root";
    }
    EXPECT_TRUE(absl::StrContains(*status, "\nNoNewPrivs:\t1")) << *status;
    auto environ = ReadFileToString(absl::StrCat("/proc/", pid, "/environ"));
    ASSERT_TRUE(environ.ok());
    auto token = ReadFileToString(dir_->path() + "/data/join-token");
    ASSERT_TRUE(token.ok());
    EXPECT_FALSE(absl::StrContains(*environ, token->substr(0, 32)))
        << "the join token is left in the worker's environment";
  }
  // Each worker says in its own log what confines it.
  int confined = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir_->path() + "/data/logs")) {
    auto log = ReadFileToString(entry.path().string());
    if (log.ok() && absl::StrContains(*log, "model code: landlock")) ++confined;
  }
  EXPECT_EQ(confined, static_cast<int>(pids->size()));
}

// Uploaded models that read and write the host's files, as any TorchScript
// model can with torch.from_file.
TEST_F(SecurityTest, AModelThatTouchesHostFilesIsRefusedAndTheWorkerSurvives) {
  const std::string open_dir = dir_->path() + "/open";
  ASSERT_TRUE(MakeDirectories(open_dir).ok());
  chmod(dir_->path().c_str(), 0711);
  chmod(open_dir.c_str(), 0777);
  const std::string planted = open_dir + "/planted";
  const std::string reader = MakeModel("reader.pt", R"(
class Model(torch.nn.Module):
    def forward(self, x):
        leak = torch.from_file("/etc/passwd", shared=False, size=16, dtype=torch.uint8)
        return torch.zeros(x.shape[0], 10) + leak.float()[:10]
)");
  const std::string writer = MakeModel("writer.pt", absl::StrCat(R"(
class Model(torch.nn.Module):
    def forward(self, x):
        t = torch.from_file(")", planted, R"(", shared=True, size=16, dtype=torch.uint8)
        t.fill_(65)
        return torch.zeros(x.shape[0], 10) + t.float().sum() * 0
)"));
  auto pids_before = server_->WorkerPids();
  ASSERT_TRUE(pids_before.ok());
  for (const auto& [name, path] : {std::pair{"reader", reader}, {"writer", writer}}) {
    SCOPED_TRACE(name);
    auto r = server_->Register("mallory", name, path, "", valset_path_);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->status, 400) << r->body;
    EXPECT_TRUE(absl::StrContains(r->body, "Permission denied")) << r->body;
    EXPECT_FALSE(absl::StrContains(r->body, "root:")) << "the file's content came back";
  }
  EXPECT_FALSE(std::filesystem::exists(planted));
  auto pids_after = server_->WorkerPids();
  ASSERT_TRUE(pids_after.ok());
  EXPECT_EQ(*pids_after, *pids_before) << "a worker died";
  ExpectServing();
}

// Another team's client, with a valid key of its own app, and clients with
// no key or a made-up one: none reaches the "fashion" app's models, jobs,
// defaults or profiles, nor the server's own state.
TEST_F(SecurityTest, AKeyReachesItsOwnAppOnly) {
  const Valset& valset = **runtime::testing::ZooValset();
  const std::string query = testing::ImageRequest(valset, 0, nullptr);
  const std::string infer = absl::StrCat("/v2/models/", kModel, "/infer");
  auto make_key = [](const std::string& app) {
    auto made = server_->Post("/v2/keys", json{{"app", app}, {"name", "e2e"}}.dump());
    EXPECT_TRUE(made.ok() && made->status == 201) << (made.ok() ? made->body : "");
    return made.ok() ? json::parse(made->body) : json::object();
  };
  const json fashion = make_key("fashion");
  const json other = make_key("other");
  const std::string fashion_key = fashion.value("key", ""), other_key = other.value("key", "");

  // No key, or one the server never made: 401, with a challenge.
  for (const std::string& key : {std::string(), std::string("mk_0123_guess"),
                                 absl::StrCat("mk_", std::string(16, 'a'), "_",
                                              std::string(64, 'b'))}) {
    auto r = server_->SendAs(key, "POST", infer, query);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->status, 401) << r->body;
    EXPECT_EQ(r->GetHeader("WWW-Authenticate"), "Bearer realm=\"maitre\"");
    EXPECT_EQ(server_->SendAs(key, "GET", "/v2/apps")->status, 401);
  }
  // Probes stay open for load balancers.
  EXPECT_EQ(server_->SendAs("", "GET", "/v2/health/live")->status, 200);

  // The app's own key serves and manages it.
  EXPECT_EQ(server_->SendAs(fashion_key, "POST", infer, query)->status, 200);
  EXPECT_EQ(server_->SendAs(fashion_key, "GET", "/v2/apps/fashion")->status, 200);

  // Another app's key: 403 naming the app, for everything of "fashion".
  struct Attempt {
    const char* method;
    std::string path;
    std::string body;
  };
  const Attempt attempts[] = {
      {"POST", infer, query},
      {"POST", "/v2/apps/fashion/infer", query},
      {"GET", absl::StrCat("/v2/models/", kModel), ""},
      {"GET", "/v2/apps/fashion", ""},
      {"PUT", "/v2/apps/fashion", R"({"latency_ms": 1})"},
      {"POST", "/v2/apps/fashion/models/capture", "x"},
      {"GET", "/v2/profiles?app=fashion", ""},
      {"POST", "/v2/apps/fashion/jobs", R"({"input": "in.npz", "output": "out"})"},
      {"POST", "/v2/keys", R"({"app": "fashion"})"},
      {"DELETE", absl::StrCat("/v2/apps/fashion/models/", kModel), ""},
      {"DELETE", "/v2/apps/fashion", ""},
  };
  for (const Attempt& a : attempts) {
    auto r = server_->SendAs(other_key, a.method, a.path, a.body);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->status, 403) << a.method << " " << a.path << " -> " << r->body;
    EXPECT_TRUE(absl::StrContains(r->body, "'fashion'")) << r->body;
  }
  // The server's own state needs an admin key.
  for (const Attempt& a : {Attempt{"GET", "/metrics", ""}, Attempt{"GET", "/v2/profiles", ""},
                           Attempt{"POST", "/v2/profiles", "model,variant\n"},
                           Attempt{"POST", "/v2/keys", "{}"}}) {
    EXPECT_EQ(server_->SendAs(other_key, a.method, a.path, a.body)->status, 403) << a.path;
  }
  // Listings show a key its own app only; the index shows no workers.
  auto apps = server_->SendAs(other_key, "GET", "/v2/apps");
  ASSERT_TRUE(apps.ok() && apps->status == 200);
  EXPECT_TRUE(json::parse(apps->body)["apps"].empty()) << apps->body;
  auto index = server_->SendAs(other_key, "POST", "/v2/repository/index");
  ASSERT_TRUE(index.ok() && index->status == 200);
  EXPECT_TRUE(json::parse(index->body)["models"].empty()) << index->body;
  EXPECT_TRUE(json::parse(index->body)["workers"].empty()) << index->body;
  // Its model name is taken: registering it in another app cannot capture it.
  auto zoo = runtime::testing::LoadZoo();
  ASSERT_TRUE(zoo.ok());
  for (const auto& m : *zoo) {
    if (m.name != kModel) continue;
    auto capture = server_->Register("other", m.name, m.torchscript, "", valset_path_);
    ASSERT_TRUE(capture.ok());
    EXPECT_EQ(capture->status, 409) << capture->body;
  }

  // gRPC: the same keys, as "authorization" metadata.
  auto stub = StubFor<inference::GRPCInferenceService>(server_->grpc_address());
  inference::ModelInferRequest request;
  request.set_model_name(kModel);
  auto* input = request.add_inputs();
  input->set_name("input");
  input->set_datatype("FP32");
  for (int64_t d : {1, 1, 28, 28}) input->add_shape(d);
  request.add_raw_input_contents(std::string(28 * 28 * 4, '\0'));
  for (const auto& [key, code] : {std::pair{std::string(), grpc::StatusCode::UNAUTHENTICATED},
                                  {other_key, grpc::StatusCode::PERMISSION_DENIED},
                                  {fashion_key, grpc::StatusCode::OK}}) {
    grpc::ClientContext context;
    Deadline(&context);
    if (!key.empty()) context.AddMetadata("authorization", BearerValue(key));
    inference::ModelInferResponse response;
    grpc::Status status = stub->ModelInfer(&context, request, &response);
    EXPECT_EQ(status.error_code(), code) << status.error_message();
  }

  // A revoked key stops working at once.
  auto revoked = server_->SendAs(fashion_key, "DELETE",
                                 absl::StrCat("/v2/keys/", fashion.value("id", "")));
  ASSERT_TRUE(revoked.ok());
  EXPECT_EQ(revoked->status, 200) << revoked->body;
  EXPECT_EQ(server_->SendAs(fashion_key, "POST", infer, query)->status, 401);
  // The registry keeps hashes only.
  auto db = ReadFileToString(dir_->path() + "/data/registry.db");
  ASSERT_TRUE(db.ok());
  EXPECT_FALSE(absl::StrContains(*db, other_key.substr(20)));
  ExpectServing();
}

// Anyone reaching a port beyond loopback would be the server's admin
// without keys: such a server requires them, and refuses to run without.
TEST(ExposedServerTest, RequiresKeysBeyondLoopback) {
  ScopedTempDir dir;
  const std::string refused_log = dir.path() + "/refused.log";
  const std::string command =
      absl::StrCat(testing::MaitreBinary(), " serve --data-dir ", dir.path(),
                   "/refused --workers '' --http 0.0.0.0:0 --grpc 127.0.0.1:0 --control "
                   "127.0.0.1:0 --auth off > ",
                   refused_log, " 2>&1");
  EXPECT_NE(std::system(command.c_str()), 0);
  auto log = ReadFileToString(refused_log);
  ASSERT_TRUE(log.ok());
  EXPECT_TRUE(absl::StrContains(*log, "--auth off is refused on 0.0.0.0:0")) << *log;

  ServerOptions options;
  options.data_dir = dir.path() + "/data";
  options.workers = "";
  options.http = "0.0.0.0:0";
  auto started = ServerProcess::Start(options);
  ASSERT_TRUE(started.ok()) << started.status();
  std::unique_ptr<ServerProcess> server = *std::move(started);
  ASSERT_FALSE(server->admin_key().empty());
  EXPECT_EQ(server->SendAs("", "GET", "/v2/apps")->status, 401);
  EXPECT_EQ(server->Get("/v2/apps")->status, 200);  // with the admin key
  EXPECT_TRUE(server->Stop().ok());
}

// Switching to the sandbox user clears the parent-death signal; a worker
// re-arms it, so a controller killed outright leaves no worker behind.
TEST(ConfinedWorkerTest, DiesWithItsControllerEvenWhenKilled) {
  ScopedTempDir dir;
  ServerOptions options;
  options.data_dir = dir.path() + "/data";
  options.workers = "cpu-1:1";
  auto started = ServerProcess::Start(options);
  ASSERT_TRUE(started.ok()) << started.status();
  std::unique_ptr<ServerProcess> server = *std::move(started);
  auto pids = server->WorkerPids();
  ASSERT_TRUE(pids.ok() && !pids->empty()) << pids.status();
  kill(server->pid(), SIGKILL);
  EXPECT_TRUE(testing::WaitUntil(
      [&] {
        for (pid_t pid : *pids) {
          if (kill(pid, 0) == 0) return false;
        }
        return true;
      },
      60))
      << "a worker outlived its controller";
  absl::StatusOr<int> exit = server->AwaitExit();  // reaps it, finds nothing left
  ASSERT_TRUE(exit.ok()) << exit.status();
  EXPECT_TRUE(WIFSIGNALED(*exit) && WTERMSIG(*exit) == SIGKILL);
}

}  // namespace
}  // namespace maitre
