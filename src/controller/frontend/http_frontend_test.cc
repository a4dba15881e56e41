// The app routes of the HTTP front-end (PUT /v2/apps/{app}, GET /v2/apps,
// GET /v2/apps/{app}, DELETE), routed in-process over a real registry and
// catalog, and /infer's in-flight bound and backlog shedding.
// The rest of the API is covered end to end in tests/e2e_*_test.cc.
#include "controller/frontend/http_frontend.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "absl/synchronization/notification.h"
#include "controller/registry/blob_store.h"
#include "controller/registry/registry.h"
#include "core/work_queue.h"

namespace maitre::controller {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

class AppRoutesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "/maitre_http_frontend_XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    auto registry = registry::Registry::Open({dir_ + "/registry.db"});
    ASSERT_TRUE(registry.ok()) << registry.status();
    registry_ = *std::move(registry);
    Registrar::Options registrar;
    registrar.registry = registry_.get();
    registrar.catalog = &catalog_;
    registrar_ = std::make_unique<Registrar>(registrar);
    auto blobs = registry::BlobStore::Open({dir_ + "/blobs"});
    ASSERT_TRUE(blobs.ok()) << blobs.status();
    blobs_ = *std::move(blobs);
    ModelRemover::Options remover;
    remover.registry = registry_.get();
    remover.blobs = blobs_.get();
    remover.catalog = &catalog_;
    remover.registrar = registrar_.get();
    remover_ = std::make_unique<ModelRemover>(remover);
    // The app routes use only the catalog, the registrar, the remover and
    // the control queue.
    keys_ = std::make_unique<KeyRing>(KeyRing::Options{&registry_->keys(), false});
    access_ = std::make_unique<HttpAccess>(
        keys_.get(), [](const http::PathParams&) { return std::nullopt; });
    FrontendOptions options;
    options.catalog = &catalog_;
    options.registrar = registrar_.get();
    options.remover = remover_.get();
    options.control = &control_;
    options.access = access_.get();
    AddHttpRoutes(options, router_);
    ASSERT_TRUE(router_.status().ok()) << router_.status();
  }
  void TearDown() override {
    access_.reset();
    keys_.reset();
    registrar_.reset();
    registry_.reset();
    std::filesystem::remove_all(dir_);
  }

  http::Response Send(std::string method, std::string path, std::string body = "") {
    http::Request request;
    request.method = std::move(method);
    request.path = std::move(path);
    request.body = std::move(body);
    size_t query = request.path.find('?');
    if (query != std::string::npos) {
      request.query = request.path.substr(query + 1);
      request.path.resize(query);
    }
    // Some routes answer on the control queue, after Route returns.
    std::optional<http::Response> answer;
    absl::Notification answered;
    router_.Route(std::move(request),
                  http::Responder::FromCallback([&answer, &answered](http::Response r) {
                    answer = std::move(r);
                    answered.Notify();
                  }));
    answered.WaitForNotification();
    return answer.value_or(http::Response{});
  }

  json SendJson(std::string method, std::string path, std::string body = "") {
    http::Response response = Send(std::move(method), std::move(path), std::move(body));
    EXPECT_EQ(response.status, 200) << response.body;
    return json::parse(response.body, nullptr, false);
  }

  std::string dir_;
  std::unique_ptr<registry::Registry> registry_;
  Catalog catalog_;
  std::unique_ptr<Registrar> registrar_;
  std::unique_ptr<KeyRing> keys_;
  std::unique_ptr<HttpAccess> access_;
  std::unique_ptr<registry::BlobStore> blobs_;
  std::unique_ptr<ModelRemover> remover_;
  WorkQueue control_{1};
  http::Router router_;
};

TEST_F(AppRoutesTest, MaxAccuracyDropIsSetAndShownWithTheDefaults) {
  json put = SendJson("PUT", "/v2/apps/fashion", R"({"latency_ms": 50, "max_accuracy_drop": 0.1})");
  EXPECT_EQ(put["name"], "fashion");
  EXPECT_EQ(put["defaults"], (json{{"latency_ms", 50.0}, {"max_accuracy_drop", 0.1}}));

  json list = SendJson("GET", "/v2/apps");
  ASSERT_EQ(list["apps"].size(), 1u);
  EXPECT_EQ(list["apps"][0]["defaults"]["max_accuracy_drop"], 0.1);
  json app = SendJson("GET", "/v2/apps/fashion");
  EXPECT_EQ(app["defaults"]["max_accuracy_drop"], 0.1);
  EXPECT_EQ(app["defaults"]["latency_ms"], 50.0);

  // Null clears it (and an unset one is left out, like an unset default).
  put = SendJson("PUT", "/v2/apps/fashion", R"({"latency_ms": 50, "max_accuracy_drop": null})");
  EXPECT_FALSE(put["defaults"].contains("max_accuracy_drop"));
  app = SendJson("GET", "/v2/apps/fashion");
  EXPECT_FALSE(app["defaults"].contains("max_accuracy_drop"));
  EXPECT_EQ(app["defaults"]["latency_ms"], 50.0);
}

TEST_F(AppRoutesTest, ABadMaxAccuracyDropIs400NamingTheField) {
  SendJson("PUT", "/v2/apps/fashion", R"({"max_accuracy_drop": 0.25})");
  for (const char* body : {R"({"max_accuracy_drop": 2})", R"({"max_accuracy_drop": -1})",
                           R"({"max_accuracy_drop": "half"})"}) {
    http::Response response = Send("PUT", "/v2/apps/fashion", body);
    EXPECT_EQ(response.status, 400) << body;
    EXPECT_THAT(response.body, HasSubstr("max_accuracy_drop")) << body;
  }
  json app = SendJson("GET", "/v2/apps/fashion");
  EXPECT_EQ(app["defaults"]["max_accuracy_drop"], 0.25);
}

TEST_F(AppRoutesTest, DeleteAnswersWhatWentAndTheRightCodeWhenItCannot) {
  SendJson("PUT", "/v2/apps/fashion", R"({"latency_ms": 50})");
  SendJson("PUT", "/v2/apps/audio", R"({"latency_ms": 50})");

  EXPECT_EQ(Send("DELETE", "/v2/apps/nope").status, 404);
  EXPECT_EQ(Send("DELETE", "/v2/apps/fashion/models/nope").status, 404);
  http::Response bad = Send("DELETE", "/v2/apps/fashion?force=yes");
  EXPECT_EQ(bad.status, 400);
  EXPECT_THAT(bad.body, HasSubstr("force must be true or false"));

  // A registration under way is a conflict (409, not the 422 of other
  // failed preconditions), and nothing is deleted.
  Upload upload;
  upload.app = "fashion";
  upload.model = "m";
  registrar_->Queued(upload);
  http::Response conflict = Send("DELETE", "/v2/apps/fashion?force=true");
  EXPECT_EQ(conflict.status, 409) << conflict.body;
  EXPECT_THAT(conflict.body, HasSubstr("is being registered"));
  EXPECT_EQ(Send("GET", "/v2/apps/fashion").status, 200);

  json deleted = SendJson("DELETE", "/v2/apps/audio");
  EXPECT_EQ(deleted["app"], "audio");
  EXPECT_EQ(deleted["app_deleted"], true);
  EXPECT_EQ(deleted["models"], json::array());
  EXPECT_EQ(Send("GET", "/v2/apps/audio").status, 404);
  EXPECT_EQ(Send("DELETE", "/v2/apps/audio").status, 404);
}

// With every permit of the in-flight bound taken, /infer is refused 429
// before its body is decoded: a body that is not JSON gets 429, not 400.
TEST_F(AppRoutesTest, AFullInFlightBoundRefusesInferBeforeTheBodyIsDecoded) {
  InFlightLimit limit(1);
  FrontendOptions options;
  options.in_flight = &limit;
  options.access = access_.get();
  http::Router router;
  AddHttpRoutes(options, router);
  ASSERT_TRUE(router.status().ok()) << router.status();
  auto send = [&router] {
    http::Request request;
    request.method = "POST";
    request.path = "/v2/models/m/infer";
    request.body = "not json";
    std::optional<http::Response> answer;
    router.Route(std::move(request), http::Responder::FromCallback(
                                         [&answer](http::Response r) { answer = std::move(r); }));
    EXPECT_TRUE(answer.has_value());
    return answer.value_or(http::Response{});
  };
  InFlightLimit::Permit taken = limit.TryAcquire();
  http::Response refused = send();
  EXPECT_EQ(refused.status, 429);
  EXPECT_THAT(refused.body, HasSubstr("--max-in-flight"));
  taken.Release();
  http::Response decoded = send();
  EXPECT_EQ(decoded.status, 400) << decoded.body;
  EXPECT_EQ(limit.in_flight(), 0);  // the refused and the malformed hold nothing
}

TEST_F(AppRoutesTest, AStandingBacklogShedsInferBeforeTheBodyIsDecoded) {
  constexpr Nanos kMs = 1'000'000;
  ManualClock clock(1000 * kMs);
  BacklogShedder shedder({.target = 5 * kMs, .interval = 100 * kMs});
  FrontendOptions options;
  options.shedder = &shedder;
  options.clock = &clock;
  options.access = access_.get();
  http::Router router;
  AddHttpRoutes(options, router);
  ASSERT_TRUE(router.status().ok()) << router.status();
  // A malformed body: 400 once decoded, so a 429 says it never was.
  auto send = [&](Nanos waited) {
    http::Request request;
    request.method = "POST";
    request.path = "/v2/models/m/infer";
    request.body = "not json";
    request.arrived = clock.Now() - waited;
    std::optional<http::Response> answer;
    router.Route(std::move(request), http::Responder::FromCallback(
                                         [&answer](http::Response r) { answer = std::move(r); }));
    EXPECT_TRUE(answer.has_value());
    return answer.value_or(http::Response{});
  };
  // A whole interval in which every query waited 30 ms: a standing backlog,
  // judged when the interval ends; until then each query is decoded.
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(send(30 * kMs).status, 400);
    clock.Advance(10 * kMs);
  }
  http::Response shed = send(30 * kMs);
  EXPECT_EQ(shed.status, 429);
  EXPECT_THAT(shed.body, HasSubstr("waited 30 ms in the front end's backlog"));
  EXPECT_THAT(shed.body, HasSubstr("target of 5 ms"));
  EXPECT_EQ(send(2 * kMs).status, 400);  // a query within the target is decoded
  // An interval in which no query waited past the target shows the backlog
  // gone: from the next interval on, nothing is shed.
  clock.Advance(100 * kMs);
  EXPECT_EQ(send(2 * kMs).status, 400);
  clock.Advance(100 * kMs);
  EXPECT_EQ(send(30 * kMs).status, 400);
}

}  // namespace
}  // namespace maitre::controller
