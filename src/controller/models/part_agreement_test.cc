// The same-model check on outputs computed here; the check on real parts run
// by a worker is in tests/e2e_variants_test.cc.
#include "controller/models/part_agreement.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>

namespace maitre::controller {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

ModelSpec Classifier() {
  ModelSpec spec;
  spec.inputs = {{"input", DataType::kFp32, {-1, 1, 4, 4}}};
  spec.outputs = {{"logits", DataType::kFp32, {-1, 10}}};
  return spec;
}

Tensor Logits(int64_t rows, float (*value)(int64_t row, int64_t cls)) {
  Tensor t{"logits", DataType::kFp32, {rows, 10}, std::string(rows * 10 * 4, '\0')};
  float* f = t.MutableAs<float>();
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < 10; ++c) f[r * 10 + c] = value(r, c);
  }
  return t;
}

// Class r % 10 wins each row by a clear margin.
float Clear(int64_t r, int64_t c) { return c == r % 10 ? 8.0f : static_cast<float>(c) * 0.1f; }

TEST(AgreementSampleTest, SyntheticRowsAreDeterministicAndShapedLikeTheInput) {
  AgreementOptions options;
  auto a = MakeAgreementSample(Classifier(), nullptr, options);
  auto b = MakeAgreementSample(Classifier(), nullptr, options);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(a->rows, 64);
  EXPECT_EQ(a->rows_are, "synthetic rows");
  ASSERT_EQ(a->inputs.size(), 1u);
  EXPECT_EQ(a->inputs[0].shape, (std::vector<int64_t>{64, 1, 4, 4}));
  EXPECT_TRUE(a->inputs[0].data == b->inputs[0].data);
  const float* f = a->inputs[0].As<float>();
  bool varied = false;
  for (int64_t i = 0; i < a->inputs[0].NumElements(); ++i) {
    EXPECT_GE(f[i], 0.0f);
    EXPECT_LT(f[i], 1.0f);
    varied |= f[i] != f[0];
  }
  EXPECT_TRUE(varied);
}

TEST(AgreementSampleTest, ValsetRowsAreTheFirstOnesAndAtMostMaxRows) {
  Valset valset;
  valset.inputs = {"x", DataType::kFp32, {100, 1, 4, 4}, std::string(100 * 16 * 4, '\0')};
  for (int64_t i = 0; i < 100 * 16; ++i) valset.inputs.MutableAs<float>()[i] = i;
  valset.labels = {"y", DataType::kInt64, {100}, std::string(100 * 8, '\0')};
  auto sample = MakeAgreementSample(Classifier(), &valset, AgreementOptions{});
  ASSERT_TRUE(sample.ok()) << sample.status();
  EXPECT_EQ(sample->rows, 64);
  EXPECT_EQ(sample->rows_are, "validation rows");
  EXPECT_EQ(sample->inputs[0].name, "input");
  EXPECT_EQ(sample->inputs[0].shape[0], 64);
  EXPECT_EQ(sample->inputs[0].As<float>()[17], 17.0f);
}

TEST(AgreementSampleTest, LargeRowsAreFewerButAtLeastOne) {
  AgreementOptions options;
  options.max_sample_bytes = 10 * 16 * 4;  // ten rows of 1x4x4 floats
  auto sample = MakeAgreementSample(Classifier(), nullptr, options);
  ASSERT_TRUE(sample.ok()) << sample.status();
  EXPECT_EQ(sample->rows, 10);
  EXPECT_EQ(sample->inputs[0].shape[0], 10);
  options.max_sample_bytes = 1;
  sample = MakeAgreementSample(Classifier(), nullptr, options);
  ASSERT_TRUE(sample.ok()) << sample.status();
  EXPECT_EQ(sample->rows, 1);
}

TEST(AgreementSampleTest, AnInputOfUnknownSizeCannotBeSynthesised) {
  ModelSpec spec = Classifier();
  spec.inputs[0].shape = {-1, -1};
  EXPECT_TRUE(absl::IsFailedPrecondition(
      MakeAgreementSample(spec, nullptr, AgreementOptions{}).status()));
}

TEST(CheckPartsAgreeTest, FloatNoiseAndOneNearTieFlipAreTheSameModel) {
  AgreementOptions options;
  AgreementSample sample;
  sample.rows = 64;
  sample.rows_are = "validation rows";
  Tensor torch = Logits(64, Clear);
  Tensor onnx = Logits(64, [](int64_t r, int64_t c) { return Clear(r, c) + 2e-5f; });
  auto agreed = CheckPartsAgree(Classifier(), sample, {torch}, {onnx}, options);
  ASSERT_TRUE(agreed.ok()) << agreed.status();
  EXPECT_NEAR(*agreed, 2e-5, 1e-6);

  // Row 0 is a near tie between classes 0 and 1 that the kernels break apart.
  torch.MutableAs<float>()[1] = 8.0f - 1e-6f;
  onnx.MutableAs<float>()[1] = 8.0f + 1e-6f;
  EXPECT_TRUE(CheckPartsAgree(Classifier(), sample, {torch}, {onnx}, options).ok());
}

TEST(CheckPartsAgreeTest, AnotherModelIsRefusedWithTheRowsAndTheLargestDifference) {
  AgreementSample sample;
  sample.rows = 64;
  sample.rows_are = "validation rows";
  Tensor torch = Logits(64, Clear);
  Tensor onnx = Logits(64, [](int64_t r, int64_t c) { return Clear(r + 3, c); });
  absl::Status s =
      CheckPartsAgree(Classifier(), sample, {torch}, {onnx}, AgreementOptions{}).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("the ONNX part disagrees with the TorchScript part on 64 "
                                     "of 64 validation rows (max |Δ| 8 on output 'logits'"));
  EXPECT_THAT(s.message(), HasSubstr("the top-1 class differs on 64"));
  EXPECT_THAT(s.message(), HasSubstr("they must be the same model"));
}

TEST(CheckPartsAgreeTest, SameTopClassButOtherScoresIsStillAnotherModel) {
  AgreementSample sample;
  sample.rows = 64;
  sample.rows_are = "synthetic rows";
  Tensor torch = Logits(64, Clear);
  Tensor onnx = Logits(64, [](int64_t r, int64_t c) { return Clear(r, c) * 1.5f; });
  absl::Status s =
      CheckPartsAgree(Classifier(), sample, {torch}, {onnx}, AgreementOptions{}).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("of 64 synthetic rows"));
  EXPECT_THAT(s.message(), Not(HasSubstr("top-1")));
}

TEST(CheckPartsAgreeTest, OutputsOfAnotherShapeAreRefusedByName) {
  AgreementSample sample;
  sample.rows = 2;
  Tensor torch = Logits(2, Clear);
  Tensor onnx{"logits", DataType::kFp32, {2, 4}, std::string(2 * 4 * 4, '\0')};
  absl::Status s =
      CheckPartsAgree(Classifier(), sample, {torch}, {onnx}, AgreementOptions{}).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_THAT(s.message(),
              HasSubstr("its output 'logits' is [2,4], the TorchScript part's [2,10]"));
}

}  // namespace
}  // namespace maitre::controller
