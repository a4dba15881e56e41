// Deleting models and apps over a real registry, blob store and catalog; the
// unloading of instances on real workers is in
// tests/e2e_model_lifecycle_test.cc.
#include "controller/models/model_removal.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "controller/pipelines/pipeline_book.h"
#include "controller/registry/registry_test_util.h"

namespace maitre::controller {
namespace {

using registry::test_util::TempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

class ModelRemovalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_ = *registry::Registry::Open({tmp_.File("registry.db")});
    blobs_ = *registry::BlobStore::Open({tmp_.File("blobs")});
    Registrar::Options registrar;
    registrar.registry = registry_.get();
    registrar_ = std::make_unique<Registrar>(registrar);
    ModelRemover::Options options;
    options.registry = registry_.get();
    options.blobs = blobs_.get();
    options.catalog = &catalog_;
    options.registrar = registrar_.get();
    options.live_jobs = [this](const std::string& app, const std::string& model) {
      std::vector<std::string> ids;
      for (const auto& [id, job] : live_jobs_) {
        if (job.first == app && (model.empty() || job.second == model)) ids.push_back(id);
      }
      return ids;
    };
    options.cancel_job = [this](const std::string& id) {
      live_jobs_.erase(id);
      return absl::OkStatus();
    };
    book_ = std::make_unique<PipelineBook>(
        PipelineBook::Options{&registry_->pipelines(), &catalog_, [] { return 1; }, {}});
    options.pipelines_using = [this](const std::string& app, const std::string& model) {
      return book_->PipelinesUsing(app, model);
    };
    remover_ = std::make_unique<ModelRemover>(options);
  }

  // Stores `files` as blobs and registers `name` with the first as its
  // source and a variant per further file.
  void Register(const std::string& app, const std::string& name,
                const std::vector<std::string>& files) {
    registry::ModelRecord m;
    m.app = app;
    m.name = name;
    m.spec = registry::test_util::SimpleSpec();
    m.source_blob = *blobs_->Put(files[0]);
    std::vector<registry::VariantRecord> variants;
    for (size_t i = 0; i < files.size(); ++i) {
      registry::VariantRecord v = registry::test_util::MakeVariant(name, "v" + std::to_string(i));
      v.blob = *blobs_->Put(files[i]);
      variants.push_back(v);
    }
    ASSERT_TRUE(registry_->RegisterModel(m, variants).ok());
    ASSERT_TRUE(catalog_.Reload(*registry_).ok());
  }

  TempDir tmp_;
  std::unique_ptr<registry::Registry> registry_;
  std::unique_ptr<registry::BlobStore> blobs_;
  Catalog catalog_;
  std::unique_ptr<Registrar> registrar_;
  std::map<std::string, std::pair<std::string, std::string>> live_jobs_;  // id -> app, model
  std::unique_ptr<PipelineBook> book_;
  std::unique_ptr<ModelRemover> remover_;
};

TEST_F(ModelRemovalTest, DeletingAModelRemovesItsOwnFilesAndKeepsSharedOnes) {
  Register("fashion", "a", {"a-source", "shared", "a-int8"});
  Register("fashion", "b", {"shared"});
  auto removal = remover_->DeleteModel("fashion", "a", false);
  ASSERT_TRUE(removal.ok()) << removal.status();
  EXPECT_THAT(removal->models, ElementsAre("a"));
  EXPECT_THAT(removal->variants, ElementsAre("a:v0", "a:v1", "a:v2"));
  EXPECT_FALSE(removal->app_removed);
  EXPECT_EQ(removal->blobs_removed, 2);
  EXPECT_EQ(removal->bytes_freed, 8 + 6);
  EXPECT_FALSE(blobs_->Has(Sha256Hex("a-source")));
  EXPECT_FALSE(blobs_->Has(Sha256Hex("a-int8")));
  EXPECT_TRUE(blobs_->Has(Sha256Hex("shared")));
  EXPECT_TRUE(absl::IsNotFound(registry_->GetModel("a").status()));
  EXPECT_EQ(catalog_.Get()->FindModel("a"), nullptr);
  EXPECT_NE(catalog_.Get()->FindModel("b"), nullptr);
  EXPECT_TRUE(registry_->GetApp("fashion").ok());
}

TEST_F(ModelRemovalTest, UnknownAppsAndOtherAppsModelsAreNotFound) {
  Register("fashion", "a", {"a"});
  Register("audio", "c", {"c"});
  absl::Status s = remover_->DeleteModel("fashion", "c", false).status();
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("app 'fashion' has no model 'c'"));
  s = remover_->DeleteModel("nope", "a", false).status();
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("no app named \"nope\""));
  EXPECT_TRUE(absl::IsNotFound(remover_->DeleteApp("nope", false).status()));
  EXPECT_TRUE(registry_->GetModel("c").ok());
  EXPECT_TRUE(blobs_->Has(Sha256Hex("c")));
}

TEST_F(ModelRemovalTest, DeletingAnAppTakesEveryModelAndLeavesOtherApps) {
  Register("fashion", "a", {"a", "shared"});
  Register("fashion", "b", {"b"});
  Register("audio", "c", {"c", "shared"});
  auto removal = remover_->DeleteApp("fashion", false);
  ASSERT_TRUE(removal.ok()) << removal.status();
  EXPECT_TRUE(removal->app_removed);
  EXPECT_THAT(removal->models, ElementsAre("a", "b"));
  EXPECT_EQ(removal->blobs_removed, 2);
  EXPECT_TRUE(absl::IsNotFound(registry_->GetApp("fashion").status()));
  EXPECT_EQ(catalog_.Get()->FindApp("fashion"), nullptr);
  EXPECT_TRUE(blobs_->Has(Sha256Hex("shared")));
  EXPECT_TRUE(blobs_->Has(Sha256Hex("c")));
  EXPECT_FALSE(blobs_->Has(Sha256Hex("a")));
}

TEST_F(ModelRemovalTest, ARegistrationUnderWayIsAConflict) {
  Register("fashion", "a", {"a"});
  Upload upload;
  upload.app = "fashion";
  upload.model = "a";
  registrar_->Queued(upload);
  absl::Status s = remover_->DeleteModel("fashion", "a", true).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("is being registered"));
  EXPECT_TRUE(absl::IsFailedPrecondition(remover_->DeleteApp("fashion", true).status()));
  EXPECT_TRUE(registry_->GetModel("a").ok());
  EXPECT_TRUE(blobs_->Has(Sha256Hex("a")));
}

TEST_F(ModelRemovalTest, LiveJobsAreAConflictUnlessForcedWhichCancelsThem) {
  Register("fashion", "a", {"a"});
  Register("fashion", "b", {"b"});
  live_jobs_["job-1"] = {"fashion", "a"};
  absl::Status s = remover_->DeleteModel("fashion", "a", false).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("job-1"));
  EXPECT_THAT(s.message(), HasSubstr("force=true"));
  EXPECT_TRUE(registry_->GetModel("a").ok());

  // A job on another model is not in the way of this one.
  ASSERT_TRUE(remover_->DeleteModel("fashion", "b", false).ok());

  auto forced = remover_->DeleteModel("fashion", "a", true);
  ASSERT_TRUE(forced.ok()) << forced.status();
  EXPECT_THAT(forced->cancelled_jobs, ElementsAre("job-1"));
  EXPECT_TRUE(live_jobs_.empty());
  EXPECT_TRUE(absl::IsNotFound(registry_->GetModel("a").status()));
}

TEST_F(ModelRemovalTest, AModelARegisteredPipelineUsesIsAConflictEvenForced) {
  Register("fashion", "a", {"a"});
  Register("fashion", "b", {"b"});
  Register("fashion", "c", {"c"});
  ASSERT_TRUE(book_->Register("fashion", "cascade", R"({
      "vertices": [{"name": "fast", "model": "a", "inputs": {"input": "$image"}},
                   {"name": "slow", "model": "b", "inputs": {"input": "$image"}}],
      "edges": [{"from": "fast", "to": "slow"}],
      "outputs": {"logits": ["slow.logits"]}})")
                  .ok());
  for (bool force : {false, true}) {
    absl::Status s = remover_->DeleteModel("fashion", "b", force).status();
    EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
    EXPECT_THAT(s.message(), HasSubstr("model 'b' is used by pipeline(s) cascade"));
  }
  EXPECT_TRUE(registry_->GetModel("b").ok());
  EXPECT_TRUE(blobs_->Has(Sha256Hex("b")));
  // A model no pipeline names goes; once the pipeline is deleted, so do its.
  ASSERT_TRUE(remover_->DeleteModel("fashion", "c", false).ok());
  ASSERT_TRUE(book_->Delete("fashion", "cascade").ok());
  ASSERT_TRUE(remover_->DeleteModel("fashion", "b", false).ok());
  // The app's deletion is not refused: its pipelines go with it.
  ASSERT_TRUE(book_->Register("fashion", "solo", R"({
      "vertices": [{"name": "only", "model": "a", "inputs": {"input": "$image"}}],
      "outputs": {"logits": ["only.logits"]}})")
                  .ok());
  EXPECT_TRUE(remover_->DeleteApp("fashion", false).ok());
}

}  // namespace
}  // namespace maitre::controller
