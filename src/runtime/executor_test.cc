#include "runtime/executor.h"

#include <algorithm>
#include <cmath>
#include <iostream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/evaluate.h"
#include "core/npz.h"
#include "runtime/opencv_executor.h"
#include "runtime/serial_runs.h"
#include "runtime/testing/tensor_diff.h"
#include "runtime/testing/zoo.h"
#include "runtime/torch_executor.h"
#include "core/valset.h"

namespace maitre::runtime {
namespace {

using ::testing::HasSubstr;

using testing::MaxAbsDiff;

class ExecutorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { ConfigureProcessThreads(1); }

  void SetUp() override {
    absl::StatusOr<std::vector<testing::ZooModel>> zoo = testing::LoadZoo();
    ASSERT_TRUE(zoo.ok()) << zoo.status();
    zoo_ = *zoo;
    absl::StatusOr<const Valset*> valset = testing::ZooValset();
    ASSERT_TRUE(valset.ok()) << valset.status();
    valset_ = *valset;
  }

  // Rows [begin, end) of the validation images, as an executor input.
  std::vector<Tensor> Images(int64_t begin, int64_t end) const {
    absl::StatusOr<Tensor> rows = SliceRows(valset_->inputs, begin, end);
    EXPECT_TRUE(rows.ok()) << rows.status();
    return {rows.ok() ? *rows : Tensor{}};
  }

  const testing::ZooModel& Model(absl::string_view contains) const {
    for (const testing::ZooModel& m : zoo_) {
      if (absl::StrContains(m.name, contains)) return m;
    }
    return zoo_.front();
  }

  static absl::StatusOr<std::unique_ptr<Executor>> Create(Runtime runtime,
                                                         const std::string& path,
                                                         ModelSpec spec = testing::FmnistSpec()) {
    ExecutorOptions options;
    options.runtime = runtime;
    options.model_path = path;
    options.spec = std::move(spec);
    return CreateExecutor(options);
  }

  std::vector<testing::ZooModel> zoo_;
  const Valset* valset_ = nullptr;
};

TEST(SerialRunsTest, SmallBatchesRunSeriallyOnceTheRowTimeIsKnown) {
  using internal::kOpenCvSerialBelowUs;
  using internal::RunsSerially;
  constexpr double kBelow = kOpenCvSerialBelowUs;
  // One thread: always inline.
  EXPECT_TRUE(RunsSerially(64, 1000, 1, kBelow));
  // Before any serial run (the warm-up) there is no row time yet.
  EXPECT_TRUE(RunsSerially(64, 0, 2, kBelow));
  // The zoo's sizes in OpenCV on two threads: logreg (2.5 us a row)
  // serially up to batch 79, the CNN (64 us) up to batch 3, the wide CNN
  // (158 us) at batch 1 only.
  EXPECT_TRUE(RunsSerially(79, 2.5, 2, kBelow));
  EXPECT_FALSE(RunsSerially(80, 2.5, 2, kBelow));
  EXPECT_TRUE(RunsSerially(3, 64, 2, kBelow));
  EXPECT_FALSE(RunsSerially(4, 64, 2, kBelow));
  EXPECT_TRUE(RunsSerially(1, 158, 2, kBelow));
  EXPECT_FALSE(RunsSerially(2, 158, 2, kBelow));
  EXPECT_FALSE(RunsSerially(1, kBelow, 4, kBelow));
  // torch's threshold is higher: its wide CNN (~330 us) runs serially.
  EXPECT_TRUE(RunsSerially(1, 330, 2, internal::kTorchSerialBelowUs));
}

TEST(SerialRunsTest, TheRowTimeIsLearntFromTheFastestOfTheFirstRuns) {
  internal::SerialRowTime t(/*below_us=*/200);
  // Until four serial runs are in, everything runs serially.
  for (int run = 0; run < 3; ++run) {
    EXPECT_TRUE(t.RunSerially(64, 2));
    t.Record(8, 800);  // 100 us a row
  }
  EXPECT_TRUE(t.RunSerially(64, 2));
  t.Record(2, 120);  // 60 us a row, the fastest
  EXPECT_TRUE(t.RunSerially(3, 2));
  EXPECT_FALSE(t.RunSerially(4, 2));
  t.Record(1, 500);  // a slow run changes nothing
  EXPECT_TRUE(t.RunSerially(3, 2));
  EXPECT_TRUE(t.RunSerially(64, 1));  // one thread: always
}

// Serial and parallel runs of the same net must give the same answers. An
// executor's first four runs (two of them the warm-up) are serial; after
// them batch 64 of both models runs in parallel while batch 1 stays serial,
// in both executors.
TEST_F(ExecutorTest, ExecutorsAnswerAlikeSeriallyAndInParallel) {
  ConfigureProcessThreads(2);
  for (absl::string_view name : {"cnn-wide", "mlp"}) {
    SCOPED_TRACE(name);
    absl::StatusOr<std::unique_ptr<Executor>> cv = Create(Runtime::kOpenCv, Model(name).onnx);
    ASSERT_TRUE(cv.ok()) << cv.status();
    absl::StatusOr<std::unique_ptr<Executor>> torch =
        Create(Runtime::kTorch, Model(name).torchscript);
    ASSERT_TRUE(torch.ok()) << torch.status();
    for (int64_t batch : {1, 1, 1, 64, 1}) {
      SCOPED_TRACE(absl::StrCat("batch ", batch));
      std::vector<Tensor> in = Images(200, 200 + batch);
      absl::StatusOr<std::vector<Tensor>> a = (*torch)->Run(in);
      ASSERT_TRUE(a.ok()) << a.status();
      absl::StatusOr<std::vector<Tensor>> b = (*cv)->Run(in);
      ASSERT_TRUE(b.ok()) << b.status();
      EXPECT_LT(MaxAbsDiff(a->front(), b->front()), 1e-3);
    }
  }
  ConfigureProcessThreads(1);
}

TEST_F(ExecutorTest, TorchAndOpenCvAgreeOnEveryZooModel) {
  for (const testing::ZooModel& model : zoo_) {
    SCOPED_TRACE(model.name);
    absl::StatusOr<std::unique_ptr<Executor>> torch = Create(Runtime::kTorch, model.torchscript);
    ASSERT_TRUE(torch.ok()) << torch.status();
    absl::StatusOr<std::unique_ptr<Executor>> cv = Create(Runtime::kOpenCv, model.onnx);
    ASSERT_TRUE(cv.ok()) << cv.status();

    // Batch 1, then 7, then 1 again: OpenCV reallocates on a shape change
    // and must give the same answers afterwards.
    for (int64_t batch : {1, 7, 1}) {
      SCOPED_TRACE(absl::StrCat("batch ", batch));
      std::vector<Tensor> in = Images(100, 100 + batch);
      absl::StatusOr<std::vector<Tensor>> a = (*torch)->Run(in);
      ASSERT_TRUE(a.ok()) << a.status();
      absl::StatusOr<std::vector<Tensor>> b = (*cv)->Run(in);
      ASSERT_TRUE(b.ok()) << b.status();
      ASSERT_EQ(a->size(), 1u);
      ASSERT_EQ(b->size(), 1u);
      for (const Tensor& out : {a->front(), b->front()}) {
        EXPECT_EQ(out.name, "logits");
        EXPECT_EQ(out.dtype, DataType::kFp32);
        EXPECT_EQ(out.shape, (std::vector<int64_t>{batch, 10}));
        EXPECT_TRUE(out.Validate().ok());
      }
      EXPECT_LT(MaxAbsDiff(a->front(), b->front()), 1e-3);
    }
  }
}

TEST_F(ExecutorTest, RowsDoNotDependOnTheirBatch) {
  for (Runtime runtime : {Runtime::kTorch, Runtime::kOpenCv}) {
    const testing::ZooModel& model = Model("cnn");
    absl::StatusOr<std::unique_ptr<Executor>> e =
        Create(runtime, runtime == Runtime::kTorch ? model.torchscript : model.onnx);
    ASSERT_TRUE(e.ok()) << e.status();
    absl::StatusOr<std::vector<Tensor>> one = (*e)->Run(Images(5, 6));
    absl::StatusOr<std::vector<Tensor>> many = (*e)->Run(Images(5, 13));
    ASSERT_TRUE(one.ok() && many.ok());
    absl::StatusOr<Tensor> first = SliceRows(many->front(), 0, 1);
    ASSERT_TRUE(first.ok());
    EXPECT_LT(MaxAbsDiff(one->front(), *first), 1e-4) << RuntimeName(runtime);
  }
}

TEST_F(ExecutorTest, InputsAreLeftUntouched) {
  for (Runtime runtime : {Runtime::kTorch, Runtime::kOpenCv}) {
    const testing::ZooModel& model = Model("mlp");
    absl::StatusOr<std::unique_ptr<Executor>> e =
        Create(runtime, runtime == Runtime::kTorch ? model.torchscript : model.onnx);
    ASSERT_TRUE(e.ok()) << e.status();
    std::vector<Tensor> in = Images(0, 3);
    std::string before = in[0].data;
    ASSERT_TRUE((*e)->Run(in).ok());
    EXPECT_EQ(in[0].data, before) << RuntimeName(runtime);
  }
}

TEST_F(ExecutorTest, TextFileIsNotAModel) {
  testing::ScopedTempDir scratch;
  std::string path = scratch.path() + "/model.txt";
  ASSERT_TRUE(WriteFileAtomically(path, "this is a text file, not a model\n").ok());
  absl::Status torch = Create(Runtime::kTorch, path).status();
  EXPECT_EQ(torch.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(torch.message(), HasSubstr("is not a TorchScript model"));
  absl::Status cv = Create(Runtime::kOpenCv, path).status();
  EXPECT_EQ(cv.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(cv.message(), HasSubstr("is not an ONNX model"));

  // The other runtime's format is just as wrong.
  EXPECT_EQ(Create(Runtime::kTorch, Model("mlp").onnx).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Create(Runtime::kOpenCv, Model("mlp").torchscript).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(ExecutorTest, MissingFileIsNotFound) {
  for (Runtime runtime : {Runtime::kTorch, Runtime::kOpenCv}) {
    absl::Status s = Create(runtime, "/nonexistent/model.pt").status();
    EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  }
}

TEST_F(ExecutorTest, SpecThatDisagreesWithTheModelIsInvalidArgument) {
  const testing::ZooModel& model = Model("cnn");
  for (Runtime runtime : {Runtime::kTorch, Runtime::kOpenCv}) {
    SCOPED_TRACE(RuntimeName(runtime));
    const std::string& path = runtime == Runtime::kTorch ? model.torchscript : model.onnx;

    ModelSpec narrow = testing::FmnistSpec();
    narrow.outputs[0].shape = {-1, 5};
    absl::Status s = Create(runtime, path, narrow).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("output 'logits' has shape [1,10]"));
    EXPECT_THAT(s.message(), HasSubstr("[-1,5]"));

    ModelSpec two = testing::FmnistSpec();
    two.outputs.push_back({"extra", DataType::kFp32, {-1, 10}});
    s = Create(runtime, path, two).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("spec declares 2"));

    ModelSpec big_images = testing::FmnistSpec();
    big_images.inputs[0].shape = {-1, 1, 32, 32};
    s = Create(runtime, path, big_images).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("warm-up run at batch 1 failed"));

    ModelSpec no_outputs = testing::FmnistSpec();
    no_outputs.outputs.clear();
    EXPECT_EQ(Create(runtime, path, no_outputs).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
}

TEST_F(ExecutorTest, RunRefusesInputsThatBreakTheSpec) {
  for (Runtime runtime : {Runtime::kTorch, Runtime::kOpenCv}) {
    SCOPED_TRACE(RuntimeName(runtime));
    const testing::ZooModel& model = Model("mlp");
    absl::StatusOr<std::unique_ptr<Executor>> e =
        Create(runtime, runtime == Runtime::kTorch ? model.torchscript : model.onnx);
    ASSERT_TRUE(e.ok()) << e.status();

    std::vector<Tensor> wrong_type = Images(0, 2);
    wrong_type[0].dtype = DataType::kInt32;
    EXPECT_THAT((*e)->Run(wrong_type).status().message(), HasSubstr("must be FP32"));
    std::vector<Tensor> wrong_shape = Images(0, 2);
    wrong_shape[0].shape = {2, 784};
    EXPECT_THAT((*e)->Run(wrong_shape).status().message(), HasSubstr("must have shape"));
    std::vector<Tensor> short_data = Images(0, 2);
    short_data[0].data.resize(100);
    EXPECT_EQ((*e)->Run(short_data).status().code(), absl::StatusCode::kInvalidArgument);
    std::vector<Tensor> empty_batch = Images(0, 0);
    EXPECT_EQ((*e)->Run(empty_batch).status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT((*e)->Run({}).status().message(), HasSubstr("takes 1 input(s), got 0"));

    // Still usable after refusing.
    EXPECT_TRUE((*e)->Run(Images(0, 2)).ok());
  }
}

// The torch-opt variant: the same file, optimised at load time.
TEST_F(ExecutorTest, OptimizeForInferenceKeepsTheOutputs) {
  for (const testing::ZooModel& model : zoo_) {
    SCOPED_TRACE(model.name);
    absl::StatusOr<std::unique_ptr<Executor>> plain = Create(Runtime::kTorch, model.torchscript);
    ExecutorOptions options;
    options.model_path = model.torchscript;
    options.spec = testing::FmnistSpec();
    options.optimize_for_inference = true;
    absl::StatusOr<std::unique_ptr<Executor>> optimized = CreateExecutor(options);
    ASSERT_TRUE(plain.ok()) << plain.status();
    ASSERT_TRUE(optimized.ok()) << optimized.status();
    for (int64_t batch : {1, 7, 1}) {
      std::vector<Tensor> in = Images(200, 200 + batch);
      absl::StatusOr<std::vector<Tensor>> a = (*plain)->Run(in);
      absl::StatusOr<std::vector<Tensor>> b = (*optimized)->Run(in);
      ASSERT_TRUE(a.ok() && b.ok()) << b.status();
      EXPECT_LT(MaxAbsDiff(a->front(), b->front()), 1e-4) << "batch " << batch;
    }
  }
  ExecutorOptions cv;
  cv.runtime = Runtime::kOpenCv;
  cv.model_path = Model("mlp").onnx;
  cv.spec = testing::FmnistSpec();
  cv.optimize_for_inference = true;
  EXPECT_THAT(CreateExecutor(cv).status().message(), HasSubstr("torch runtime only"));
}

TEST_F(ExecutorTest, TorchConvertsOutputsToTheSpecDtype) {
  ModelSpec spec = testing::FmnistSpec();
  spec.outputs[0].dtype = DataType::kFp64;
  absl::StatusOr<std::unique_ptr<Executor>> e =
      Create(Runtime::kTorch, Model("mlp").torchscript, spec);
  ASSERT_TRUE(e.ok()) << e.status();
  absl::StatusOr<std::vector<Tensor>> out = (*e)->Run(Images(0, 2));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->front().dtype, DataType::kFp64);
  EXPECT_TRUE(out->front().Validate().ok());

  absl::Status cv = Create(Runtime::kOpenCv, Model("mlp").onnx, spec).status();
  EXPECT_EQ(cv.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(cv.message(), HasSubstr("FP32 only"));
}

// An int8 variant (dynamic quantisation of the linear layers, made in Python
// with the oneDNN engine) runs through the torch executor, matches Python's
// outputs and keeps the float model's accuracy. Both ways of making one are
// covered: quantize_dynamic_jit on a TorchScript file (what the variant
// generator can do with a registered .pt), and eager quantize_dynamic then
// trace.
TEST_F(ExecutorTest, Int8DynamicQuantizedModelsRun) {
  EXPECT_EQ(internal::TorchQuantizedEngineName(), "ONEDNN");
  const testing::ZooModel& mlp = Model("mlp");
  absl::StatusOr<std::string> zoo_dir = testing::ZooDir();
  ASSERT_TRUE(zoo_dir.ok());
  testing::ScopedTempDir scratch;
  const std::string& dir = scratch.path();
  absl::Status made = testing::RunPython(dir, absl::StrCat(R"py(
import numpy as np, torch, torch.nn as nn
from torch.ao.quantization import default_dynamic_qconfig, quantize_dynamic, quantize_dynamic_jit
torch.backends.quantized.engine = 'onednn'
x = torch.from_numpy(np.load(')py", *zoo_dir, R"py(/valset.npz')['inputs'][:16])
q = quantize_dynamic_jit(torch.jit.load(')py", mlp.torchscript, R"py(').eval(), {'': default_dynamic_qconfig})
q.save('jit-int8.pt')
torch.manual_seed(0)
m = nn.Sequential(nn.Flatten(), nn.Linear(784, 64), nn.ReLU(), nn.Linear(64, 10)).eval()
e = torch.jit.trace(quantize_dynamic(m, {nn.Linear}, dtype=torch.qint8), torch.zeros(1, 1, 28, 28))
e.save('eager-int8.pt')
with torch.no_grad():
    np.savez('ref.npz', jit=q(x).numpy(), eager=e(x).numpy())
)py"));
  ASSERT_TRUE(made.ok()) << made;
  absl::StatusOr<std::string> ref_bytes = ReadFileToString(dir + "/ref.npz");
  ASSERT_TRUE(ref_bytes.ok());
  absl::StatusOr<std::map<std::string, Tensor>> ref = ParseNpz(*ref_bytes);
  ASSERT_TRUE(ref.ok()) << ref.status();

  for (const char* name : {"jit", "eager"}) {
    SCOPED_TRACE(name);
    absl::StatusOr<std::unique_ptr<Executor>> e =
        Create(Runtime::kTorch, absl::StrCat(dir, "/", name, "-int8.pt"));
    ASSERT_TRUE(e.ok()) << e.status();
    absl::StatusOr<std::vector<Tensor>> out = (*e)->Run(Images(0, 16));
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_LT(MaxAbsDiff(out->front(), ref->at(name)), 1e-4);
  }

  absl::StatusOr<std::unique_ptr<Executor>> fp32 = Create(Runtime::kTorch, mlp.torchscript);
  absl::StatusOr<std::unique_ptr<Executor>> int8 =
      Create(Runtime::kTorch, dir + "/jit-int8.pt");
  ASSERT_TRUE(fp32.ok() && int8.ok());
  absl::StatusOr<Tensor> inputs = SliceRows(valset_->inputs, 0, 2000);
  absl::StatusOr<Tensor> labels = SliceRows(valset_->labels, 0, 2000);
  ASSERT_TRUE(inputs.ok() && labels.ok());
  Valset subset{*inputs, *labels};
  absl::StatusOr<Accuracy> a = EvaluateTop1(**fp32, subset, 64);
  absl::StatusOr<Accuracy> b = EvaluateTop1(**int8, subset, 64);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NEAR(a->top1, b->top1, 0.01);
  std::cout << mlp.name << " on the first 2000 images: float " << a->top1 << ", int8 "
            << b->top1 << " (engine " << internal::TorchQuantizedEngineName() << ")\n";
}

}  // namespace
}  // namespace maitre::runtime
