#include "runtime/evaluate.h"

#include <iostream>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/testing/fake_executor.h"
#include "runtime/testing/zoo.h"

namespace maitre::runtime {
namespace {

using ::testing::HasSubstr;

// A valset of n rows [class, 0]; labels agree with the class except on rows
// listed in `wrong`.
Valset MakeValset(int64_t n, const std::vector<int64_t>& wrong) {
  Valset v;
  v.inputs.name = "inputs";
  v.inputs.dtype = DataType::kFp32;
  v.inputs.shape = {n, 2};
  v.inputs.data.assign(static_cast<size_t>(n) * 2 * sizeof(float), '\0');
  v.labels.name = "labels";
  v.labels.dtype = DataType::kInt64;
  v.labels.shape = {n};
  v.labels.data.assign(static_cast<size_t>(n) * sizeof(int64_t), '\0');
  for (int64_t r = 0; r < n; ++r) {
    v.inputs.MutableAs<float>()[r * 2] = static_cast<float>(r % 10);
    v.labels.MutableAs<int64_t>()[r] = r % 10;
  }
  for (int64_t r : wrong) v.labels.MutableAs<int64_t>()[r] = (r + 1) % 10;
  return v;
}

TEST(EvaluateTest, CountsTopOneOverPartialBatches) {
  testing::FakeExecutor executor({testing::EchoClassifier(10)});
  absl::StatusOr<Accuracy> a = EvaluateTop1(executor, MakeValset(10, {0, 9}), 3);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->examples, 10);
  EXPECT_DOUBLE_EQ(a->top1, 0.8);
  EXPECT_EQ(executor.batches(), (std::vector<int64_t>{3, 3, 3, 1}));
}

TEST(EvaluateTest, RefusesBadArguments) {
  testing::FakeExecutor executor({testing::EchoClassifier(10)});
  EXPECT_FALSE(EvaluateTop1(executor, MakeValset(4, {}), 0).ok());
  Valset short_labels = MakeValset(4, {});
  short_labels.labels.shape = {3};
  short_labels.labels.data.resize(3 * sizeof(int64_t));
  EXPECT_FALSE(EvaluateTop1(executor, short_labels, 2).ok());
}

TEST(EvaluateTest, PassesExecutorErrorsOnWithTheRows) {
  testing::FakeExecutor failing({[](const std::vector<Tensor>&)
                                     -> absl::StatusOr<std::vector<Tensor>> {
    return absl::InternalError("boom");
  }});
  absl::Status s = EvaluateTop1(failing, MakeValset(4, {}), 2).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(s.message(), HasSubstr("rows [0, 2): boom"));

  testing::FakeExecutor wrong_rows({[](const std::vector<Tensor>& in)
                                        -> absl::StatusOr<std::vector<Tensor>> {
    Tensor t{"logits", DataType::kFp32, {1, 2}, std::string(8, '\0')};
    return std::vector<Tensor>{t};
  }});
  EXPECT_THAT(EvaluateTop1(wrong_rows, MakeValset(4, {}), 2).status().message(),
              HasSubstr("one row per example"));
}

// The zoo's accuracies hold when measured through our executors: the whole
// valset through torch matches zoo.json (computed by torch in Python on the
// same images) within 0.2 points; on the first 1000 rows torch and OpenCV
// agree with each other, and loosely with zoo.json (a subset's accuracy
// differs from the whole set's by about a point).
class ZooAccuracyTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ConfigureProcessThreads(1); }
};

absl::StatusOr<Accuracy> Evaluate(Runtime runtime, const std::string& path, const Valset& v) {
  ExecutorOptions options;
  options.runtime = runtime;
  options.model_path = path;
  options.spec = testing::FmnistSpec();
  absl::StatusOr<std::unique_ptr<Executor>> e = CreateExecutor(options);
  if (!e.ok()) return e.status();
  return EvaluateTop1(**e, v, 100);
}

TEST_F(ZooAccuracyTest, MatchesZooJson) {
  absl::StatusOr<std::vector<testing::ZooModel>> zoo = testing::LoadZoo();
  ASSERT_TRUE(zoo.ok()) << zoo.status();
  absl::StatusOr<const Valset*> all = testing::ZooValset();
  ASSERT_TRUE(all.ok()) << all.status();
  absl::StatusOr<Tensor> inputs = SliceRows((*all)->inputs, 0, 1000);
  absl::StatusOr<Tensor> labels = SliceRows((*all)->labels, 0, 1000);
  ASSERT_TRUE(inputs.ok() && labels.ok());
  Valset subset{*inputs, *labels};

  for (const testing::ZooModel& model : *zoo) {
    SCOPED_TRACE(model.name);
    absl::StatusOr<Accuracy> torch = Evaluate(Runtime::kTorch, model.torchscript, subset);
    ASSERT_TRUE(torch.ok()) << torch.status();
    absl::StatusOr<Accuracy> cv = Evaluate(Runtime::kOpenCv, model.onnx, subset);
    ASSERT_TRUE(cv.ok()) << cv.status();
    EXPECT_EQ(torch->examples, 1000);
    EXPECT_NEAR(torch->top1, model.accuracy, 0.02);
    EXPECT_NEAR(cv->top1, torch->top1, 0.003);
    std::cout << model.name << ": zoo.json " << model.accuracy << ", first 1000: torch "
              << torch->top1 << ", opencv " << cv->top1 << "\n";

    absl::StatusOr<Accuracy> full = Evaluate(Runtime::kTorch, model.torchscript, **all);
    ASSERT_TRUE(full.ok()) << full.status();
    EXPECT_EQ(full->examples, (*all)->size());
    EXPECT_NEAR(full->top1, model.accuracy, 0.002);
    std::cout << model.name << ": whole valset through torch " << full->top1 << "\n";
  }
}

}  // namespace
}  // namespace maitre::runtime
