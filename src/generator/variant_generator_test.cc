#include "generator/variant_generator.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/clock.h"
#include "core/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/evaluate.h"
#include "runtime/executor.h"
#include "runtime/measure.h"
#include "runtime/testing/tensor_diff.h"
#include "runtime/testing/zoo.h"
#include "core/valset.h"

namespace maitre::generator {

// The generated files are checked by loading them in the runtime's executors.
using namespace ::maitre::runtime;  // NOLINT(build/namespaces)
namespace {

using ::testing::HasSubstr;

// Accuracy is compared on the first 1000 validation images: enough to see
// a quantisation that went wrong, quick enough for a unit test.
constexpr int64_t kAccuracyRows = 1000;
constexpr double kMaxInt8AccuracyDrop = 0.015;
constexpr float kOnnxTolerance = 1e-3f;

using testing::MaxAbsDiff;

class VariantGeneratorTest : public ::testing::Test {
 protected:
  // The C++ side runs int8 models on oneDNN, set here as at worker start.
  static void SetUpTestSuite() { ConfigureProcessThreads(1); }

  void SetUp() override {
    absl::StatusOr<std::vector<testing::ZooModel>> zoo = testing::LoadZoo();
    ASSERT_TRUE(zoo.ok()) << zoo.status();
    zoo_ = *zoo;
    absl::StatusOr<const Valset*> valset = testing::ZooValset();
    ASSERT_TRUE(valset.ok()) << valset.status();
    valset_ = *valset;
    options_.work_dir = tmp_.path() + "/work";
  }

  std::vector<Tensor> Images(int64_t begin, int64_t end) const {
    absl::StatusOr<Tensor> rows = SliceRows(valset_->inputs, begin, end);
    EXPECT_TRUE(rows.ok()) << rows.status();
    return {rows.ok() ? *rows : Tensor{}};
  }

  Valset FirstRows(int64_t n) const {
    Valset head;
    head.inputs = *SliceRows(valset_->inputs, 0, n);
    head.labels = *SliceRows(valset_->labels, 0, n);
    return head;
  }

  // Writes `contents` to a file in the test's directory and loads it.
  absl::StatusOr<std::unique_ptr<Executor>> Load(Runtime runtime, const std::string& name,
                                                 absl::string_view contents) const {
    std::string path = tmp_.path() + "/" + name;
    absl::Status written = WriteFileAtomically(path, contents);
    if (!written.ok()) return written;
    return LoadPath(runtime, path);
  }

  static absl::StatusOr<std::unique_ptr<Executor>> LoadPath(Runtime runtime,
                                                            const std::string& path) {
    ExecutorOptions options;
    options.runtime = runtime;
    options.model_path = path;
    options.spec = testing::FmnistSpec();
    return CreateExecutor(options);
  }

  // An executable shell script standing in for python, to drive the child
  // process handling without torch.
  std::string FakePython(const std::string& name, const std::string& body) const {
    // Run as root, the step runs as the sandbox user, who must reach it.
    chmod(tmp_.path().c_str(), 0711);
    std::string path = tmp_.path() + "/" + name;
    EXPECT_TRUE(WriteFileAtomically(path, "#!/bin/sh\n" + body).ok());
    chmod(path.c_str(), 0755);
    return path;
  }

  // Every step must remove its scratch directory, whatever happened.
  void ExpectWorkDirEmpty() const {
    std::error_code error;
    if (!std::filesystem::exists(options_.work_dir, error)) return;
    EXPECT_TRUE(std::filesystem::is_empty(options_.work_dir, error))
        << options_.work_dir << " still holds scratch files";
  }

  static double P50Ms(Executor& executor, const std::vector<Tensor>& row, int batch) {
    MeasureOptions options;
    options.batch_sizes = {batch};
    options.min_time_per_batch = 300 * kMillisecond;
    options.max_repetitions = 2000;
    options.clock = SteadyClock::Get();
    absl::StatusOr<std::vector<LatencyPoint>> points = MeasureLatencies(executor, row, options);
    EXPECT_TRUE(points.ok()) << points.status();
    return points.ok() && !points->empty() ? points->front().p50_ms : NAN;
  }

  testing::ScopedTempDir tmp_;
  GeneratorOptions options_;
  std::vector<testing::ZooModel> zoo_;
  const Valset* valset_ = nullptr;
};

TEST_F(VariantGeneratorTest, OptimizerIsAvailableWithDebianPython) {
  absl::Status status = CheckOptimizerAvailable(options_);
  EXPECT_TRUE(status.ok()) << status;
  ExpectWorkDirEmpty();
}

TEST_F(VariantGeneratorTest, BogusPythonIsReportedNotFaked) {
  options_.python = tmp_.path() + "/no-such-python3";
  absl::Status status = CheckOptimizerAvailable(options_);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_THAT(status.message(), HasSubstr("cannot run " + options_.python));
  EXPECT_THAT(status.message(), HasSubstr("No such file"));

  absl::StatusOr<std::string> int8 = QuantizeInt8("model bytes", testing::FmnistSpec(), options_);
  EXPECT_EQ(int8.status().code(), absl::StatusCode::kFailedPrecondition) << int8.status();
  ExpectWorkDirEmpty();
}

TEST_F(VariantGeneratorTest, PythonWithoutTorchIsUnavailable) {
  // -S skips site-packages, where Debian's torch lives: a python that
  // starts but cannot import torch, like the pyenv shim on PATH.
  std::string python = FakePython("python-no-torch", "exec /usr/bin/python3 -S \"$@\"\n");
  options_.python = python;
  absl::Status status = CheckOptimizerAvailable(options_);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_THAT(status.message(), HasSubstr("cannot import torch"));
}

TEST_F(VariantGeneratorTest, Int8KeepsAccuracyAndLoadsInTheTorchExecutor) {
  Valset head = FirstRows(kAccuracyRows);
  std::vector<Tensor> row = Images(0, 1);
  for (const testing::ZooModel& model : zoo_) {
    SCOPED_TRACE(model.name);
    absl::StatusOr<std::string> pt = ReadFileToString(model.torchscript);
    ASSERT_TRUE(pt.ok()) << pt.status();
    absl::StatusOr<std::string> int8 = QuantizeInt8(*pt, testing::FmnistSpec(), options_);
    ASSERT_TRUE(int8.ok()) << int8.status();
    EXPECT_NE(*int8, *pt);

    absl::StatusOr<std::unique_ptr<Executor>> quantized =
        Load(Runtime::kTorch, model.name + "-int8.pt", *int8);
    ASSERT_TRUE(quantized.ok()) << quantized.status();
    absl::StatusOr<std::unique_ptr<Executor>> original = LoadPath(Runtime::kTorch, model.torchscript);
    ASSERT_TRUE(original.ok()) << original.status();

    absl::StatusOr<Accuracy> float_acc = EvaluateTop1(**original, head, 64);
    absl::StatusOr<Accuracy> int8_acc = EvaluateTop1(**quantized, head, 64);
    ASSERT_TRUE(float_acc.ok()) << float_acc.status();
    ASSERT_TRUE(int8_acc.ok()) << int8_acc.status();
    EXPECT_EQ(int8_acc->examples, kAccuracyRows);
    EXPECT_GE(int8_acc->top1, float_acc->top1 - kMaxInt8AccuracyDrop)
        << "int8 lost more than 1.5 points";

    // Reported, not asserted (docs/architecture.md, "Tests and benchmarks"):
    // the speed of int8 is a profile.
    double f1 = P50Ms(**original, row, 1), q1 = P50Ms(**quantized, row, 1);
    double f8 = P50Ms(**original, row, 8), q8 = P50Ms(**quantized, row, 8);
    std::cout << absl::StrFormat(
        "[ int8     ] %-16s top-1 on %d images: float %.4f int8 %.4f | p50 ms batch 1: "
        "float %.3f int8 %.3f (x%.2f) | batch 8: float %.3f int8 %.3f (x%.2f) | %zu -> %zu bytes\n",
        model.name, kAccuracyRows, float_acc->top1, int8_acc->top1, f1, q1, f1 / q1, f8, q8,
        f8 / q8, pt->size(), int8->size());
  }
  ExpectWorkDirEmpty();
}

TEST_F(VariantGeneratorTest, OnnxExportMatchesTorchThroughOpenCv) {
  for (const testing::ZooModel& model : zoo_) {
    SCOPED_TRACE(model.name);
    absl::StatusOr<std::string> pt = ReadFileToString(model.torchscript);
    ASSERT_TRUE(pt.ok()) << pt.status();
    absl::StatusOr<std::string> onnx = ExportOnnx(*pt, testing::FmnistSpec(), options_);
    ASSERT_TRUE(onnx.ok()) << onnx.status();

    absl::StatusOr<std::unique_ptr<Executor>> opencv =
        Load(Runtime::kOpenCv, model.name + ".onnx", *onnx);
    ASSERT_TRUE(opencv.ok()) << opencv.status();
    absl::StatusOr<std::unique_ptr<Executor>> torch = LoadPath(Runtime::kTorch, model.torchscript);
    ASSERT_TRUE(torch.ok()) << torch.status();

    // Different images at each batch, and batch 7 after 1, so the dynamic
    // batch dimension is exercised in both directions of a reshape.
    for (auto [begin, end] : {std::pair<int64_t, int64_t>{0, 1}, {10, 17}, {3, 4}}) {
      std::vector<Tensor> images = Images(begin, end);
      absl::StatusOr<std::vector<Tensor>> want = (*torch)->Run(images);
      absl::StatusOr<std::vector<Tensor>> got = (*opencv)->Run(images);
      ASSERT_TRUE(want.ok()) << want.status();
      ASSERT_TRUE(got.ok()) << got.status();
      ASSERT_EQ(got->size(), 1u);
      EXPECT_EQ((*got)[0].name, "logits");
      EXPECT_LE(MaxAbsDiff((*got)[0], (*want)[0]), kOnnxTolerance)
          << "rows [" << begin << ", " << end << ")";
    }
  }
  ExpectWorkDirEmpty();
}

TEST_F(VariantGeneratorTest, CorruptModelIsInvalidArgument) {
  std::mt19937 random(7);
  std::string garbage(4096, '\0');
  for (char& c : garbage) c = static_cast<char>(random());
  absl::StatusOr<std::string> int8 = QuantizeInt8(garbage, testing::FmnistSpec(), options_);
  EXPECT_EQ(int8.status().code(), absl::StatusCode::kInvalidArgument) << int8.status();
  EXPECT_THAT(int8.status().message(), HasSubstr("int8 quantisation: not a TorchScript model"));
  EXPECT_THAT(int8.status().message(), HasSubstr("PytorchStreamReader failed"));
  std::cout << "[ message  ] " << int8.status() << "\n";

  absl::StatusOr<std::string> onnx = ExportOnnx(garbage, testing::FmnistSpec(), options_);
  EXPECT_EQ(onnx.status().code(), absl::StatusCode::kInvalidArgument) << onnx.status();
  EXPECT_THAT(onnx.status().message(), HasSubstr("ONNX export: not a TorchScript model"));
  ExpectWorkDirEmpty();
}

TEST_F(VariantGeneratorTest, ModelThatBreaksItsSpecIsInvalidArgument) {
  absl::StatusOr<std::string> pt = ReadFileToString(zoo_.front().torchscript);
  ASSERT_TRUE(pt.ok()) << pt.status();
  ModelSpec spec = testing::FmnistSpec();
  spec.outputs[0].shape = {-1, 11};
  absl::StatusOr<std::string> int8 = QuantizeInt8(*pt, spec, options_);
  EXPECT_EQ(int8.status().code(), absl::StatusCode::kInvalidArgument) << int8.status();
  EXPECT_THAT(int8.status().message(), HasSubstr("returns shape [1, 10] for output 'logits'"));
}

TEST_F(VariantGeneratorTest, ModelWithoutLinearLayersHasNothingToQuantise) {
  ASSERT_TRUE(testing::RunPython(tmp_.path(), R"py(
import torch
model = torch.nn.Sequential(torch.nn.Conv2d(1, 10, 28), torch.nn.Flatten())
torch.jit.script(model.eval()).save("conv-only.pt")
)py")
                  .ok());
  absl::StatusOr<std::string> pt = ReadFileToString(tmp_.path() + "/conv-only.pt");
  ASSERT_TRUE(pt.ok()) << pt.status();
  absl::StatusOr<std::string> int8 = QuantizeInt8(*pt, testing::FmnistSpec(), options_);
  EXPECT_EQ(int8.status().code(), absl::StatusCode::kFailedPrecondition) << int8.status();
  EXPECT_THAT(int8.status().message(), HasSubstr("nothing to quantise"));
  ExpectWorkDirEmpty();
}

TEST_F(VariantGeneratorTest, RefusesWhatTheStepsCannotTake) {
  ModelSpec onnx_spec = testing::FmnistSpec();
  onnx_spec.format = ModelFormat::kOnnx;
  EXPECT_EQ(QuantizeInt8("x", onnx_spec, options_).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(QuantizeInt8("", testing::FmnistSpec(), options_).status().code(),
            absl::StatusCode::kInvalidArgument);

  ModelSpec int_spec = testing::FmnistSpec();
  int_spec.inputs[0].dtype = DataType::kInt64;
  absl::StatusOr<std::string> onnx = ExportOnnx("x", int_spec, options_);
  EXPECT_EQ(onnx.status().code(), absl::StatusCode::kFailedPrecondition) << onnx.status();
  EXPECT_THAT(onnx.status().message(), HasSubstr("FP32 models only"));

  GeneratorOptions no_time = options_;
  no_time.timeout = 0;
  EXPECT_EQ(QuantizeInt8("x", testing::FmnistSpec(), no_time).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(VariantGeneratorTest, StepPastItsTimeoutIsKilled) {
  // The sleep is a grandchild: killing the whole process group is what lets
  // the pipe close.
  options_.python = FakePython("slow-python", "echo 'loading the model' >&2\nsleep 60\n");
  options_.timeout = 300 * kMillisecond;
  absl::StatusOr<std::string> int8 = QuantizeInt8("x", testing::FmnistSpec(), options_);
  EXPECT_EQ(int8.status().code(), absl::StatusCode::kDeadlineExceeded) << int8.status();
  EXPECT_THAT(int8.status().message(), HasSubstr("ran past its timeout of 0.3 s"));
  EXPECT_THAT(int8.status().message(), HasSubstr("loading the model"));
  ExpectWorkDirEmpty();
}

TEST_F(VariantGeneratorTest, CrashedPythonIsInternalWithItsLastWords) {
  options_.python = FakePython("crashing-python", "echo 'about to fall over' >&2\nkill -SEGV $$\n");
  absl::StatusOr<std::string> onnx = ExportOnnx("x", testing::FmnistSpec(), options_);
  EXPECT_EQ(onnx.status().code(), absl::StatusCode::kInternal) << onnx.status();
  EXPECT_THAT(onnx.status().message(), HasSubstr("was killed by SIGSEGV"));
  EXPECT_THAT(onnx.status().message(), HasSubstr("about to fall over"));

  // A traceback (exit 1) is internal too, and its end is what is reported.
  std::string many_lines;
  for (int i = 0; i < 100; ++i) many_lines += absl::StrCat("echo 'frame ", i, "' >&2\n");
  options_.python = FakePython("failing-python", many_lines + "exit 1\n");
  absl::StatusOr<std::string> int8 = QuantizeInt8("x", testing::FmnistSpec(), options_);
  EXPECT_EQ(int8.status().code(), absl::StatusCode::kInternal) << int8.status();
  EXPECT_THAT(int8.status().message(), HasSubstr("exited with status 1"));
  EXPECT_THAT(int8.status().message(), HasSubstr("frame 99"));
  EXPECT_THAT(int8.status().message(), ::testing::Not(HasSubstr("frame 50\n")));

  // A traceback names the script (argument 3, after -c and its code); the
  // message, which clients read as the variant's detail, names it alone.
  options_.python = FakePython("tracing-python",
                               "echo \"  File \\\"$3\\\", line 3, in main\" >&2\nexit 1\n");
  int8 = QuantizeInt8("x", testing::FmnistSpec(), options_);
  EXPECT_EQ(int8.status().code(), absl::StatusCode::kInternal) << int8.status();
  EXPECT_THAT(int8.status().message(), HasSubstr("File \"quantize_int8.py\", line 3"));
  EXPECT_THAT(int8.status().message(), ::testing::Not(HasSubstr(options_.work_dir)));
  ExpectWorkDirEmpty();
}

TEST_F(VariantGeneratorTest, ConcurrentStepsKeepTheirOwnFiles) {
  // A stand-in step that copies the model to the output path after a
  // pause, so the calls overlap. It is called as `python -c CODE script
  // model spec output`.
  options_.python = FakePython("copying-python", "sleep 0.2\ncp \"$4\" \"$6\"\n");
  constexpr int kCalls = 4;
  std::vector<absl::StatusOr<std::string>> results(kCalls, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int i = 0; i < kCalls; ++i) {
    threads.emplace_back([&, i] {
      results[i] = QuantizeInt8(absl::StrCat("model number ", i), testing::FmnistSpec(), options_);
    });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kCalls; ++i) {
    ASSERT_TRUE(results[i].ok()) << results[i].status();
    EXPECT_EQ(*results[i], absl::StrCat("model number ", i));
  }
  ExpectWorkDirEmpty();
}

// Models that read and write host files through torch.from_file, as an
// uploaded model may. The step runs the model, so it must run confined.
TEST_F(VariantGeneratorTest, AModelThatTouchesHostFilesFailsTheStepAndTouchesNothing) {
  // A directory anyone may write, so that only the sandbox stands between
  // the model and the file it plants there.
  const std::string open_dir = tmp_.path() + "/open";
  ASSERT_TRUE(MakeDirectories(open_dir).ok());
  chmod(tmp_.path().c_str(), 0711);
  chmod(open_dir.c_str(), 0777);
  const std::string planted = open_dir + "/planted";
  ASSERT_TRUE(testing::RunPython(tmp_.path(), absl::StrCat(R"(
import torch
class Reader(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(784, 10)
    def forward(self, x):
        leak = torch.from_file("/etc/passwd", shared=False, size=16, dtype=torch.uint8)
        return self.fc(x.flatten(1)) + leak.float().sum()
class Writer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(784, 10)
    def forward(self, x):
        t = torch.from_file(")", planted, R"(", shared=True, size=16, dtype=torch.uint8)
        t.fill_(65)
        return self.fc(x.flatten(1)) + t.float().sum() * 0
torch.jit.script(Reader()).save("reader.pt")
torch.jit.script(Writer()).save("writer.pt")
)")).ok());
  for (const char* name : {"reader.pt", "writer.pt"}) {
    SCOPED_TRACE(name);
    absl::StatusOr<std::string> model = ReadFileToString(tmp_.path() + "/" + name);
    ASSERT_TRUE(model.ok());
    absl::StatusOr<std::string> int8 = QuantizeInt8(*model, testing::FmnistSpec(), options_);
    EXPECT_EQ(int8.status().code(), absl::StatusCode::kInvalidArgument) << int8.status();
    EXPECT_THAT(std::string(int8.status().message()), HasSubstr("Permission denied"));
  }
  EXPECT_FALSE(std::filesystem::exists(planted));
  ExpectWorkDirEmpty();

  // The same writer, unconfined, does plant its file: the test's model
  // really tries what the sandbox stops.
  GeneratorOptions unconfined = options_;
  unconfined.sandbox = SandboxMode::kOff;
  absl::StatusOr<std::string> writer = ReadFileToString(tmp_.path() + "/writer.pt");
  ASSERT_TRUE(writer.ok());
  (void)QuantizeInt8(*writer, testing::FmnistSpec(), unconfined);
  EXPECT_TRUE(std::filesystem::exists(planted));
}

}  // namespace
}  // namespace maitre::generator
