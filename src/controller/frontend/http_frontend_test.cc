// The app routes of the HTTP front-end (PUT /v2/apps/{app}, GET /v2/apps,
// GET /v2/apps/{app}), routed in-process over a real registry and catalog,
// and /infer's in-flight bound.
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

#include "controller/registry/registry.h"

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
    // The app routes use only the catalog and the registrar.
    FrontendOptions options;
    options.catalog = &catalog_;
    options.registrar = registrar_.get();
    AddHttpRoutes(options, router_);
    ASSERT_TRUE(router_.status().ok()) << router_.status();
  }
  void TearDown() override {
    registrar_.reset();
    registry_.reset();
    std::filesystem::remove_all(dir_);
  }

  http::Response Send(std::string method, std::string path, std::string body = "") {
    http::Request request;
    request.method = std::move(method);
    request.path = std::move(path);
    request.body = std::move(body);
    std::optional<http::Response> answer;
    router_.Route(std::move(request), http::Responder::FromCallback(
                                          [&answer](http::Response r) { answer = std::move(r); }));
    EXPECT_TRUE(answer.has_value());
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

// With every permit of the in-flight bound taken, /infer is refused 429
// before its body is decoded: a body that is not JSON gets 429, not 400.
TEST(InferInFlightTest, AFullBoundRefusesBeforeTheBodyIsDecoded) {
  InFlightLimit limit(1);
  FrontendOptions options;
  options.in_flight = &limit;
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

}  // namespace
}  // namespace maitre::controller
