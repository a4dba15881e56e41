#include "controller/access/http_access.h"

#include <memory>
#include <optional>
#include <string>

#include "controller/registry/registry.h"
#include "controller/registry/registry_test_util.h"
#include "core/secret_token.h"
#include "gtest/gtest.h"

namespace maitre::controller {
namespace {

using registry::test_util::TempDir;

// Routes one request through a guarded echo handler; returns the status
// and, when the handler ran, the caller it was given.
struct Outcome {
  int status = 0;
  std::optional<Principal> caller;
  std::string www_authenticate;
};

class HttpAccessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto opened = registry::Registry::Open({tmp_.File("registry.db")});
    ASSERT_TRUE(opened.ok()) << opened.status();
    registry_ = *std::move(opened);
    ring_ = std::make_unique<KeyRing>(KeyRing::Options{&registry_->keys(), true});
    // "mnist-mlp" belongs to app "fashion"; other models are unknown.
    access_ = std::make_unique<HttpAccess>(
        ring_.get(), [](const http::PathParams& p) -> std::optional<std::string> {
          if (p.find("model")->second == "mnist-mlp") return "fashion";
          return std::nullopt;
        });
    const Principal admin{"", true, ""};
    admin_key_ = ring_->Create(admin, "", "")->key;
    fashion_key_ = ring_->Create(admin, "fashion", "")->key;
    digits_key_ = ring_->Create(admin, "digits", "")->key;
  }

  Outcome Call(Reach reach, http::PathParams params, const std::string& key) {
    Outcome outcome;
    http::Handler handler = access_->Guard(
        reach, [&outcome](http::Request&&, const http::PathParams&, const Principal& caller,
                          http::Responder respond) {
          outcome.caller = caller;
          std::move(respond)(http::Response::Json(200, "{}"));
        });
    http::Request request;
    if (!key.empty()) request.headers.push_back({"Authorization", BearerValue(key)});
    handler(std::move(request), params, http::Responder::FromCallback([&](http::Response r) {
              outcome.status = r.status;
              for (const auto& h : r.headers) {
                if (h.name == "WWW-Authenticate") outcome.www_authenticate = h.value;
              }
            }));
    return outcome;
  }

  TempDir tmp_;
  std::unique_ptr<registry::Registry> registry_;
  std::unique_ptr<KeyRing> ring_;
  std::unique_ptr<HttpAccess> access_;
  std::string admin_key_, fashion_key_, digits_key_;
};

TEST_F(HttpAccessTest, PublicRoutesNeedNoKey) {
  EXPECT_EQ(Call(Reach::kPublic, {}, "").status, 200);
}

TEST_F(HttpAccessTest, NoKeyIs401WithAChallenge) {
  for (Reach reach : {Reach::kAnyKey, Reach::kAdmin, Reach::kApp, Reach::kModel}) {
    Outcome o = Call(reach, {{"app", "fashion"}, {"model", "mnist-mlp"}}, "");
    EXPECT_EQ(o.status, 401);
    EXPECT_FALSE(o.caller.has_value());
    EXPECT_EQ(o.www_authenticate, "Bearer realm=\"maitre\"");
  }
}

TEST_F(HttpAccessTest, AppRoutesAdmitTheirAppsKeyAndAdminsOnly) {
  EXPECT_EQ(Call(Reach::kApp, {{"app", "fashion"}}, fashion_key_).status, 200);
  EXPECT_EQ(Call(Reach::kApp, {{"app", "fashion"}}, admin_key_).status, 200);
  EXPECT_EQ(Call(Reach::kApp, {{"app", "fashion"}}, digits_key_).status, 403);
}

TEST_F(HttpAccessTest, ModelRoutesFollowTheModelsApp) {
  EXPECT_EQ(Call(Reach::kModel, {{"model", "mnist-mlp"}}, fashion_key_).status, 200);
  EXPECT_EQ(Call(Reach::kModel, {{"model", "mnist-mlp"}}, digits_key_).status, 403);
  // Unknown models reach the handler, which answers 404.
  EXPECT_EQ(Call(Reach::kModel, {{"model", "nope"}}, digits_key_).status, 200);
}

TEST_F(HttpAccessTest, AdminRoutesRefuseAppKeys) {
  EXPECT_EQ(Call(Reach::kAdmin, {}, fashion_key_).status, 403);
  Outcome admin = Call(Reach::kAdmin, {}, admin_key_);
  EXPECT_EQ(admin.status, 200);
  ASSERT_TRUE(admin.caller.has_value());
  EXPECT_TRUE(admin.caller->admin);
}

TEST_F(HttpAccessTest, AnyKeyRoutesAreToldWhoCalls) {
  Outcome o = Call(Reach::kAnyKey, {}, fashion_key_);
  EXPECT_EQ(o.status, 200);
  ASSERT_TRUE(o.caller.has_value());
  EXPECT_EQ(o.caller->app, "fashion");
}

}  // namespace
}  // namespace maitre::controller
