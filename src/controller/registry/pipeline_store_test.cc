// Behaviour of the PipelineStore's calls on one registry file, and that
// pipelines survive reopening it.
#include "controller/registry/pipeline_store.h"

#include <memory>
#include <string>

#include "controller/registry/registry.h"
#include "controller/registry/registry_test_util.h"
#include "gtest/gtest.h"

namespace maitre::registry {
namespace {


PipelineRecord Pipeline(const std::string& name, const std::string& app,
                        const std::string& spec = R"({"name":"x"})") {
  return PipelineRecord{name, app, spec, 1700000000000};
}

class PipelineStoreTest : public test_util::RegistryFileTest {
 protected:
  PipelineStore& pipelines() { return registry_->pipelines(); }
};

TEST_F(PipelineStoreTest, PutListReplaceAndSurviveReopening) {
  ASSERT_TRUE(pipelines().PutPipeline(Pipeline("cascade", "fashion", "{\"v\":1}")).ok());
  ASSERT_TRUE(pipelines().PutPipeline(Pipeline("another", "fashion")).ok());
  PipelineRecord replaced = Pipeline("cascade", "fashion", "{\"v\":2}");
  replaced.created_unix_ms = 5;
  ASSERT_TRUE(pipelines().PutPipeline(replaced).ok());
  Open();
  auto all = pipelines().ListPipelines();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].name, "another");
  EXPECT_EQ(all[1].name, "cascade");
  EXPECT_EQ(all[1].app, "fashion");
  EXPECT_EQ(all[1].spec_json, "{\"v\":2}");
  EXPECT_EQ(all[1].created_unix_ms, 1700000000000);  // the first registration's
}

TEST_F(PipelineStoreTest, APlanIsKeptUntilTheSpecIsReplaced) {
  ASSERT_TRUE(pipelines().PutPipeline(Pipeline("cascade", "fashion", "{\"v\":1}")).ok());
  EXPECT_TRUE(absl::IsNotFound(pipelines().SetPlan("other", "cascade", "{\"p\":1}")));
  EXPECT_TRUE(absl::IsNotFound(pipelines().SetPlan("fashion", "nope", "{\"p\":1}")));
  ASSERT_TRUE(pipelines().SetPlan("fashion", "cascade", "{\"p\":1}").ok());
  Open();
  auto all = pipelines().ListPipelines();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].plan_json, "{\"p\":1}");
  // The plan was made for the spec it replaced: gone with it.
  ASSERT_TRUE(pipelines().PutPipeline(Pipeline("cascade", "fashion", "{\"v\":2}")).ok());
  all = pipelines().ListPipelines();
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].plan_json, "");
}

TEST_F(PipelineStoreTest, ANameIsOneAppsOnly) {
  ASSERT_TRUE(pipelines().PutPipeline(Pipeline("cascade", "fashion")).ok());
  absl::Status taken = pipelines().PutPipeline(Pipeline("cascade", "other"));
  EXPECT_TRUE(absl::IsAlreadyExists(taken)) << taken;
  EXPECT_NE(taken.message().find("taken by app 'fashion'"), std::string::npos) << taken;
}

TEST_F(PipelineStoreTest, MalformedRecordsAreRefused) {
  EXPECT_TRUE(absl::IsInvalidArgument(pipelines().PutPipeline(Pipeline("bad name", "a"))));
  EXPECT_TRUE(absl::IsInvalidArgument(pipelines().PutPipeline(Pipeline("p", ""))));
  EXPECT_TRUE(absl::IsInvalidArgument(pipelines().PutPipeline(Pipeline("p", "a", ""))));
  EXPECT_TRUE(pipelines().ListPipelines().empty());
}

TEST_F(PipelineStoreTest, DeleteOneAndAnAppsPipelines) {
  ASSERT_TRUE(pipelines().PutPipeline(Pipeline("p1", "a")).ok());
  ASSERT_TRUE(pipelines().PutPipeline(Pipeline("p2", "a")).ok());
  ASSERT_TRUE(pipelines().PutPipeline(Pipeline("q", "b")).ok());
  EXPECT_TRUE(absl::IsNotFound(pipelines().DeletePipeline("b", "p1")));  // not b's
  EXPECT_TRUE(pipelines().DeletePipeline("a", "p1").ok());
  EXPECT_TRUE(absl::IsNotFound(pipelines().DeletePipeline("a", "p1")));
  auto removed = pipelines().DeleteAppPipelines("a");
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(*removed, 1);
  auto left = pipelines().ListPipelines();
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].name, "q");
}

}  // namespace
}  // namespace maitre::registry
