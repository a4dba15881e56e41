// The job routes through a real Router, with a runner whose serving path
// answers at once.
#include "controller/jobs/job_http.h"

#include <filesystem>
#include <future>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "controller/registry/registry_test_util.h"
#include "core/file_util.h"
#include "core/secret_token.h"
#include "core/npz.h"
#include "runtime/testing/zoo.h"

namespace maitre::jobs {
namespace {

using nlohmann::json;
using runtime::testing::ScopedTempDir;
using ::testing::HasSubstr;

class JobHttpTest : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_ = *registry::Registry::Open({dir_.path() + "/registry.db"});
    registry::ModelRecord model;
    model.app = "fashion";
    model.name = "mlp";
    model.spec.inputs.push_back({"input", DataType::kFp32, {-1, 2}});
    model.spec.outputs.push_back({"logits", DataType::kFp32, {-1, 2}});
    model.source_blob = registry::test_util::FakeBlob("mlp");
    ASSERT_TRUE(
        registry_->RegisterModel(model, {registry::test_util::MakeVariant("mlp", "torch")}).ok());
    ASSERT_TRUE(catalog_.Reload(*registry_).ok());
    JobRunner::Options o;
    o.store = &registry_->jobs();
    o.catalog = &catalog_;
    o.jobs_dir = dir_.path();
    o.infer = [](controller::InferTarget, controller::InferRequest request, Nanos,
                 controller::InferDone done) {
      controller::InferResponse response;
      Tensor logits = request.inputs[0];
      logits.name = "logits";
      response.outputs.push_back(std::move(logits));
      std::move(done)(std::move(response));
    };
    o.clock = &clock_;
    runner_ = *JobRunner::Create(std::move(o));
    // Keys are required, as on a server beyond loopback: the tests send the
    // admin key unless they say otherwise.
    keys_ = std::make_unique<controller::KeyRing>(
        controller::KeyRing::Options{&registry_->keys(), true});
    access_ = std::make_unique<controller::HttpAccess>(
        keys_.get(), [](const http::PathParams&) { return std::nullopt; });
    const controller::Principal admin{"", true, ""};
    admin_key_ = keys_->Create(admin, "", "")->key;
    other_app_key_ = keys_->Create(admin, "digits", "")->key;
    AddJobRoutes(router_, runner_.get(), *access_);
    ASSERT_TRUE(router_.status().ok());

    Tensor inputs{"inputs", DataType::kFp32, {3, 2}, {}};
    std::vector<float> values{1, 0, 0, 1, 1, 0};
    inputs.data.assign(reinterpret_cast<const char*>(values.data()), values.size() * 4);
    Tensor labels{"labels", DataType::kInt64, {3}, {}};
    std::vector<int64_t> label_values{0, 1, 1};
    labels.data.assign(reinterpret_cast<const char*>(label_values.data()), 3 * 8);
    input_ = dir_.path() + "/in.npz";
    ASSERT_TRUE(WriteFileAtomically(input_, WriteNpz({inputs, labels})).ok());
  }

  http::Response Send(const std::string& method, const std::string& path, std::string body = "",
                      const std::string* key = nullptr) {
    http::Request request;
    request.method = method;
    request.path = path;
    request.body = std::move(body);
    if (key == nullptr) key = &admin_key_;
    if (!key->empty()) request.headers.push_back({"Authorization", BearerValue(*key)});
    auto promise = std::make_shared<std::promise<http::Response>>();
    auto answer = promise->get_future();
    router_.Route(std::move(request), http::Responder::FromCallback(
                                          [promise](http::Response r) { promise->set_value(r); }));
    return answer.get();
  }

  std::string JobBody(const std::string& output) {
    return json{{"input", input_},
                {"output", output},
                {"batch_size", 2},
                {"parameters", {{"min_accuracy", 0.5}}}}
        .dump();
  }

  ScopedTempDir dir_;
  std::unique_ptr<registry::Registry> registry_;
  controller::Catalog catalog_;
  ManualClock clock_;
  std::unique_ptr<JobRunner> runner_;
  std::unique_ptr<controller::KeyRing> keys_;
  std::unique_ptr<controller::HttpAccess> access_;
  std::string admin_key_, other_app_key_;
  http::Router router_;
  std::string input_;
};

TEST_F(JobHttpTest, SubmitFollowAndList) {
  http::Response created = Send("POST", "/v2/apps/fashion/jobs", JobBody(dir_.path() + "/out"));
  ASSERT_EQ(created.status, 201) << created.body;
  json job = json::parse(created.body);
  std::string id = job["id"];
  EXPECT_EQ(created.GetHeader("Location"), "/v2/jobs/" + id);
  EXPECT_EQ(job["state"], "queued");
  EXPECT_EQ(job["total"], 3);
  EXPECT_EQ(job["done"], 0);
  EXPECT_EQ(job["batch_size"], 2);
  EXPECT_EQ(job["parameters"]["min_accuracy"], 0.5);
  EXPECT_EQ(job["files"][0]["output"], dir_.path() + "/out/in.npz");

  for (int i = 0; i < 4; ++i) runner_->Step();
  http::Response got = Send("GET", "/v2/jobs/" + id);
  ASSERT_EQ(got.status, 200);
  job = json::parse(got.body);
  EXPECT_EQ(job["state"], "succeeded");
  EXPECT_EQ(job["done"], 3);
  EXPECT_EQ(job["progress"], 1.0);
  // The echoed input is its own argmax: [1,0] -> 0, [0,1] -> 1, [1,0] -> 0.
  EXPECT_NEAR(job["accuracy"].get<double>(), 2.0 / 3, 1e-9);
  EXPECT_TRUE(job.contains("created_unix_ms"));
  EXPECT_TRUE(job.contains("finished_unix_ms"));

  json list = json::parse(Send("GET", "/v2/jobs").body);
  ASSERT_EQ(list["jobs"].size(), 1u);
  EXPECT_EQ(list["jobs"][0]["id"], id);

  http::Response cancel = Send("POST", "/v2/jobs/" + id + "/cancel");
  EXPECT_EQ(cancel.status, 409);
  EXPECT_THAT(cancel.body, HasSubstr("succeeded"));
}

TEST_F(JobHttpTest, CancelALiveJob) {
  http::Response created = Send("POST", "/v2/apps/fashion/jobs", JobBody(dir_.path() + "/out"));
  ASSERT_EQ(created.status, 201) << created.body;
  std::string id = json::parse(created.body)["id"];
  http::Response cancel = Send("POST", "/v2/jobs/" + id + "/cancel");
  ASSERT_EQ(cancel.status, 200) << cancel.body;
  EXPECT_EQ(json::parse(cancel.body)["state"], "cancelled");
}

TEST_F(JobHttpTest, AnotherAppsKeyNeitherSeesNorTouchesTheJob) {
  http::Response created = Send("POST", "/v2/apps/fashion/jobs", JobBody(dir_.path() + "/out"));
  ASSERT_EQ(created.status, 201) << created.body;
  std::string id = json::parse(created.body)["id"];
  const std::string none;
  EXPECT_EQ(Send("GET", "/v2/jobs", "", &none).status, 401);
  EXPECT_EQ(Send("POST", "/v2/apps/fashion/jobs", JobBody(dir_.path() + "/out"), &other_app_key_)
                .status,
            403);
  EXPECT_EQ(json::parse(Send("GET", "/v2/jobs", "", &other_app_key_).body)["jobs"].size(), 0u);
  http::Response peek = Send("GET", "/v2/jobs/" + id, "", &other_app_key_);
  EXPECT_EQ(peek.status, 403);
  EXPECT_THAT(peek.body, HasSubstr("'fashion'"));
  EXPECT_EQ(Send("POST", "/v2/jobs/" + id + "/cancel", "", &other_app_key_).status, 403);
  EXPECT_EQ(json::parse(Send("GET", "/v2/jobs/" + id).body)["state"], "queued");
}

TEST_F(JobHttpTest, BadRequestsGetTheRightStatus) {
  struct Row {
    const char* path;
    std::string body;
    int status;
    const char* says;
  };
  std::string out = dir_.path() + "/out";
  const Row rows[] = {
      {"/v2/apps/fashion/jobs", "{", 400, "JSON object"},
      {"/v2/apps/fashion/jobs", json{{"output", out}}.dump(), 400, "needs \"input\""},
      {"/v2/apps/fashion/jobs", json{{"input", input_}}.dump(), 400, "needs \"output\""},
      {"/v2/apps/fashion/jobs", json{{"input", 5}, {"output", out}}.dump(), 400, "string"},
      {"/v2/apps/fashion/jobs", json{{"input", input_}, {"output", out}, {"batch_size", -1}}.dump(),
       400, "batch_size"},
      {"/v2/apps/fashion/jobs",
       json{{"input", input_}, {"output", out}, {"parameters", {{"latency_ms", "x"}}}}.dump(), 400,
       "latency_ms"},
      {"/v2/apps/nope/jobs", JobBody(out), 404, "no app named 'nope'"},
      {"/v2/apps/fashion/jobs", json{{"input", input_}, {"output", out}, {"model", "cnn"}}.dump(),
       404, "no model"},
      {"/v2/apps/fashion/jobs",
       json{{"input", dir_.path() + "/missing.npz"}, {"output", out}}.dump(), 400,
       "does not exist"},
      {"/v2/apps/fashion/jobs", json{{"input", input_}, {"output", input_}}.dump(), 400,
       "not a directory"},
      // Nothing outside the jobs directory, however it is named.
      {"/v2/apps/fashion/jobs", json{{"input", "/etc/passwd"}, {"output", out}}.dump(), 403,
       "jobs directory"},
      {"/v2/apps/fashion/jobs", json{{"input", "../../etc/passwd"}, {"output", out}}.dump(), 403,
       "jobs directory"},
      {"/v2/apps/fashion/jobs", json{{"input", input_}, {"output", "/tmp/elsewhere"}}.dump(), 403,
       "jobs directory"},
      {"/v2/apps/fashion/jobs", json{{"input", "link-out/passwd"}, {"output", out}}.dump(), 403,
       "jobs directory"},
  };
  std::filesystem::create_directory_symlink("/etc", dir_.path() + "/link-out");
  for (const Row& row : rows) {
    http::Response r = Send("POST", row.path, row.body);
    EXPECT_EQ(r.status, row.status) << row.body << " -> " << r.body;
    EXPECT_THAT(json::parse(r.body)["error"].get<std::string>(), HasSubstr(row.says)) << row.body;
  }
  EXPECT_EQ(Send("GET", "/v2/jobs/job-000404").status, 404);
  EXPECT_EQ(Send("POST", "/v2/jobs/job-000404/cancel").status, 404);
  EXPECT_EQ(json::parse(Send("GET", "/v2/jobs").body)["jobs"].size(), 0u);
}

}  // namespace
}  // namespace maitre::jobs
