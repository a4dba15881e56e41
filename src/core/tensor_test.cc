#include "core/tensor.h"

#include <gtest/gtest.h>

namespace maitre {
namespace {

TEST(DataTypeTest, NamesRoundTrip) {
  for (DataType t : {DataType::kBool, DataType::kUint8, DataType::kInt32, DataType::kInt64,
                     DataType::kFp16, DataType::kFp32, DataType::kFp64, DataType::kBytes}) {
    EXPECT_EQ(ParseDataType(DataTypeName(t)), t) << DataTypeName(t);
  }
  EXPECT_EQ(ParseDataType("FLOAT"), DataType::kInvalid);
  EXPECT_EQ(ParseDataType("INVALID"), DataType::kInvalid);
  EXPECT_EQ(DataTypeSize(DataType::kFp32), 4u);
  EXPECT_EQ(DataTypeSize(DataType::kBytes), 0u);
}

TEST(TensorTest, ValidateChecksByteCount) {
  Tensor t{"x", DataType::kFp32, {2, 3}, std::string(24, '\0')};
  EXPECT_TRUE(t.Validate().ok());
  t.data.resize(20);
  EXPECT_EQ(t.Validate().code(), absl::StatusCode::kInvalidArgument);
  t.shape = {-1, 3};
  EXPECT_EQ(t.Validate().code(), absl::StatusCode::kInvalidArgument);
  Tensor s{"s", DataType::kBytes, {1}, "abc"};
  EXPECT_EQ(s.Validate().code(), absl::StatusCode::kInvalidArgument);
}

TEST(TensorTest, NumElementsSaturatesInsteadOfOverflowing) {
  EXPECT_EQ(NumElements({}), 1);
  EXPECT_EQ(NumElements({0, 5}), 0);
  EXPECT_EQ(NumElements({int64_t{1} << 40, int64_t{1} << 40}), INT64_MAX);
  Tensor huge{"h", DataType::kFp64, {int64_t{1} << 40, int64_t{1} << 40}, ""};
  EXPECT_FALSE(huge.Validate().ok());
}

}  // namespace
}  // namespace maitre
