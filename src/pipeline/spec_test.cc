#include "pipeline/spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace maitre::pipeline {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

std::map<std::string, ModelSpec> Models() {
  auto classifier = ParseModelSpecJson(R"({
    "inputs": [{"name": "input", "datatype": "FP32", "shape": [-1, 1, 28, 28]}],
    "outputs": [{"name": "logits", "datatype": "FP32", "shape": [-1, 10]}]})");
  auto by_label = ParseModelSpecJson(R"({
    "inputs": [{"name": "label", "datatype": "INT64", "shape": [-1]}],
    "outputs": [{"name": "score", "datatype": "FP32", "shape": [-1, 2]}]})");
  auto text = ParseModelSpecJson(R"({
    "inputs": [{"name": "tokens", "datatype": "INT64", "shape": [-1, 128]}],
    "outputs": [{"name": "embedding", "datatype": "FP32", "shape": [-1, 64]}]})");
  return {{"fmnist-logreg", *classifier}, {"fmnist-cnn-wide", *classifier},
          {"by-label", *by_label}, {"text", *text}};
}

constexpr char kCascade[] = R"({
  "name": "cascade",
  "vertices": [
    {"name": "fast", "model": "fmnist-logreg", "inputs": {"input": "$image"}},
    {"name": "slow", "model": "fmnist-cnn-wide", "inputs": {"input": "$image"}}],
  "edges": [{"from": "fast", "to": "slow",
             "when": {"output": "logits", "max_softmax_below": 0.8}}],
  "outputs": {"logits": ["slow.logits", "fast.logits"]}})";

absl::StatusOr<ValidatedPipeline> Validate(absl::string_view json) {
  auto spec = ParsePipelineSpecJson(json);
  if (!spec.ok()) return spec.status();
  return ValidatePipeline(*std::move(spec), Models());
}

TEST(PipelineSpecTest, ACascadeValidates) {
  auto p = Validate(kCascade);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->spec.name, "cascade");
  ASSERT_EQ(p->edges.size(), 1u);
  ASSERT_TRUE(p->edges[0].when.has_value());
  EXPECT_EQ(p->edges[0].when->kind, Predicate::Kind::kMaxSoftmaxBelow);
  EXPECT_DOUBLE_EQ(p->edges[0].when->threshold, 0.8);
  EXPECT_EQ(p->order, (std::vector<int32_t>{0, 1}));
  ASSERT_EQ(p->inputs.size(), 1u);
  EXPECT_EQ(p->inputs[0].name, "image");
  EXPECT_EQ(p->inputs[0].dtype, DataType::kFp32);
  EXPECT_EQ(p->outputs.at("logits").shape, (std::vector<int64_t>{-1, 10}));
  EXPECT_EQ(p->spec.outputs.at("logits").size(), 2u);
}

TEST(PipelineSpecTest, ABindingImpliesAnEdgeAndATransformChangesTheType) {
  auto p = Validate(R"({
    "vertices": [
      {"name": "label", "model": "by-label", "inputs": {"label":
         {"from": "classify.logits", "transform": "argmax"}}},
      {"name": "classify", "model": "fmnist-cnn-wide", "inputs": {"input": "$image"}}],
    "outputs": {"score": "label.score"}})");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->order, (std::vector<int32_t>{1, 0}));
  ASSERT_EQ(p->edges.size(), 1u);
  EXPECT_EQ(p->edges[0].from, "classify");
  EXPECT_FALSE(p->edges[0].when.has_value());
}

TEST(PipelineSpecTest, ACycleIsRefusedNamingAVertexOnIt) {
  auto p = Validate(R"({
    "vertices": [
      {"name": "a", "model": "fmnist-logreg", "inputs": {"input": "$image"}},
      {"name": "b", "model": "fmnist-logreg", "inputs": {"input": "$image"}},
      {"name": "c", "model": "fmnist-logreg", "inputs": {"input": "$image"}}],
    "edges": [{"from": "a", "to": "b"}, {"from": "b", "to": "c"}, {"from": "c", "to": "b"}],
    "outputs": {"logits": "c.logits"}})");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(p.status().message(), AllOf(HasSubstr("vertex \"b\""), HasSubstr("cycle")));
}

TEST(PipelineSpecTest, AnUnknownModelIsRefusedNamingTheVertex) {
  auto p = Validate(R"({
    "vertices": [{"name": "fast", "model": "no-such-model", "inputs": {"input": "$image"}}],
    "outputs": {"logits": "fast.logits"}})");
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(),
              AllOf(HasSubstr("vertex \"fast\""), HasSubstr("unknown model \"no-such-model\"")));
}

TEST(PipelineSpecTest, ATypeMismatchIsRefusedNamingTheVertexAndBothTypes) {
  // Scores fed where class labels are expected, with no argmax between.
  auto p = Validate(R"({
    "vertices": [
      {"name": "classify", "model": "fmnist-cnn-wide", "inputs": {"input": "$image"}},
      {"name": "label", "model": "by-label", "inputs": {"label": "classify.logits"}}],
    "outputs": {"score": "label.score"}})");
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(),
              AllOf(HasSubstr("vertex \"label\" input \"label\""), HasSubstr("type mismatch"),
                    HasSubstr("FP32[-1,10]"), HasSubstr("INT64[-1]")));
}

TEST(PipelineSpecTest, OnePipelineInputFeedingTwoTypesIsRefused) {
  auto p = Validate(R"({
    "vertices": [
      {"name": "image", "model": "fmnist-logreg", "inputs": {"input": "$x"}},
      {"name": "text", "model": "text", "inputs": {"tokens": "$x"}}],
    "outputs": {"logits": "image.logits"}})");
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), AllOf(HasSubstr("vertex \"text\""), HasSubstr("\"$x\"")));
}

TEST(PipelineSpecTest, APredicateOnAMissingOutputIsRefusedNamingTheVertex) {
  auto p = Validate(R"({
    "vertices": [
      {"name": "fast", "model": "fmnist-logreg", "inputs": {"input": "$image"}},
      {"name": "slow", "model": "fmnist-cnn-wide", "inputs": {"input": "$image"}}],
    "edges": [{"from": "fast", "to": "slow",
               "when": {"output": "probabilities", "max_softmax_below": 0.8}}],
    "outputs": {"logits": "slow.logits"}})");
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(),
              AllOf(HasSubstr("vertex \"fast\""), HasSubstr("\"probabilities\"")));
}

TEST(PipelineSpecTest, OtherMistakesGetClearErrors) {
  struct Case {
    const char* json;
    const char* says;
  } cases[] = {
      {R"({"vertices": [{"name": "a", "model": "fmnist-logreg"}], "outputs": {"o": "a.logits"}})",
       "vertex \"a\" input \"input\": is not bound"},
      {R"({"vertices": [{"name": "a", "model": "fmnist-logreg", "inputs": {"input": "$i",
           "extra": "$j"}}], "outputs": {"o": "a.logits"}})",
       "has no input \"extra\""},
      {R"({"vertices": [{"name": "a", "model": "fmnist-logreg", "inputs": {"input": "$i"}},
           {"name": "a", "model": "fmnist-logreg", "inputs": {"input": "$i"}}],
           "outputs": {"o": "a.logits"}})",
       "vertex \"a\": is named twice"},
      {R"({"vertices": [{"name": "a", "model": "fmnist-logreg", "inputs": {"input": "$i"}}],
           "outputs": {"o": "b.logits"}})",
       "output \"o\": unknown vertex \"b\""},
      {R"({"vertices": [{"name": "a", "model": "fmnist-logreg", "inputs": {"input": "$i"}}],
           "edges": [{"from": "a", "to": "z"}], "outputs": {"o": "a.logits"}})",
       "unknown vertex \"z\""},
      {R"({"vertices": [{"name": "a", "model": "fmnist-logreg", "inputs": {"input": "a.logits"}}],
           "outputs": {"o": "a.logits"}})",
       "vertex \"a\" input \"input\": reads the vertex's own output"},
      {R"({"vertices": [{"name": "a", "model": "fmnist-logreg", "inputs": {"input":
           {"from": "$i", "transform": "sharpen"}}}], "outputs": {"o": "a.logits"}})",
       "unknown transform \"sharpen\""},
      {R"({"vertices": [{"name": "a", "model": "fmnist-logreg", "inputs": {"input": "$i"}}],
           "edges": [{"from": "a", "to": "a", "when": {"output": "logits"}}],
           "outputs": {"o": "a.logits"}})",
       "exactly one of"},
      {R"({"vertices": [{"name": "a", "model": "fmnist-logreg", "inputs": {"input": "$i"}}],
           "outputs": {"o": "$i"}})",
       "not straight from a pipeline input"},
      {R"({"vertices": [{"name": "a.b", "model": "fmnist-logreg", "inputs": {"input": "$i"}}],
           "outputs": {"o": "a.b.logits"}})",
       "vertex \"a.b\": a vertex name must be non-empty"},
      {R"({"vertices": []})", "non-empty \"vertices\""},
      {R"(not json)", "JSON object"},
  };
  for (const Case& c : cases) {
    auto p = Validate(c.json);
    ASSERT_FALSE(p.ok()) << c.json;
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(p.status().message(), HasSubstr(c.says)) << c.json;
  }
}

}  // namespace
}  // namespace maitre::pipeline
