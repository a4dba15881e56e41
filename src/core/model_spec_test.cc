#include "core/model_spec.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

#include "core/zero_row.h"

namespace maitre {
namespace {

constexpr char kMeta[] = R"({"format":"torchscript",
  "inputs":[{"name":"input","datatype":"FP32","shape":[-1,1,28,28]}],
  "outputs":[{"name":"logits","datatype":"FP32","shape":[-1,10]}],
  "accuracy":0.9})";

Tensor Image(int batch, std::string name = "input") {
  return Tensor{std::move(name), DataType::kFp32, {batch, 1, 28, 28},
                std::string(batch * 784 * 4, '\0')};
}

TEST(ModelSpecTest, ParsesAndRoundTrips) {
  auto spec = ParseModelSpecJson(kMeta);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->format, ModelFormat::kTorchScript);
  ASSERT_EQ(spec->inputs.size(), 1u);
  EXPECT_EQ(spec->inputs[0].shape, (std::vector<int64_t>{-1, 1, 28, 28}));
  EXPECT_DOUBLE_EQ(*spec->declared_accuracy, 0.9);
  auto again = ParseModelSpecJson(ModelSpecToJson(*spec));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->outputs[0].name, "logits");
}

TEST(ModelSpecTest, RejectsBadMeta) {
  for (const char* bad : {"", "[]", "{", R"({"inputs":[]})",
                          R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1]}]})",
                          R"({"format":"tf","inputs":[{"name":"x","datatype":"FP32","shape":[1]}],
                              "outputs":[{"name":"y","datatype":"FP32","shape":[1]}]})",
                          R"({"inputs":[{"name":"x","datatype":"F32","shape":[1]}],
                              "outputs":[{"name":"y","datatype":"FP32","shape":[1]}]})",
                          R"({"inputs":[{"name":"x","datatype":"FP32","shape":[0]}],
                              "outputs":[{"name":"y","datatype":"FP32","shape":[1]}]})",
                          R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1]}],
                              "outputs":[{"name":"y","datatype":"FP32","shape":[1]}],
                              "accuracy":3})"}) {
    EXPECT_EQ(ParseModelSpecJson(bad).status().code(), absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

TEST(ModelSpecTest, BoundsWhatOneRowMayHold) {
  auto meta = [](const std::string& input_shape) {
    return absl::StrCat(R"({"inputs":[{"name":"x","datatype":"FP32","shape":)", input_shape,
                        R"(}],"outputs":[{"name":"y","datatype":"FP32","shape":[-1,2]}]})");
  };
  // A dimension of 1e12 once made a worker die allocating its row of zeros.
  for (const char* shape : {"[-1,1000000000000]", "[-1,65536,65536]",
                            "[-1,1,1,1,1,1,1,1,1]", "[-1,8192,8193]"}) {
    absl::Status s = ParseModelSpecJson(meta(shape)).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << shape;
    EXPECT_NE(s.message().find("most"), std::string::npos) << s;
  }
  // The largest row accepted: 2^26 elements.
  EXPECT_TRUE(ParseModelSpecJson(meta("[-1,8192,8192]")).ok());
  EXPECT_TRUE(ParseModelSpecJson(meta("[-1,-1,3,224,224]")).ok());
}

TEST(ModelSpecTest, ChecksInputs) {
  ModelSpec spec = *ParseModelSpecJson(kMeta);
  auto batch = spec.CheckInputs({Image(3)});
  ASSERT_TRUE(batch.ok());
  EXPECT_EQ(*batch, 3);
  // A lone input must carry the model's name; only an unnamed one (an
  // offline job's "inputs" array) stands for it.
  absl::Status misnamed = spec.CheckInputs({Image(1, "INPUT__0")}).status();
  EXPECT_EQ(misnamed.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(misnamed.message(), "the request has no input named 'input' (it has 'INPUT__0')");
  EXPECT_TRUE(spec.CheckInputs({Image(1, "")}).ok());
  EXPECT_FALSE(spec.CheckInputs({}).ok());
  EXPECT_FALSE(spec.CheckInputs({Image(1), Image(1)}).ok());
  Tensor flat{"input", DataType::kFp32, {1, 784}, std::string(784 * 4, '\0')};
  EXPECT_FALSE(spec.CheckInputs({flat}).ok());
  Tensor ints = Image(1);
  ints.dtype = DataType::kInt32;
  EXPECT_FALSE(spec.CheckInputs({ints}).ok());
  Tensor short_data = Image(2);
  short_data.data.resize(100);
  EXPECT_FALSE(spec.CheckInputs({short_data}).ok());
  EXPECT_FALSE(spec.CheckInputs({Image(0)}).ok());
}

TEST(ModelSpecTest, OrdersInputsAsDeclared) {
  ModelSpec spec;
  spec.inputs = {{"a", DataType::kFp32, {-1}}, {"b", DataType::kInt64, {-1}}};
  std::vector<Tensor> given = {{"b", DataType::kInt64, {2}, std::string(16, '\0')},
                               {"a", DataType::kFp32, {2}, std::string(8, '\0')}};
  auto batch = spec.CheckAndOrderInputs(&given);
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(*batch, 2);
  EXPECT_EQ(given[0].name, "a");
  EXPECT_EQ(given[1].name, "b");
}

TEST(ZeroRowTest, MakesOneRowThatPassesTheSpec) {
  ModelSpec spec;
  spec.inputs = {{"image", DataType::kFp32, {-1, 3, 4}}, {"mask", DataType::kBool, {-1, 2}}};
  auto row = ZeroRow(spec.inputs);
  ASSERT_TRUE(row.ok()) << row.status();
  ASSERT_EQ(row->size(), 2u);
  EXPECT_EQ((*row)[0].shape, (std::vector<int64_t>{1, 3, 4}));
  EXPECT_EQ((*row)[0].data, std::string(12 * sizeof(float), '\0'));
  EXPECT_EQ((*row)[1].shape, (std::vector<int64_t>{1, 2}));
  auto batch = spec.CheckInputs(*row);
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(*batch, 1);
}

TEST(ZeroRowTest, RefusesWhatHasNoFixedSize) {
  EXPECT_FALSE(ZeroRow({}).ok());
  EXPECT_FALSE(ZeroRow({{"text", DataType::kBytes, {-1}}}).ok());
}

}  // namespace
}  // namespace maitre
