// RunPipeline against a fake dispatch: which stages run on which rows,
// what each is sent, how the outputs are gathered, and the errors.
#include "controller/pipelines/pipeline_run.h"

#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"

#include "gtest/gtest.h"

namespace maitre::controller {
namespace {

using pipeline::ValidatedPipeline;

Tensor Floats(const std::string& name, std::vector<int64_t> shape, std::vector<float> values) {
  Tensor t;
  t.name = name;
  t.dtype = DataType::kFp32;
  t.shape = std::move(shape);
  t.data.resize(values.size() * sizeof(float));
  std::memcpy(t.data.data(), values.data(), t.data.size());
  return t;
}

std::vector<float> Values(const Tensor& t) {
  std::vector<float> v(t.data.size() / sizeof(float));
  std::memcpy(v.data(), t.data.data(), t.data.size());
  return v;
}

ModelSpec Classifier() {
  ModelSpec m;
  m.inputs = {{"input", DataType::kFp32, {-1, 2}}};
  m.outputs = {{"logits", DataType::kFp32, {-1, 3}}};
  return m;
}

constexpr char kCascade[] = R"({"name": "cascade",
  "vertices": [
    {"name": "fast", "model": "small", "inputs": {"input": "$image"}},
    {"name": "slow", "model": "big", "inputs": {"input": "$image"}}],
  "edges": [{"from": "fast", "to": "slow",
             "when": {"output": "logits", "max_softmax_below": 0.8}}],
  "outputs": {"logits": ["slow.logits", "fast.logits"]}})";

std::shared_ptr<const ValidatedPipeline> Cascade() {
  auto spec = pipeline::ParsePipelineSpecJson(kCascade);
  EXPECT_TRUE(spec.ok()) << spec.status();
  auto validated =
      pipeline::ValidatePipeline(*spec, {{"small", Classifier()}, {"big", Classifier()}});
  EXPECT_TRUE(validated.ok()) << validated.status();
  return std::make_shared<const ValidatedPipeline>(*validated);
}

// A fake dispatcher: the small model is sure of class 0 when its row's
// first value is positive and unsure otherwise; the big one answers class
// 2 with its first value as the score. It records what each stage got.
struct FakeStages {
  std::map<std::string, std::vector<Tensor>> sent;  // model -> inputs
  std::vector<Nanos> received;
  std::map<std::string, absl::Status> fail;  // model -> its error

  StageDispatch Dispatch() {
    return [this](InferTarget target, InferRequest request, Nanos at, InferDone done) {
      received.push_back(at);
      sent[target.model] = request.inputs;
      if (auto f = fail.find(target.model); f != fail.end()) {
        std::move(done)(f->second);
        return;
      }
      const Tensor& in = request.inputs.at(0);
      std::vector<float> x = Values(in), logits;
      for (int64_t r = 0; r < in.shape[0]; ++r) {
        const float first = x[2 * r];
        if (target.model == "small") {
          // NaN passes through: a score the condition cannot judge.
          const float top = std::isnan(first) ? first : (first > 0 ? 10.0f : 0.0f);
          logits.insert(logits.end(), {top, 0.0f, 0.0f});
        } else {
          logits.insert(logits.end(), {0.0f, 0.0f, first});
        }
      }
      InferResponse response;
      response.model_name = target.model;
      response.model_version = target.model + "-v";
      response.outputs = {Floats("logits", {in.shape[0], 3}, logits)};
      std::move(done)(std::move(response));
    };
  }
};

absl::StatusOr<PipelineAnswer> Serve(FakeStages& stages, InferRequest request,
                                     std::shared_ptr<const ValidatedPipeline> p = Cascade()) {
  ManualClock clock(1000);
  absl::StatusOr<PipelineAnswer> got = absl::InternalError("never answered");
  RunPipeline(std::move(p), std::move(request), 500, &clock, stages.Dispatch(),
              [&](absl::StatusOr<PipelineAnswer> a) { got = std::move(a); });
  return got;
}

InferRequest Images(std::vector<float> values) {
  InferRequest r;
  r.id = "q";
  const int64_t rows = static_cast<int64_t>(values.size() / 2);
  r.inputs = {Floats("image", {rows, 2}, std::move(values))};
  return r;
}

// Row 0 is sure, row 1 unsure: the slow stage runs on row 1 alone, and the
// answer takes each row from the first candidate that ran on it.
TEST(PipelineRunTest, TheSlowStageRunsOnTheUnsureRowsOnly) {
  FakeStages stages;
  auto answer = Serve(stages, Images({1, 1, -7, 1}));
  ASSERT_TRUE(answer.ok()) << answer.status();
  ASSERT_EQ(answer->stages.size(), 2u);
  EXPECT_EQ(answer->stages[0].vertex, "fast");
  EXPECT_EQ(answer->stages[0].rows, 2);
  EXPECT_EQ(answer->stages[1].vertex, "slow");
  EXPECT_EQ(answer->stages[1].variant, "big-v");
  EXPECT_EQ(answer->stages[1].rows, 1);
  EXPECT_TRUE(answer->skipped.empty());
  ASSERT_EQ(stages.sent["big"].size(), 1u);
  EXPECT_EQ(Values(stages.sent["big"][0]), (std::vector<float>{-7, 1}));
  EXPECT_EQ(stages.sent["big"][0].name, "input");
  ASSERT_EQ(answer->response.outputs.size(), 1u);
  const Tensor& out = answer->response.outputs[0];
  EXPECT_EQ(out.name, "logits");
  EXPECT_EQ(out.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(Values(out), (std::vector<float>{10, 0, 0, 0, 0, -7}));
  EXPECT_EQ(answer->response.model_name, "cascade");
  EXPECT_EQ(answer->response.id, "q");
}

// Every stage is sent the pipeline query's arrival, so the dispatcher
// gives each what remains of one deadline.
TEST(PipelineRunTest, EveryStageSharesThePipelinesArrival) {
  FakeStages stages;
  ASSERT_TRUE(Serve(stages, Images({-1, 1})).ok());
  EXPECT_EQ(stages.received, (std::vector<Nanos>{500, 500}));
}

TEST(PipelineRunTest, AStageNoRowReachesIsSkipped) {
  FakeStages stages;
  auto answer = Serve(stages, Images({1, 1, 2, 2}));
  ASSERT_TRUE(answer.ok()) << answer.status();
  ASSERT_EQ(answer->stages.size(), 1u);
  EXPECT_EQ(answer->skipped, (std::vector<std::string>{"slow"}));
  EXPECT_EQ(stages.sent.count("big"), 0u);
  EXPECT_EQ(Values(answer->response.outputs[0]), (std::vector<float>{10, 0, 0, 10, 0, 0}));
}

TEST(PipelineRunTest, AFailingStageFailsTheQueryNamingIt) {
  FakeStages stages;
  stages.fail["big"] = absl::DeadlineExceededError("no instance answered in time");
  auto answer = Serve(stages, Images({-1, 1}));
  EXPECT_TRUE(absl::IsDeadlineExceeded(answer.status())) << answer.status();
  EXPECT_EQ(answer.status().message(),
            "stage \"slow\" (model big): no instance answered in time");
}

TEST(PipelineRunTest, ScoresThatCannotBeJudgedAreAnErrorNamingTheEdge) {
  FakeStages stages;
  auto answer = Serve(stages, Images({std::nanf(""), 1}));
  ASSERT_FALSE(answer.ok());
  EXPECT_NE(answer.status().message().find("edge \"fast\" -> \"slow\""), std::string::npos)
      << answer.status();
  EXPECT_EQ(stages.sent.count("big"), 0u);
}

TEST(PipelineRunTest, BadRequestsAreRefusedBeforeAnyStage) {
  struct Case {
    InferRequest request;
    std::string message;
  };
  std::vector<Case> cases;
  cases.push_back({Images({1, 1}), "has no input 'extra'"});
  cases.back().request.inputs.push_back(Floats("extra", {1, 2}, {1, 1}));
  cases.push_back({InferRequest{}, "input 'image' is missing"});
  cases.push_back({Images({1, 1}), "input 'image' is INT64; the pipeline takes FP32"});
  cases.back().request.inputs[0].dtype = DataType::kInt64;
  cases.back().request.inputs[0].data.resize(16);
  cases.push_back({Images({1, 1, 1}), "input 'image' has shape [1,3]"});
  cases.back().request.inputs[0].shape = {1, 3};
  cases.push_back({Images({1, 1}), "has no output 'probabilities'"});
  cases.back().request.outputs.push_back({"probabilities", false});
  for (Case& c : cases) {
    FakeStages stages;
    auto answer = Serve(stages, std::move(c.request));
    EXPECT_TRUE(absl::IsInvalidArgument(answer.status())) << answer.status();
    EXPECT_NE(answer.status().message().find(c.message), std::string::npos)
        << answer.status() << " lacks " << c.message;
    EXPECT_TRUE(stages.sent.empty());
  }
}

// A binding through a transform hands the next stage the transformed
// tensor, on the rows that stage runs on.
TEST(PipelineRunTest, ATransformedBindingFeedsTheNextStage) {
  ModelSpec labeller;
  labeller.inputs = {{"label", DataType::kInt64, {-1}}};
  labeller.outputs = {{"logits", DataType::kFp32, {-1, 3}}};
  auto spec = pipeline::ParsePipelineSpecJson(R"({"name": "chain",
    "vertices": [
      {"name": "classify", "model": "small", "inputs": {"input": "$image"}},
      {"name": "label", "model": "labeller",
       "inputs": {"label": {"from": "classify.logits", "transform": "argmax"}}}],
    "outputs": {"logits": ["label.logits"]}})");
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto validated =
      pipeline::ValidatePipeline(*spec, {{"small", Classifier()}, {"labeller", labeller}});
  ASSERT_TRUE(validated.ok()) << validated.status();
  FakeStages stages;
  std::vector<int64_t> labels;
  StageDispatch inner = stages.Dispatch();
  StageDispatch dispatch = [&](InferTarget t, InferRequest r, Nanos at, InferDone done) {
    if (t.model != "labeller") return inner(std::move(t), std::move(r), at, std::move(done));
    const Tensor& in = r.inputs.at(0);
    labels.assign(in.As<int64_t>(), in.As<int64_t>() + in.shape[0]);
    InferResponse response;
    response.outputs = {Floats("logits", {in.shape[0], 3}, std::vector<float>(3 * in.shape[0]))};
    std::move(done)(std::move(response));
  };
  ManualClock clock(0);
  absl::StatusOr<PipelineAnswer> got = absl::InternalError("never answered");
  RunPipeline(std::make_shared<const ValidatedPipeline>(*validated), Images({1, 1, -1, 1}), 0,
              &clock, dispatch, [&](absl::StatusOr<PipelineAnswer> a) { got = std::move(a); });
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(labels, (std::vector<int64_t>{0, 0}));  // both rows' top class is 0
  EXPECT_EQ(got->stages.size(), 2u);
}

}  // namespace
}  // namespace maitre::controller

namespace maitre::controller {
namespace {

// Two models on separate branches, both from the image, and a third that
// waits for both: the branches leave together, the join only once both
// have answered, in whichever order they answer.
TEST(PipelineRunTest, StagesOnSeparateBranchesRunAtOnce) {
  auto spec = pipeline::ParsePipelineSpecJson(R"({"name": "fork",
    "vertices": [
      {"name": "left", "model": "small", "inputs": {"input": "$image"}},
      {"name": "right", "model": "big", "inputs": {"input": "$image"}},
      {"name": "join", "model": "judge", "inputs": {"input": "$image"}}],
    "edges": [{"from": "left", "to": "join"}, {"from": "right", "to": "join"}],
    "outputs": {"logits": ["join.logits"]}})");
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto validated = pipeline::ValidatePipeline(
      *spec, {{"small", Classifier()}, {"big", Classifier()}, {"judge", Classifier()}});
  ASSERT_TRUE(validated.ok()) << validated.status();

  // Holds every stage's callback until the test answers it.
  absl::Mutex mu;
  std::map<std::string, InferDone> held;
  auto dispatch = [&](InferTarget target, InferRequest request, Nanos, InferDone done) {
    absl::MutexLock lock(&mu);
    held[target.model] = std::move(done);
  };
  auto answer = [&](const std::string& model) {
    InferDone done;
    {
      absl::MutexLock lock(&mu);
      done = std::move(held.at(model));
      held.erase(model);
    }
    InferResponse response;
    response.model_name = model;
    response.outputs = {Floats("logits", {1, 3}, {1, 2, 3})};
    std::move(done)(std::move(response));
  };
  auto pending = [&] {
    absl::MutexLock lock(&mu);
    std::vector<std::string> models;
    for (const auto& [model, done] : held) models.push_back(model);
    return models;
  };

  ManualClock clock(1000);
  absl::Mutex answered_mu;
  std::optional<absl::StatusOr<PipelineAnswer>> got;
  RunPipeline(std::make_shared<const ValidatedPipeline>(*validated), Images({1, 2}), 500, &clock,
              dispatch, [&](absl::StatusOr<PipelineAnswer> a) {
                absl::MutexLock lock(&answered_mu);
                got = std::move(a);
              });
  EXPECT_EQ(pending(), (std::vector<std::string>{"big", "small"}));  // both branches
  // The branches answer on two threads at once.
  std::thread right([&] { answer("big"); });
  std::thread left([&] { answer("small"); });
  right.join();
  left.join();
  EXPECT_EQ(pending(), std::vector<std::string>{"judge"});
  {
    absl::MutexLock lock(&answered_mu);
    EXPECT_FALSE(got.has_value());
  }
  answer("judge");
  absl::MutexLock lock(&answered_mu);
  ASSERT_TRUE(got.has_value());
  ASSERT_TRUE(got->ok()) << got->status();
  ASSERT_EQ((*got)->stages.size(), 3u);
  EXPECT_EQ((*got)->stages[2].vertex, "join");
  EXPECT_EQ(Values((*got)->response.outputs.at(0)), (std::vector<float>{1, 2, 3}));
}

// A branch that fails answers the query at once; the other branch's later
// answer is dropped, not sent as a second answer.
TEST(PipelineRunTest, OneFailingBranchAnswersOnceWhileTheOtherRuns) {
  auto spec = pipeline::ParsePipelineSpecJson(R"({"name": "fork",
    "vertices": [
      {"name": "left", "model": "small", "inputs": {"input": "$image"}},
      {"name": "right", "model": "big", "inputs": {"input": "$image"}}],
    "outputs": {"left": ["left.logits"], "right": ["right.logits"]}})");
  ASSERT_TRUE(spec.ok()) << spec.status();
  auto validated =
      pipeline::ValidatePipeline(*spec, {{"small", Classifier()}, {"big", Classifier()}});
  ASSERT_TRUE(validated.ok()) << validated.status();
  std::map<std::string, InferDone> held;
  ManualClock clock(1000);
  int answers = 0;
  absl::Status status;
  RunPipeline(
      std::make_shared<const ValidatedPipeline>(*validated), Images({1, 2}), 500, &clock,
      [&](InferTarget target, InferRequest, Nanos, InferDone done) {
        held[target.model] = std::move(done);
      },
      [&](absl::StatusOr<PipelineAnswer> a) {
        ++answers;
        status = a.status();
      });
  ASSERT_EQ(held.size(), 2u);
  std::move(held.at("big"))(absl::UnavailableError("worker gone"));
  EXPECT_EQ(answers, 1);
  EXPECT_NE(status.message().find("stage \"right\""), absl::string_view::npos) << status;
  InferResponse late;
  late.outputs = {Floats("logits", {1, 3}, {1, 2, 3})};
  std::move(held.at("small"))(std::move(late));
  EXPECT_EQ(answers, 1);
}

}  // namespace
}  // namespace maitre::controller
