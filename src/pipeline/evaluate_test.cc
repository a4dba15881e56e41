#include "pipeline/evaluate.h"

#include <cmath>
#include <limits>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace maitre::pipeline {
namespace {

using ::testing::HasSubstr;

Tensor Fp32(std::vector<int64_t> shape, const std::vector<float>& values) {
  Tensor t;
  t.name = "logits";
  t.dtype = DataType::kFp32;
  t.shape = std::move(shape);
  t.data.assign(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  return t;
}

Predicate Unsure(double threshold) {
  Predicate p;
  p.output = "logits";
  p.kind = Predicate::Kind::kMaxSoftmaxBelow;
  p.threshold = threshold;
  return p;
}

TEST(EvaluateTest, MaxSoftmaxBelowPicksTheUnsureRows) {
  // Row 0: logits (ln 8, 0, 0): p = 8/10 = 0.8, below 0.8001, not below 0.79.
  // Row 1: equal logits: p = 1/3. Row 2: a large margin: p = 1.
  const float ln8 = std::log(8.0f);
  const Tensor t = Fp32({3, 3}, {ln8, 0, 0, 1, 1, 1, 50, 0, -50});
  auto unsure = EvaluatePredicate(Unsure(0.8001), t);
  ASSERT_TRUE(unsure.ok()) << unsure.status();
  EXPECT_EQ(*unsure, (std::vector<bool>{true, true, false}));
  unsure = EvaluatePredicate(Unsure(0.79), t);
  EXPECT_EQ(*unsure, (std::vector<bool>{false, true, false}));
  Predicate sure = Unsure(0.79);
  sure.kind = Predicate::Kind::kMaxSoftmaxAtLeast;
  EXPECT_EQ(*EvaluatePredicate(sure, t), (std::vector<bool>{true, false, true}));
}

TEST(EvaluateTest, ArgmaxInTakesTheFirstOfEqualMaxima) {
  Predicate p;
  p.kind = Predicate::Kind::kArgmaxIn;
  p.classes = {1, 2};
  const Tensor t = Fp32({3, 3}, {0, 5, 1, 3, 3, 3, 9, 0, 9.5f});
  EXPECT_EQ(*EvaluatePredicate(p, t), (std::vector<bool>{true, false, true}));
}

TEST(EvaluateTest, TransformsGiveProbabilitiesAndLabels) {
  const Tensor t = Fp32({2, 2}, {0, 0, 1000, 0});  // 1000: safe without overflow
  auto soft = ApplyTransform(Transform::kSoftmax, t);
  ASSERT_TRUE(soft.ok()) << soft.status();
  EXPECT_EQ(soft->shape, t.shape);
  EXPECT_FLOAT_EQ(soft->As<float>()[0], 0.5f);
  EXPECT_FLOAT_EQ(soft->As<float>()[2], 1.0f);
  EXPECT_FLOAT_EQ(soft->As<float>()[3], 0.0f);
  auto labels = ApplyTransform(Transform::kArgmax, t);
  ASSERT_TRUE(labels.ok()) << labels.status();
  EXPECT_EQ(labels->dtype, DataType::kInt64);
  EXPECT_EQ(labels->shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(labels->As<int64_t>()[0], 0);
  EXPECT_EQ(labels->As<int64_t>()[1], 0);
  EXPECT_TRUE(labels->Validate().ok());
  EXPECT_EQ(ApplyTransform(Transform::kIdentity, t)->data, t.data);
}

TEST(EvaluateTest, RefusesWhatItCannotJudge) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THAT(EvaluatePredicate(Unsure(0.8), Fp32({2, 2}, {0, 1, nan, 0})).status().message(),
              HasSubstr("row 1 holds a non-finite score"));
  EXPECT_THAT(EvaluatePredicate(Unsure(0.8), Fp32({4}, {0, 1, 2, 3})).status().message(),
              HasSubstr("[batch, classes]"));
  Tensor ints;
  ints.name = "labels";
  ints.dtype = DataType::kInt64;
  ints.shape = {1, 1};
  ints.data.assign(8, '\0');
  EXPECT_FALSE(ApplyTransform(Transform::kSoftmax, ints).ok());
  Tensor short_data = Fp32({2, 2}, {0, 1, 2});
  EXPECT_FALSE(EvaluatePredicate(Unsure(0.8), short_data).ok());
}

}  // namespace
}  // namespace maitre::pipeline
