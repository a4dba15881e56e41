#include "core/valset.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "core/npz.h"

namespace maitre {
namespace {

using ::testing::HasSubstr;

Tensor Zeros(std::string name, DataType dtype, std::vector<int64_t> shape) {
  Tensor t;
  t.name = std::move(name);
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.data.assign(static_cast<size_t>(t.NumElements()) * DataTypeSize(dtype), '\0');
  return t;
}

Tensor Labels(int64_t n) {
  Tensor t = Zeros("labels", DataType::kInt64, {n});
  for (int64_t i = 0; i < n; ++i) t.MutableAs<int64_t>()[i] = i % 10;
  return t;
}

ModelSpec ImageSpec() {
  ModelSpec spec;
  spec.inputs.push_back({"input", DataType::kFp32, {-1, 1, 28, 28}});
  spec.outputs.push_back({"logits", DataType::kFp32, {-1, 10}});
  return spec;
}

TEST(ValsetTest, ParsesInputsAndLabels) {
  absl::StatusOr<Valset> v = ParseValset(
      WriteNpz({Zeros("inputs", DataType::kFp32, {12, 1, 28, 28}), Labels(12),
                Zeros("extra", DataType::kUint8, {3})}));
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->size(), 12);
  EXPECT_EQ(v->labels.As<int64_t>()[11], 1);
  EXPECT_TRUE(CheckValsetFits(*v, ImageSpec()).ok());
}

TEST(ValsetTest, NamesWhatIsWrong) {
  struct Case {
    std::vector<Tensor> arrays;
    std::string message;
  };
  Tensor float_labels = Zeros("labels", DataType::kFp32, {4});
  Tensor grid_labels = Zeros("labels", DataType::kInt64, {4, 1});
  const std::vector<Case> cases = {
      {{Zeros("inputs", DataType::kFp32, {10000, 1, 28, 28}), Labels(9999)},
       "labels has 9999 entries but inputs has 10000 rows"},
      {{Zeros("inputs", DataType::kFp32, {4, 2}), float_labels},
       "labels must be int64, got FP32"},
      {{Zeros("inputs", DataType::kFp32, {4, 2}), grid_labels}, "labels must be 1-D"},
      {{Zeros("inputs", DataType::kFp32, {4, 2})}, "needs arrays 'inputs' and 'labels'"},
      {{Zeros("x", DataType::kFp32, {4, 2}), Labels(4)}, "it has: labels, x"},
      {{Zeros("inputs", DataType::kFp32, {}), Labels(1)}, "leading batch dimension"},
      {{Zeros("inputs", DataType::kFp32, {0, 3}), Labels(0)}, "no rows"},
  };
  for (const Case& c : cases) {
    absl::Status s = ParseValset(WriteNpz(c.arrays)).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(s.message(), HasSubstr(c.message));
  }
  absl::Status junk = ParseValset("a text file, not an npz").status();
  EXPECT_EQ(junk.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(junk.message(), HasSubstr("validation set"));
}

TEST(ValsetTest, ChecksFitAgainstTheModelInput) {
  Valset ok{Zeros("inputs", DataType::kFp32, {2, 1, 28, 28}), Labels(2)};
  EXPECT_TRUE(CheckValsetFits(ok, ImageSpec()).ok());

  Valset doubles{Zeros("inputs", DataType::kFp64, {2, 1, 28, 28}), Labels(2)};
  absl::Status s = CheckValsetFits(doubles, ImageSpec());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("FP64 [2,1,28,28]"));
  EXPECT_THAT(s.message(), HasSubstr("takes FP32 [-1,1,28,28]"));

  Valset wrong_size{Zeros("inputs", DataType::kFp32, {2, 1, 32, 32}), Labels(2)};
  EXPECT_FALSE(CheckValsetFits(wrong_size, ImageSpec()).ok());
  Valset flat{Zeros("inputs", DataType::kFp32, {2, 784}), Labels(2)};
  EXPECT_FALSE(CheckValsetFits(flat, ImageSpec()).ok());

  ModelSpec any_width = ImageSpec();
  any_width.inputs[0].shape = {-1, 1, -1, -1};
  EXPECT_TRUE(CheckValsetFits(wrong_size, any_width).ok());

  ModelSpec two_inputs = ImageSpec();
  two_inputs.inputs.push_back(two_inputs.inputs[0]);
  EXPECT_THAT(CheckValsetFits(ok, two_inputs).message(), HasSubstr("one input"));
}

TEST(ValsetTest, RefusesLabelsTheModelCannotOutput) {
  for (int64_t bad : {int64_t{10}, int64_t{-1}, int64_t{1} << 40}) {
    Valset v{Zeros("inputs", DataType::kFp32, {3, 1, 28, 28}), Labels(3)};
    v.labels.MutableAs<int64_t>()[2] = bad;
    absl::Status s = CheckValsetFits(v, ImageSpec());
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("label ", bad, " (row 2)")));
  }
  // Classes the spec leaves open: only negative labels are refused.
  ModelSpec open_classes = ImageSpec();
  open_classes.outputs[0].shape = {-1, -1};
  Valset many{Zeros("inputs", DataType::kFp32, {1, 1, 28, 28}), Labels(1)};
  many.labels.MutableAs<int64_t>()[0] = 500;
  EXPECT_TRUE(CheckValsetFits(many, open_classes).ok());
}

TEST(ValsetTest, SliceRowsCopiesTheRange) {
  Tensor t = Zeros("inputs", DataType::kInt32, {5, 2});
  for (int i = 0; i < 10; ++i) t.MutableAs<int32_t>()[i] = i;
  absl::StatusOr<Tensor> mid = SliceRows(t, 1, 3);
  ASSERT_TRUE(mid.ok()) << mid.status();
  EXPECT_EQ(mid->name, "inputs");
  EXPECT_EQ(mid->shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(mid->As<int32_t>()[0], 2);
  EXPECT_EQ(mid->As<int32_t>()[3], 5);
  absl::StatusOr<Tensor> empty = SliceRows(t, 5, 5);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->shape[0], 0);

  EXPECT_FALSE(SliceRows(t, 3, 2).ok());
  EXPECT_FALSE(SliceRows(t, -1, 2).ok());
  EXPECT_THAT(SliceRows(t, 0, 6).status().message(), HasSubstr("of 5 rows"));
  EXPECT_FALSE(SliceRows(Zeros("s", DataType::kFp32, {}), 0, 0).ok());
}

}  // namespace
}  // namespace maitre
