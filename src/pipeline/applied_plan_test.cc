#include "pipeline/applied_plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_replace.h"

namespace maitre::pipeline {
namespace {

using ::testing::HasSubstr;

// What `maitre plan --json` prints for a two-stage cascade, trimmed.
constexpr char kPlan[] = R"({
  "pipeline": "cascade", "slo_ms": 150,
  "plan": {"stages": [
     {"stage": "fast", "hardware": "cpu-1", "batch": 4, "replicas": 1, "scale_factor": 1},
     {"stage": "slow", "variant": "onnx", "hardware": "cpu-2", "batch": 2, "replicas": 3,
      "scale_factor": 0.3}],
   "cost_per_hour": 1.2},
  "tuner": {"windows_s": [0.05, 0.1], "planned_rates_qps": [140, 120],
            "planned_count_deviations": [1.5, 2],
            "stages": [{"stage": "fast", "mu_qps": 400, "scale_factor": 1, "rho": 0.3},
                       {"stage": "slow", "mu_qps": 20, "scale_factor": 0.3, "rho": 0.6}]}})";

ValidatedPipeline Cascade() {
  ValidatedPipeline p;
  p.spec.name = "cascade";
  p.spec.vertices = {{"fast", "fmnist-logreg", {}}, {"slow", "fmnist-cnn", {}}};
  return p;
}

const std::vector<std::string> kTypes = {"cpu-1", "cpu-2"};

absl::Status ParseAndCheck(const std::string& text) {
  auto plan = ParseAppliedPlanJson(text);
  if (!plan.ok()) return plan.status();
  ValidatedPipeline p = Cascade();
  return CheckAppliedPlan(*plan, p, kTypes);
}

TEST(AppliedPlanTest, ReadsWhatMaitrePlanPrints) {
  auto plan = ParseAppliedPlanJson(kPlan);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ValidatedPipeline p = Cascade();
  ASSERT_TRUE(CheckAppliedPlan(*plan, p, kTypes).ok());
  ASSERT_EQ(plan->stages.size(), 2u);
  EXPECT_EQ(plan->stages[1].vertex, "slow");
  EXPECT_EQ(plan->stages[1].model, "fmnist-cnn");
  EXPECT_EQ(plan->stages[1].hardware, "cpu-2");
  EXPECT_EQ(plan->stages[1].variant, "onnx");
  EXPECT_EQ(plan->stages[0].variant, "") << "none named: the first profiled on the type";
  EXPECT_EQ(plan->stages[1].batch, 2);
  EXPECT_EQ(plan->tuner.stages[1].replicas, 3);
  EXPECT_DOUBLE_EQ(plan->tuner.stages[1].mu_qps, 20);
  EXPECT_DOUBLE_EQ(plan->tuner.stages[1].scale, 0.3);
  EXPECT_DOUBLE_EQ(plan->tuner.stages[1].rho, 0.6);
  EXPECT_EQ(plan->tuner.windows, (std::vector<Nanos>{50 * kMillisecond, 100 * kMillisecond}));
  EXPECT_EQ(plan->tuner.planned_rates, (std::vector<double>{140, 120}));
  EXPECT_EQ(plan->tuner.planned_deviations, (std::vector<double>{1.5, 2}));
}

// A plan written before the deviations still reads; the tuner then takes
// a Poisson count's noise.
TEST(AppliedPlanTest, TheDeviationsAreOptional) {
  auto plan = ParseAppliedPlanJson(
      absl::StrReplaceAll(kPlan, {{"\"planned_count_deviations\": [1.5, 2],", ""}}));
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->tuner.planned_deviations.empty());
}

TEST(AppliedPlanTest, BadShapesAndNumbersAreRefusedNamingTheField) {
  auto with = [](const std::string& from, const std::string& to) {
    return absl::StrReplaceAll(kPlan, {{from, to}});
  };
  EXPECT_THAT(ParseAndCheck("[]").message(), HasSubstr("JSON object"));
  EXPECT_THAT(ParseAndCheck(with("\"replicas\": 3", "\"replicas\": -2")).message(),
              HasSubstr("plan.stages[1]: \"replicas\" must be a whole number"));
  EXPECT_THAT(ParseAndCheck(with("\"replicas\": 3", "\"replicas\": 0")).message(),
              HasSubstr("\"replicas\""));
  EXPECT_THAT(ParseAndCheck(with("\"batch\": 4", "\"batch\": 1.5")).message(),
              HasSubstr("plan.stages[0]: \"batch\""));
  EXPECT_THAT(ParseAndCheck(with("\"rho\": 0.6", "\"rho\": 0")).message(),
              HasSubstr("tuner.stages[1]"));
  EXPECT_THAT(ParseAndCheck(with("[140, 120]", "[140]")).message(),
              HasSubstr("one planned rate per window"));
  EXPECT_THAT(ParseAndCheck(with("[1.5, 2]", "[1.5]")).message(),
              HasSubstr("one deviation per window"));
  EXPECT_THAT(ParseAndCheck(with("[1.5, 2]", "[1.5, -2]")).message(),
              HasSubstr("none negative"));
  EXPECT_THAT(ParseAndCheck(with("{\"stage\": \"slow\", \"mu_qps\"", "{\"stage\": \"x\", "
                                                                     "\"mu_qps\"")).message(),
              HasSubstr("names stage \"x\""));
  EXPECT_THAT(ParseAndCheck(with("\"onnx\"", "3")).message(),
              HasSubstr("plan.stages[1]: needs string \"variant\""));
}

TEST(AppliedPlanTest, StagesMustBeThePipelinesVerticesOnKnownTypes) {
  auto with = [](const std::string& from, const std::string& to) {
    return absl::StrReplaceAll(kPlan, {{from, to}});
  };
  const absl::Status unknown = ParseAndCheck(with("\"slow\"", "\"slower\""));
  EXPECT_EQ(unknown.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unknown.message(), HasSubstr("stage \"slower\": pipeline \"cascade\" has no"));
  EXPECT_THAT(ParseAndCheck(with("\"cpu-2\"", "\"gpu-9\"")).message(),
              HasSubstr("unknown worker type \"gpu-9\"; the server has cpu-1, cpu-2"));
  EXPECT_THAT(ParseAndCheck(with("\"slow\"", "\"fast\"")).message(), HasSubstr("planned twice"));
  // A vertex the plan leaves out.
  ValidatedPipeline three = Cascade();
  three.spec.vertices.push_back({"third", "m", {}});
  auto plan = ParseAppliedPlanJson(kPlan);
  ASSERT_TRUE(plan.ok());
  EXPECT_THAT(CheckAppliedPlan(*plan, three, kTypes).message(),
              HasSubstr("vertex \"third\": the plan has no stage for it"));
}

}  // namespace
}  // namespace maitre::pipeline
