// Applying a plan to a registered pipeline over a real registry and
// catalog: the checks and their errors, the plan kept across a restart, a
// replaced spec losing its plan, and which pipelines name a model.
#include "controller/pipelines/pipeline_book.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_replace.h"
#include "controller/registry/registry_test_util.h"

namespace maitre::controller {
namespace {

using registry::test_util::TempDir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kSpec[] = R"({
    "vertices": [{"name": "fast", "model": "a", "inputs": {"input": "$image"}},
                 {"name": "slow", "model": "b", "inputs": {"input": "$image"}}],
    "edges": [{"from": "fast", "to": "slow"}],
    "outputs": {"logits": ["slow.logits", "fast.logits"]}})";

constexpr char kPlan[] = R"({
  "plan": {"stages": [{"stage": "fast", "hardware": "cpu-1", "batch": 4, "replicas": 1},
                      {"stage": "slow", "hardware": "cpu-2", "batch": 2, "replicas": 2}]},
  "tuner": {"windows_s": [0.05, 60], "planned_rates_qps": [200, 50],
            "stages": [{"stage": "fast", "mu_qps": 400, "scale_factor": 1, "rho": 0.3},
                       {"stage": "slow", "mu_qps": 20, "scale_factor": 0.3, "rho": 0.6}]}})";

class PipelineBookTest : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_ = *registry::Registry::Open({tmp_.File("registry.db")});
    for (const char* name : {"a", "b"}) {
      ASSERT_TRUE(registry_
                      ->RegisterModel(registry::test_util::MakeModel("fashion", name, name),
                                      {registry::test_util::MakeVariant(name, "v")})
                      .ok());
    }
    ASSERT_TRUE(catalog_.Reload(*registry_).ok());
    Open();
    ASSERT_TRUE(book_->Register("fashion", "cascade", kSpec).ok());
  }
  void Open() {
    PipelineBook::Options options{
        &registry_->pipelines(), &catalog_, [] { return 1; }, {"cpu-1", "cpu-2"}};
    options.plan_changed = [this](std::shared_ptr<const pipeline::AppliedPlan> plan) {
      // The batch in force for the plan's first stage once the book is told.
      changes_.push_back(book_->PlannedBatch({plan->stages[0].model, plan->stages[0].variant}));
    };
    book_ = std::make_unique<PipelineBook>(std::move(options));
    book_->Load();
  }
  static std::string Plan(const std::string& from, const std::string& to) {
    return absl::StrReplaceAll(kPlan, {{from, to}});
  }

  TempDir tmp_;
  std::unique_ptr<registry::Registry> registry_;
  Catalog catalog_;
  std::unique_ptr<PipelineBook> book_;
  std::vector<int32_t> changes_;  // PlannedBatch of the first stage, at each plan_changed
};

TEST_F(PipelineBookTest, APlanIsCheckedAppliedAndKeptAcrossARestart) {
  auto applied = book_->ApplyPlan("fashion", "cascade", kPlan);
  ASSERT_TRUE(applied.ok()) << applied.status();
  ASSERT_NE((*applied)->plan, nullptr);
  EXPECT_EQ((*applied)->plan->stages[1].model, "b");
  EXPECT_NE((*applied)->arrivals, nullptr);
  const int64_t first = (*applied)->plan_id;
  EXPECT_GT(first, 0);
  EXPECT_EQ(book_->Find("cascade")->plan_id, first);
  // Applied again: a new plan, which starts the tuner over.
  auto again = book_->ApplyPlan("fashion", "cascade", kPlan);
  ASSERT_TRUE(again.ok());
  EXPECT_NE((*again)->plan_id, first);
  Open();
  auto back = book_->Find("cascade");
  ASSERT_NE(back, nullptr);
  ASSERT_NE(back->plan, nullptr);
  EXPECT_EQ(back->plan->tuner.stages[1].replicas, 2);
  EXPECT_EQ(back->plan_json, kPlan);
  // A replaced spec loses its plan, made for the spec it replaced.
  ASSERT_TRUE(book_->Register("fashion", "cascade", kSpec).ok());
  EXPECT_EQ(book_->Find("cascade")->plan, nullptr);
  Open();
  EXPECT_EQ(book_->Find("cascade")->plan, nullptr);
}

TEST_F(PipelineBookTest, BadPlansAreRefusedAndChangeNothing) {
  absl::Status s = book_->ApplyPlan("fashion", "nope", kPlan).status();
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  EXPECT_TRUE(absl::IsNotFound(book_->ApplyPlan("other", "cascade", kPlan).status()));
  s = book_->ApplyPlan("fashion", "cascade", Plan("\"slow\"", "\"slower\"")).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("stage \"slower\""));
  s = book_->ApplyPlan("fashion", "cascade", Plan("\"cpu-2\"", "\"gpu\"")).status();
  EXPECT_THAT(s.message(), HasSubstr("unknown worker type \"gpu\""));
  s = book_->ApplyPlan("fashion", "cascade", Plan("\"replicas\": 2", "\"replicas\": -1")).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("\"replicas\""));
  EXPECT_EQ(book_->Find("cascade")->plan, nullptr);
  Open();
  EXPECT_EQ(book_->Find("cascade")->plan, nullptr);
}

TEST_F(PipelineBookTest, PipelinesUsingNamesThoseOfTheAppThatNameTheModel) {
  EXPECT_THAT(book_->PipelinesUsing("fashion", "b"), ElementsAre("cascade"));
  EXPECT_TRUE(book_->PipelinesUsing("other", "b").empty());
  EXPECT_TRUE(book_->PipelinesUsing("fashion", "c").empty());
}

TEST_F(PipelineBookTest, APlansBatchesLiftWhenThePlanGoesWithItsSpecPipelineOrApp) {
  // The instances serving a stage are capped at the plan's batch; each way
  // the plan can go tells the server, by then with no cap in force, so
  // that it lifts the caps of the instances already loaded.
  const std::string planned = Plan("\"stage\": \"fast\", \"hardware\": \"cpu-1\"",
                                   "\"stage\": \"fast\", \"variant\": \"v\", "
                                   "\"hardware\": \"cpu-1\"");
  ASSERT_TRUE(book_->ApplyPlan("fashion", "cascade", planned).ok());
  EXPECT_THAT(changes_, ElementsAre(4));
  ASSERT_TRUE(book_->Register("fashion", "cascade", kSpec).ok());  // a replaced spec
  EXPECT_THAT(changes_, ElementsAre(4, 0));
  ASSERT_TRUE(book_->Register("fashion", "cascade", kSpec).ok());  // no plan to lose
  EXPECT_THAT(changes_, ElementsAre(4, 0));
  ASSERT_TRUE(book_->ApplyPlan("fashion", "cascade", planned).ok());
  ASSERT_TRUE(book_->Delete("fashion", "cascade").ok());
  EXPECT_THAT(changes_, ElementsAre(4, 0, 4, 0));
  ASSERT_TRUE(book_->Register("fashion", "cascade", kSpec).ok());
  ASSERT_TRUE(book_->ApplyPlan("fashion", "cascade", planned).ok());
  ASSERT_TRUE(book_->DeleteApp("fashion").ok());
  EXPECT_THAT(changes_, ElementsAre(4, 0, 4, 0, 4, 0));
}

}  // namespace
}  // namespace maitre::controller
