// The registration progress a client polls (the registry-backed steps are
// covered end to end in tests/e2e_variants_test.cc), and app defaults set
// through the registrar into a real registry and catalog.
#include "controller/models/registrar.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>

namespace maitre::controller {
namespace {

using ::testing::HasSubstr;

TEST(RegistrarProgressTest, AQueuedRegistrationIsVisibleAndReplacesTheLastOnesEnd) {
  Registrar registrar(Registrar::Options{});
  Upload upload;
  upload.app = "fashion";
  upload.model = "fmnist-mlp";
  EXPECT_TRUE(absl::IsNotFound(registrar.Progress("fashion", "fmnist-mlp").status()));

  // A registration that fails on the upload itself, before any registry work.
  EXPECT_TRUE(absl::IsInvalidArgument(registrar.Register(upload).status()));
  auto finished = registrar.Progress("fashion", "fmnist-mlp");
  ASSERT_TRUE(finished.ok());
  EXPECT_TRUE(finished->done);
  EXPECT_FALSE(finished->error.ok());

  // The next upload is queued: a client polling now sees it waiting, not the
  // previous failure (which it would take for its own answer).
  registrar.Queued(upload);
  auto queued = registrar.Progress("fashion", "fmnist-mlp");
  ASSERT_TRUE(queued.ok());
  EXPECT_FALSE(queued->done);
  EXPECT_TRUE(queued->error.ok());
  EXPECT_EQ(queued->step, 0);
  EXPECT_TRUE(absl::IsNotFound(registrar.Progress("fashion", "fmnist-cnn").status()));
}

TEST(RegistrarNamesTest, APipelinesNameIsRefusedBeforeAnyWork) {
  Registrar::Options options;
  options.is_pipeline = [](const std::string& name) { return name == "cascade"; };
  Registrar registrar(options);
  Upload upload;
  upload.app = "fashion";
  upload.model = "cascade";
  absl::StatusOr<Registration> taken = registrar.Register(upload);
  EXPECT_EQ(taken.status().code(), absl::StatusCode::kAlreadyExists) << taken.status();
  EXPECT_NE(taken.status().message().find("pipeline"), std::string::npos);
  upload.model = "fmnist-mlp";  // not a pipeline's: the next check speaks
  EXPECT_EQ(registrar.Register(upload).status().code(), absl::StatusCode::kInvalidArgument);
}

// A registrar over a registry in a scratch directory and a catalog; app
// defaults need nothing else.
class RegistrarAppDefaultsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "/maitre_registrar_XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    auto registry = registry::Registry::Open({dir_ + "/registry.db"});
    ASSERT_TRUE(registry.ok()) << registry.status();
    registry_ = *std::move(registry);
    Registrar::Options options;
    options.registry = registry_.get();
    options.catalog = &catalog_;
    registrar_ = std::make_unique<Registrar>(options);
  }
  void TearDown() override {
    registrar_.reset();
    registry_.reset();
    std::filesystem::remove_all(dir_);
  }

  std::string dir_;
  std::unique_ptr<registry::Registry> registry_;
  Catalog catalog_;
  std::unique_ptr<Registrar> registrar_;
};

TEST_F(RegistrarAppDefaultsTest, MaxAccuracyDropIsStoredAndReachesTheCatalog) {
  auto set = registrar_->SetAppDefaults(
      "fashion", R"({"latency_ms": 50, "min_accuracy": 0.8, "max_accuracy_drop": 0.1})");
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->name, "fashion");
  EXPECT_EQ(set->defaults.latency_ms, 50);
  EXPECT_EQ(set->max_accuracy_drop, 0.1);
  EXPECT_EQ(registry_->GetApp("fashion")->max_accuracy_drop, 0.1);
  const CatalogApp* app = catalog_.Get()->FindApp("fashion");
  ASSERT_NE(app, nullptr);
  EXPECT_EQ(app->max_accuracy_drop, 0.1);
  EXPECT_EQ(app->defaults.min_accuracy, 0.8);

  // Null clears it, as it does a default; so does leaving it out.
  set = registrar_->SetAppDefaults("fashion", R"({"latency_ms": 50, "max_accuracy_drop": null})");
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_FALSE(set->max_accuracy_drop.has_value());
  EXPECT_FALSE(catalog_.Get()->FindApp("fashion")->max_accuracy_drop.has_value());
  ASSERT_TRUE(registrar_->SetAppDefaults("fashion", R"({"max_accuracy_drop": 0})").ok());
  EXPECT_EQ(catalog_.Get()->FindApp("fashion")->max_accuracy_drop, 0.0);
  ASSERT_TRUE(registrar_->SetAppDefaults("fashion", R"({"latency_ms": 50})").ok());
  EXPECT_FALSE(registry_->GetApp("fashion")->max_accuracy_drop.has_value());
}

// An app's SL_min for the mark allocator (docs/policies.md, "Provisioning
// ahead of demand (MArk)"): stored, in the catalog, and outside (0, 1]
// refused with a message that names it.
TEST_F(RegistrarAppDefaultsTest, SlMinIsStoredAndOutsideZeroToOneRefused) {
  auto set = registrar_->SetAppDefaults("fashion", R"({"latency_ms": 50, "sl_min": 0.95})");
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->sl_min, 0.95);
  EXPECT_EQ(registry_->GetApp("fashion")->sl_min, 0.95);
  EXPECT_EQ(catalog_.Get()->FindApp("fashion")->sl_min, 0.95);
  ASSERT_TRUE(registrar_->SetAppDefaults("fashion", R"({"sl_min": 1})").ok());
  for (const char* body : {R"({"sl_min": 0})", R"({"sl_min": 1.01})", R"({"sl_min": -0.5})",
                           R"({"sl_min": "0.9"})"}) {
    auto refused = registrar_->SetAppDefaults("fashion", body);
    EXPECT_TRUE(absl::IsInvalidArgument(refused.status())) << body;
    EXPECT_THAT(refused.status().message(), HasSubstr("\"sl_min\" must be")) << body;
  }
  EXPECT_EQ(registry_->GetApp("fashion")->sl_min, 1.0);  // nothing refused was stored
  ASSERT_TRUE(registrar_->SetAppDefaults("fashion", R"({"latency_ms": 50})").ok());
  EXPECT_FALSE(catalog_.Get()->FindApp("fashion")->sl_min.has_value());
  // The registry refuses one too, whoever calls it.
  registry::AppRecord bad{"fashion"};
  bad.sl_min = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(registry_->PutApp(bad)));
}

TEST_F(RegistrarAppDefaultsTest, AMaxAccuracyDropOutsideZeroToOneIsRefusedByName) {
  ASSERT_TRUE(registrar_->SetAppDefaults("fashion", R"({"max_accuracy_drop": 0.2})").ok());
  for (const char* body : {R"({"max_accuracy_drop": 1.5})", R"({"max_accuracy_drop": -0.1})",
                           R"({"max_accuracy_drop": "0.1"})", R"({"max_accuracy_drop": true})"}) {
    auto set = registrar_->SetAppDefaults("fashion", body);
    EXPECT_TRUE(absl::IsInvalidArgument(set.status())) << body;
    EXPECT_THAT(set.status().message(), HasSubstr("\"max_accuracy_drop\" must be a number"))
        << body;
  }
  // Nothing refused was stored.
  EXPECT_EQ(registry_->GetApp("fashion")->max_accuracy_drop, 0.2);
  auto unknown = registrar_->SetAppDefaults("fashion", R"({"max_drop": 0.1})");
  EXPECT_TRUE(absl::IsInvalidArgument(unknown.status()));
  EXPECT_THAT(unknown.status().message(), HasSubstr("max_accuracy_drop"));
}

}  // namespace
}  // namespace maitre::controller
