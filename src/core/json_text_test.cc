#include "core/json_text.h"

#include <cmath>
#include <cstring>

#include <gtest/gtest.h>

namespace maitre {
namespace {

TEST(JsonTextTest, EscapesWhatJsonRequires) {
  std::string out;
  AppendJsonString(&out, std::string("a\"b\\c\nd\x01", 8));
  EXPECT_EQ(out, R"("a\"b\\c\nd\u0001")");
}

template <typename T>
Tensor Make(DataType dtype, std::vector<T> values) {
  Tensor t{"t", dtype, {static_cast<int64_t>(values.size())}, {}};
  t.data.resize(values.size() * sizeof(T));
  std::memcpy(t.data.data(), values.data(), t.data.size());
  return t;
}

TEST(JsonTextTest, WritesTensorDataAsAFlatArray) {
  std::string out;
  EXPECT_TRUE(AppendJsonData(&out, Make<int8_t>(DataType::kInt8, {-128, 0, 127})));
  EXPECT_EQ(out, "[-128,0,127]");
  out.clear();
  EXPECT_TRUE(AppendJsonData(&out, Make<uint64_t>(DataType::kUint64, {UINT64_MAX})));
  EXPECT_EQ(out, "[18446744073709551615]");
  out.clear();
  EXPECT_TRUE(AppendJsonData(&out, Make<uint8_t>(DataType::kBool, {0, 1, 7})));
  EXPECT_EQ(out, "[false,true,true]");
  out.clear();
  EXPECT_TRUE(
      AppendJsonData(&out, Make<float>(DataType::kFp32, {0.1f, std::nanf(""), -INFINITY})));
  EXPECT_EQ(out, "[0.1,null,null]");
  out.clear();
  EXPECT_TRUE(AppendJsonData(&out, Make<double>(DataType::kFp64, {})));
  EXPECT_EQ(out, "[]");
}

// Found by fuzz/infer_json_fuzzer: the FP64 value 2^64 was written
// "18446744073709551616", an integer the server's own reader refuses. Beyond
// int64's range floats now carry an exponent; below it nothing changes.
TEST(JsonTextTest, WritesFloatsBeyondInt64WithAnExponent) {
  std::string out;
  EXPECT_TRUE(AppendJsonData(
      &out, Make<double>(DataType::kFp64, {0x1p64, -0x1p64, 0x1p63, 123456789012345680.0})));
  EXPECT_EQ(out,
            "[1.8446744073709552e+19,-1.8446744073709552e+19,9.223372036854776e+18,"
            "123456789012345680]");
  out.clear();
  EXPECT_TRUE(AppendJsonData(&out, Make<float>(DataType::kFp32, {0x1p64f, 16777216.0f})));
  EXPECT_EQ(out, "[1.8446744e+19,16777216]");
}

TEST(JsonTextTest, RefusesTypesWithoutJsonForm) {
  std::string out = "x";
  EXPECT_FALSE(AppendJsonData(&out, Make<uint16_t>(DataType::kFp16, {0})));
  EXPECT_EQ(out, "x");
}

}  // namespace
}  // namespace maitre
