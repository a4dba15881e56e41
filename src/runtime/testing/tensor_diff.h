// How far apart two float tensors are, for tests that compare a variant's
// or an executor's outputs with a reference.
#pragma once

#include <algorithm>
#include <cmath>

#include <gtest/gtest.h>

#include "core/tensor.h"

namespace maitre::runtime::testing {

// The largest elementwise |a - b|; infinity (and a test failure for the
// shapes) when they are not two float tensors of one shape.
inline float MaxAbsDiff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape, b.shape);
  if (a.shape != b.shape || a.dtype != DataType::kFp32 || b.dtype != DataType::kFp32) {
    return INFINITY;
  }
  float worst = 0;
  for (int64_t i = 0; i < a.NumElements(); ++i) {
    worst = std::max(worst, std::fabs(a.As<float>()[i] - b.As<float>()[i]));
  }
  return worst;
}

}  // namespace maitre::runtime::testing
