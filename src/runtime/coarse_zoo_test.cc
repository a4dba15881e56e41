// The zoo's second task, "fashion-coarse" (scripts/build-zoo writes it to
// coarse/): 4 classes over the same test images as the 10-class zoo, so that
// a cluster can serve two apps whose accuracies are independent. These checks
// run it through the real executors and evaluator, as the server would.

#include <cstdint>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/evaluate.h"
#include "runtime/testing/zoo.h"

namespace maitre::runtime {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Fashion-MNIST label -> coarse label: 0 tops, 1 trousers, 2 footwear, 3 bags
// (the map in scripts/build-zoo).
constexpr int64_t kCoarseOfFine[10] = {0, 1, 0, 0, 0, 2, 0, 2, 3, 2};

class CoarseZooTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ConfigureProcessThreads(1); }
};

absl::StatusOr<std::unique_ptr<Executor>> Load(Runtime runtime, const std::string& path,
                                               int64_t classes) {
  ExecutorOptions options;
  options.runtime = runtime;
  options.model_path = path;
  options.spec = testing::FmnistSpec(classes);
  return CreateExecutor(options);
}

TEST_F(CoarseZooTest, ValsetIsTheTestSplitRelabelled) {
  absl::StatusOr<const Valset*> coarse = testing::ZooValset(testing::kCoarseZoo);
  ASSERT_TRUE(coarse.ok()) << coarse.status();
  absl::StatusOr<const Valset*> fine = testing::ZooValset();
  ASSERT_TRUE(fine.ok()) << fine.status();

  ASSERT_EQ((*coarse)->size(), 10000);
  EXPECT_EQ((*coarse)->inputs.shape, (*fine)->inputs.shape);
  EXPECT_TRUE((*coarse)->inputs.data == (*fine)->inputs.data) << "not the same images";
  const int64_t* labels = (*coarse)->labels.As<int64_t>();
  const int64_t* fine_labels = (*fine)->labels.As<int64_t>();
  std::vector<int64_t> per_class(testing::kCoarseClasses, 0);
  for (int64_t r = 0; r < (*coarse)->size(); ++r) {
    ASSERT_GE(labels[r], 0) << "row " << r;
    ASSERT_LT(labels[r], testing::kCoarseClasses) << "row " << r;
    ASSERT_EQ(labels[r], kCoarseOfFine[fine_labels[r]]) << "row " << r;
    ++per_class[labels[r]];
  }
  // Fashion-MNIST's test split has 1000 images of each of its 10 classes.
  EXPECT_THAT(per_class, ElementsAre(5000, 1000, 3000, 1000));
}

// Each model returns [N,4] logits (CreateExecutor's warm-up checks the
// declared spec; Run is checked here at a real batch) and scores on the
// first 1000 images what zoo.json says for the whole split, within the
// spread of a 1000-image block; the cheapest model is the least accurate.
TEST_F(CoarseZooTest, ModelsReturnFourLogitsAndTheirAccuracy) {
  absl::StatusOr<std::vector<testing::ZooModel>> zoo = testing::LoadZoo(testing::kCoarseZoo);
  ASSERT_TRUE(zoo.ok()) << zoo.status();
  absl::StatusOr<const Valset*> all = testing::ZooValset(testing::kCoarseZoo);
  ASSERT_TRUE(all.ok()) << all.status();
  absl::StatusOr<Tensor> inputs = SliceRows((*all)->inputs, 0, 1000);
  absl::StatusOr<Tensor> labels = SliceRows((*all)->labels, 0, 1000);
  ASSERT_TRUE(inputs.ok() && labels.ok());
  Valset subset{*inputs, *labels};
  absl::StatusOr<Tensor> batch8 = SliceRows((*all)->inputs, 0, 8);
  ASSERT_TRUE(batch8.ok());

  std::vector<std::string> names;
  std::map<std::string, double> top1;
  for (const testing::ZooModel& model : *zoo) {
    SCOPED_TRACE(model.name);
    names.push_back(model.name);
    absl::StatusOr<std::unique_ptr<Executor>> torch =
        Load(Runtime::kTorch, model.torchscript, testing::kCoarseClasses);
    ASSERT_TRUE(torch.ok()) << torch.status();
    absl::StatusOr<std::vector<Tensor>> out = (*torch)->Run({*batch8});
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_EQ(out->size(), 1u);
    EXPECT_EQ((*out)[0].shape, (std::vector<int64_t>{8, testing::kCoarseClasses}));

    absl::StatusOr<Accuracy> a = EvaluateTop1(**torch, subset, 100);
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->examples, 1000);
    EXPECT_NEAR(a->top1, model.accuracy, 0.015);
    top1[model.name] = a->top1;

    // The ONNX file, which `maitre register --onnx` serves too, agrees.
    absl::StatusOr<std::unique_ptr<Executor>> cv =
        Load(Runtime::kOpenCv, model.onnx, testing::kCoarseClasses);
    ASSERT_TRUE(cv.ok()) << cv.status();
    absl::StatusOr<Accuracy> b = EvaluateTop1(**cv, subset, 100);
    ASSERT_TRUE(b.ok()) << b.status();
    EXPECT_NEAR(b->top1, a->top1, 0.003);
    std::cout << model.name << ": zoo.json " << model.accuracy << ", first 1000: torch " << a->top1
              << ", opencv " << b->top1 << "\n";
  }
  EXPECT_THAT(names, ElementsAre("coarse-logreg", "coarse-mlp", "coarse-cnn", "coarse-cnn-wide"));
  EXPECT_LT(top1["coarse-logreg"], top1["coarse-cnn-wide"]);
}

// A 4-class model is not taken for a 10-class one: the two apps' models
// cannot be mixed up by registering one with the other's metadata.
TEST_F(CoarseZooTest, RefusedUnderTheTenClassSpec) {
  absl::StatusOr<std::vector<testing::ZooModel>> zoo = testing::LoadZoo(testing::kCoarseZoo);
  ASSERT_TRUE(zoo.ok()) << zoo.status();
  absl::StatusOr<std::unique_ptr<Executor>> e =
      Load(Runtime::kTorch, zoo->front().torchscript, /*classes=*/10);
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(e.status().message(), HasSubstr("has shape [1,4]"));
}

}  // namespace
}  // namespace maitre::runtime
