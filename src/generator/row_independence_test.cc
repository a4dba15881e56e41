// A row's answer never depends on the rows batched with it
// (docs/architecture.md, "A row's answer never depends on its batch"): for
// every variant the controller makes of every zoo model (torch, torch-opt,
// torch-int8 from the generator, opencv from the registered ONNX file and
// from the generator's export), validation images alone and inside batches
// with extreme neighbours (+-1e30, +-FLT_MAX, 1e-30, denormals, zeros, and
// NaN and +-Inf, which the front-ends refuse but a worker must survive) give
// the same class and logits within a stated tolerance, and the batch runs.

#include <cmath>
#include <cstring>
#include <functional>
#include <iostream>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/file_util.h"
#include "core/valset.h"
#include "generator/variant_generator.h"
#include "gtest/gtest.h"
#include "runtime/executor.h"
#include "runtime/testing/zoo.h"

namespace maitre::generator {

using namespace ::maitre::runtime;  // NOLINT(build/namespaces)
namespace {

// How far an image's logits may move between batch sizes. The float kernels
// add up in another order at another batch size (the zoo's variants move by
// under 1e-5). An int8 layer after float ones can turn such a difference
// into one step of its input's quantisation when a value lies on a rounding
// boundary: the wide CNN's int8 variant moves 4 of 500 validation images by
// up to 2.6e-3 between batch 1 and 2, 5 or 8 of other images alone. The
// damage this guards against moved logits by whole units and more.
constexpr float kFloatTolerance = 1e-3f;
constexpr float kInt8Tolerance = 1e-2f;
// Validation images per model: 6 rows, each alone and in every batch.
constexpr int64_t kNormalRows = 6;

struct Neighbour {
  std::string name;
  std::function<float(int64_t element)> value;
};

std::vector<Neighbour> ExtremeNeighbours() {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float max = std::numeric_limits<float>::max();
  auto constant = [](float v) { return [v](int64_t) { return v; }; };
  auto alternating = [](float v) { return [v](int64_t i) { return i % 2 ? -v : v; }; };
  return {
      {"+1e30", constant(1e30f)},
      {"-1e30", constant(-1e30f)},
      {"+-1e30", alternating(1e30f)},
      {"+FLT_MAX", constant(max)},
      {"+-FLT_MAX", alternating(max)},
      {"1e-30", constant(1e-30f)},
      {"denormal", constant(std::numeric_limits<float>::denorm_min())},
      {"zeros", constant(0)},
      {"NaN", constant(nan)},
      {"one NaN", [nan](int64_t i) { return i == 400 ? nan : 0.5f; }},
      {"+Inf", constant(inf)},
      {"-Inf", constant(-inf)},
      {"+-Inf", alternating(inf)},
  };
}

struct Variant {
  std::string name;
  std::unique_ptr<Executor> executor;
  float tolerance = kFloatTolerance;
};

class RowIndependenceTest : public ::testing::TestWithParam<std::string> {
 protected:
  // The C++ side runs int8 models on oneDNN, set here as at worker start.
  static void SetUpTestSuite() { ConfigureProcessThreads(1); }

  absl::StatusOr<std::unique_ptr<Executor>> Load(Runtime runtime, const std::string& path,
                                                 bool optimize = false) const {
    ExecutorOptions options;
    options.runtime = runtime;
    options.model_path = path;
    options.spec = spec_;
    options.optimize_for_inference = optimize;
    return CreateExecutor(options);
  }

  absl::StatusOr<std::unique_ptr<Executor>> LoadBytes(Runtime runtime, const std::string& name,
                                                      absl::string_view bytes) const {
    std::string path = tmp_.path() + "/" + name;
    if (absl::Status s = WriteFileAtomically(path, bytes); !s.ok()) return s;
    return Load(runtime, path);
  }

  // Every variant of `model` as the controller makes them.
  std::vector<Variant> Variants(const testing::ZooModel& model) {
    std::vector<Variant> variants;
    auto add = [&](const std::string& name, absl::StatusOr<std::unique_ptr<Executor>> e) {
      EXPECT_TRUE(e.ok()) << name << ": " << e.status();
      if (e.ok()) variants.push_back({name, *std::move(e)});
    };
    add("torch", Load(Runtime::kTorch, model.torchscript));
    add("torch-opt", Load(Runtime::kTorch, model.torchscript, /*optimize=*/true));
    add("opencv (registered ONNX)", Load(Runtime::kOpenCv, model.onnx));
    absl::StatusOr<std::string> pt = ReadFileToString(model.torchscript);
    EXPECT_TRUE(pt.ok()) << pt.status();
    if (!pt.ok()) return variants;
    GeneratorOptions options;
    options.work_dir = tmp_.path() + "/work";
    absl::StatusOr<std::string> int8 = QuantizeInt8(*pt, spec_, options);
    EXPECT_TRUE(int8.ok()) << int8.status();
    if (int8.ok()) {
      add("torch-int8", LoadBytes(Runtime::kTorch, model.name + "-int8.pt", *int8));
      if (variants.back().name == "torch-int8") variants.back().tolerance = kInt8Tolerance;
    }
    absl::StatusOr<std::string> onnx = ExportOnnx(*pt, spec_, options);
    EXPECT_TRUE(onnx.ok()) << onnx.status();
    if (onnx.ok()) {
      add("opencv (generated ONNX)", LoadBytes(Runtime::kOpenCv, model.name + ".onnx", *onnx));
    }
    return variants;
  }

  testing::ScopedTempDir tmp_;
  ModelSpec spec_;
};

std::string Row(const Tensor& images, int64_t r) {
  const size_t row_bytes = images.data.size() / images.shape[0];
  return images.data.substr(r * row_bytes, row_bytes);
}

std::string ExtremeRow(const Neighbour& n, int64_t elements) {
  std::string row(elements * sizeof(float), '\0');
  for (int64_t i = 0; i < elements; ++i) {
    float v = n.value(i);
    std::memcpy(row.data() + i * sizeof(float), &v, sizeof v);
  }
  return row;
}

// One image per row of a batch, in order.
Tensor Batch(const Tensor& like, const std::vector<std::string>& rows) {
  Tensor t{like.name, like.dtype, like.shape, ""};
  t.shape[0] = static_cast<int64_t>(rows.size());
  for (const std::string& row : rows) t.data += row;
  return t;
}

int64_t Argmax(const float* logits, int64_t classes) {
  int64_t best = 0;
  for (int64_t c = 1; c < classes; ++c) {
    if (logits[c] > logits[best]) best = c;
  }
  return best;
}

TEST_P(RowIndependenceTest, EveryVariantAnswersARowAsItDoesAlone) {
  const std::string subdir = GetParam();
  absl::StatusOr<std::vector<testing::ZooModel>> zoo = testing::LoadZoo(subdir);
  ASSERT_TRUE(zoo.ok()) << zoo.status();
  absl::StatusOr<const Valset*> valset = testing::ZooValset(subdir);
  ASSERT_TRUE(valset.ok()) << valset.status();
  const int64_t classes = subdir.empty() ? 10 : testing::kCoarseClasses;
  spec_ = testing::FmnistSpec(classes);
  absl::StatusOr<Tensor> images = SliceRows((*valset)->inputs, 0, kNormalRows);
  ASSERT_TRUE(images.ok()) << images.status();
  images->name = spec_.inputs[0].name;
  const int64_t row_elements = images->NumElements() / kNormalRows;
  std::vector<std::string> normal;
  for (int64_t r = 0; r < kNormalRows; ++r) normal.push_back(Row(*images, r));

  for (const testing::ZooModel& model : *zoo) {
    for (Variant& variant : Variants(model)) {
      SCOPED_TRACE(absl::StrCat(model.name, ":", variant.name));
      // Each row alone: the answers every batch must reproduce.
      std::vector<std::vector<float>> alone;
      for (const std::string& row : normal) {
        absl::StatusOr<std::vector<Tensor>> out = variant.executor->Run({Batch(*images, {row})});
        ASSERT_TRUE(out.ok()) << out.status();
        const float* logits = (*out)[0].As<float>();
        alone.emplace_back(logits, logits + classes);
      }
      float worst = 0;
      for (const Neighbour& n : ExtremeNeighbours()) {
        SCOPED_TRACE(n.name);
        const std::string extreme = ExtremeRow(n, row_elements);
        // Extreme rows first, among and after the images, and a batch of
        // two, so that a kernel blocking rows in groups sees them anywhere.
        std::vector<std::string> rows = {extreme,   normal[0], normal[1], normal[2], extreme,
                                         normal[3], normal[4], normal[5], extreme};
        std::vector<int64_t> image_of = {-1, 0, 1, 2, -1, 3, 4, 5, -1};
        for (const auto& [batch_rows, which] :
             {std::pair{rows, image_of}, std::pair{std::vector<std::string>{extreme, normal[0]},
                                                   std::vector<int64_t>{-1, 0}}}) {
          absl::StatusOr<std::vector<Tensor>> out =
              variant.executor->Run({Batch(*images, batch_rows)});
          ASSERT_TRUE(out.ok()) << "the batch failed: " << out.status();
          const float* logits = (*out)[0].As<float>();
          for (size_t i = 0; i < which.size(); ++i) {
            if (which[i] < 0) continue;
            const std::vector<float>& want = alone[which[i]];
            const float* got = logits + i * classes;
            EXPECT_EQ(Argmax(got, classes), Argmax(want.data(), classes))
                << "image " << which[i] << " at row " << i << " of " << which.size();
            for (int64_t c = 0; c < classes; ++c) {
              const float diff = std::fabs(got[c] - want[c]);
              // NaN compares false: a NaN logit fails here too.
              EXPECT_TRUE(diff <= variant.tolerance)
                  << "image " << which[i] << " at row " << i << ", class " << c << ": " << got[c]
                  << " beside neighbours, " << want[c] << " alone";
              if (diff > worst) worst = diff;
            }
          }
        }
      }
      std::cout << absl::StrFormat("[ rows     ] %-40s largest logit change %.3g\n",
                                   absl::StrCat(model.name, ":", variant.name), worst);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Zoos, RowIndependenceTest,
                         ::testing::Values(std::string(""), std::string(testing::kCoarseZoo)),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param.empty() ? std::string("Fashion")
                                                     : std::string("Coarse");
                         });

}  // namespace
}  // namespace maitre::generator
