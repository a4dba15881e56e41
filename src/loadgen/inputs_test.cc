#include "loadgen/inputs.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "core/npz.h"

namespace maitre::loadgen {
namespace {

using ::testing::HasSubstr;

Tensor Fp32Matrix(const std::string& name, int64_t rows, int64_t cols) {
  Tensor t;
  t.name = name;
  t.dtype = DataType::kFp32;
  t.shape = {rows, cols};
  std::vector<float> values(rows * cols);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i);
  t.data.assign(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  return t;
}

Tensor Labels(int64_t rows) {
  Tensor t;
  t.name = "labels";
  t.dtype = DataType::kInt64;
  t.shape = {rows};
  t.data.assign(rows * sizeof(int64_t), '\0');
  return t;
}

TEST(ParseTensorSpecsTest, ReadsMetadataInputs) {
  auto specs = ParseTensorSpecs(nlohmann::json::parse(
      R"([{"name":"input","datatype":"FP32","shape":[-1,1,28,28]}])"));
  ASSERT_TRUE(specs.ok()) << specs.status();
  ASSERT_EQ(specs->size(), 1u);
  EXPECT_EQ((*specs)[0].name, "input");
  EXPECT_EQ((*specs)[0].dtype, DataType::kFp32);
  EXPECT_EQ((*specs)[0].shape, (std::vector<int64_t>{-1, 1, 28, 28}));

  EXPECT_FALSE(ParseTensorSpecs(nlohmann::json::array()).ok());
  EXPECT_FALSE(ParseTensorSpecs(nlohmann::json::parse(R"([{"name":"x"}])")).ok());
  EXPECT_FALSE(
      ParseTensorSpecs(nlohmann::json::parse(R"([{"name":"x","datatype":"BYTES","shape":[1]}])"))
          .ok());
}

TEST(ZeroRowTest, AnyDimensionBecomesOne) {
  auto row = ZeroRow({TensorSpec{"input", DataType::kFp32, {-1, 1, 28, 28}}});
  ASSERT_TRUE(row.ok()) << row.status();
  ASSERT_EQ(row->size(), 1u);
  EXPECT_EQ((*row)[0].shape, (std::vector<int64_t>{1, 1, 28, 28}));
  EXPECT_EQ((*row)[0].data, std::string(784 * 4, '\0'));
  EXPECT_TRUE((*row)[0].Validate().ok());
}

TEST(RowsFromNpzTest, SplitsRowsLeavesLabelsOutAndTakesTheModelsName) {
  std::string npz = WriteNpz({Fp32Matrix("inputs", 5, 3), Labels(5)});
  auto rows = RowsFromNpz(npz, 100, {TensorSpec{"input", DataType::kFp32, {-1, 3}}});
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 5u);
  for (size_t i = 0; i < rows->size(); ++i) {
    ASSERT_EQ((*rows)[i].size(), 1u) << "labels are not an input";
    const Tensor& t = (*rows)[i][0];
    EXPECT_EQ(t.name, "input");
    EXPECT_EQ(t.shape, (std::vector<int64_t>{1, 3}));
    EXPECT_EQ(t.As<float>()[0], static_cast<float>(3 * i));
  }

  rows = RowsFromNpz(npz, 2, {});
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0][0].name, "inputs");  // no metadata: the file's name
}

TEST(BatchRequestsTest, GroupsRowsCyclicallyIntoRequestsOfTheBatch) {
  std::string npz = WriteNpz({Fp32Matrix("inputs", 3, 2)});
  auto rows = RowsFromNpz(npz, 100, {});
  ASSERT_TRUE(rows.ok()) << rows.status();
  auto requests = BatchRequests(*rows, 2);
  ASSERT_TRUE(requests.ok()) << requests.status();
  ASSERT_EQ(requests->size(), 3u);
  // Rows 0,1 / 2,0 / 1,2: each row sent equally often.
  const std::vector<std::vector<float>> firsts = {{0, 2}, {4, 0}, {2, 4}};
  for (size_t i = 0; i < requests->size(); ++i) {
    const Tensor& t = (*requests)[i][0];
    EXPECT_EQ(t.shape, (std::vector<int64_t>{2, 2}));
    EXPECT_EQ(t.As<float>()[0], firsts[i][0]) << i;
    EXPECT_EQ(t.As<float>()[2], firsts[i][1]) << i;
  }
  auto same = BatchRequests(*rows, 1);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ((*same)[1][0].data, (*rows)[1][0].data);
  EXPECT_FALSE(BatchRequests(*rows, 0).ok());
  EXPECT_FALSE(BatchRequests({}, 2).ok());
}

TEST(RowsFromNpzTest, RefusesFilesWithoutUsableInputs) {
  EXPECT_THAT(RowsFromNpz(WriteNpz({Labels(3)}), 10, {}).status().message(),
              HasSubstr("no input arrays"));
  EXPECT_THAT(RowsFromNpz(WriteNpz({Fp32Matrix("a", 2, 2), Fp32Matrix("b", 3, 2)}), 10,
                          {})
                  .status()
                  .message(),
              HasSubstr("different numbers of rows"));
  EXPECT_FALSE(RowsFromNpz("not a zip", 10, {}).ok());
}

}  // namespace
}  // namespace maitre::loadgen
