#include "core/finite.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace maitre {
namespace {

TEST(FiniteTest, NamesTheFirstNaNOrInfinity) {
  auto fp32 = [](std::vector<float> v, std::vector<int64_t> shape) {
    return Tensor{"x", DataType::kFp32, shape,
                  std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float))};
  };
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(CheckFinite(fp32({1e30f, -3.4e38f, 1e-45f, 0}, {2, 2})).ok());
  absl::Status nan = CheckFinite(fp32({1, 2, 3, NAN}, {2, 2}));
  EXPECT_EQ(nan.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(nan.message(), "element 1 of row 1 is NaN; inputs must be finite numbers");
  EXPECT_NE(CheckFinite(fp32({-inf, 0}, {2})).message().find("element 0 of row 0 is -Inf"),
            std::string::npos);

  double big[2] = {1e300, std::numeric_limits<double>::infinity()};
  Tensor fp64{"y", DataType::kFp64, {1, 2}, std::string(reinterpret_cast<char*>(big), sizeof big)};
  EXPECT_NE(CheckFinite(fp64).message().find("element 1 of row 0 is +Inf"), std::string::npos);

  // FP16: 0x3C00 is 1.0, 0x7BFF the largest finite, 0xFC00 -Inf, 0x7E00 NaN.
  auto fp16 = [](std::vector<uint16_t> v) {
    return Tensor{"h",
                  DataType::kFp16,
                  {static_cast<int64_t>(v.size())},
                  std::string(reinterpret_cast<const char*>(v.data()), v.size() * 2)};
  };
  EXPECT_TRUE(CheckFinite(fp16({0x3C00, 0x7BFF, 0xFBFF})).ok());
  EXPECT_NE(CheckFinite(fp16({0x3C00, 0xFC00})).message().find("element 0 of row 1 is -Inf"),
            std::string::npos);
  EXPECT_NE(CheckFinite(fp16({0x7E00})).message().find("is NaN"), std::string::npos);

  // Integers have no NaN; a tensor shorter than its shape is read no further.
  Tensor ints{"i", DataType::kInt32, {1}, std::string("\xff\xff\x80\x7f", 4)};
  EXPECT_TRUE(CheckFinite(ints).ok());
  Tensor short_data = fp32({1}, {4});
  EXPECT_TRUE(CheckFinite(short_data).ok());
}

}  // namespace
}  // namespace maitre
