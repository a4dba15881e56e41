#include "core/rng.h"

#include <gtest/gtest.h>

#include <cmath>

namespace maitre {
namespace {

TEST(RngTest, SameSeedSameStream) {
  Rng a(42), b(42), c(43);
  for (int i = 0; i < 1000; ++i) {
    uint64_t x = a.Next();
    EXPECT_EQ(x, b.Next());
    EXPECT_NE(x, c.Next());
  }
}

TEST(RngTest, StreamIsPinned) {
  // The exact values are part of the reproducibility contract: a change here
  // changes every experiment's output.
  Rng r(1);
  EXPECT_EQ(r.Next(), 0xcfc5d07f6f03c29bULL);
  EXPECT_EQ(r.Next(), 0xbf424132963fe08dULL);
  EXPECT_NE(DeriveSeed(1, 1), DeriveSeed(1, 2));
  EXPECT_NE(DeriveSeed(1, 1), DeriveSeed(2, 1));
}

TEST(RngTest, UniformRanges) {
  Rng r(7);
  for (int i = 0; i < 100000; ++i) {
    double u = r.Uniform();
    ASSERT_GE(u, 0);
    ASSERT_LT(u, 1);
    double v = r.UniformPositive();
    ASSERT_GT(v, 0);
    ASSERT_LE(v, 1);
  }
}

struct Moments {
  double mean = 0, var = 0;
};

template <typename F>
Moments Sample(F draw, int n) {
  double sum = 0, sum2 = 0;
  for (int i = 0; i < n; ++i) {
    double x = draw();
    sum += x;
    sum2 += x * x;
  }
  Moments m;
  m.mean = sum / n;
  m.var = sum2 / n - m.mean * m.mean;
  return m;
}

TEST(RngTest, DistributionsHaveTheirMoments) {
  Rng r(11);
  const int n = 400000;
  Moments e = Sample([&] { return r.Exponential(3.0); }, n);
  EXPECT_NEAR(e.mean, 3.0, 0.03);
  EXPECT_NEAR(e.var, 9.0, 0.2);
  Moments z = Sample([&] { return r.Normal(); }, n);
  EXPECT_NEAR(z.mean, 0, 0.01);
  EXPECT_NEAR(z.var, 1, 0.01);
  for (double shape : {0.05, 0.5, 1.0, 2.5, 10.0}) {
    Moments g = Sample([&] { return r.Gamma(shape, 2.0); }, n);
    double cv = std::sqrt(g.var) / g.mean;
    EXPECT_NEAR(g.mean, 2.0 * shape, 0.03 * shape * 2.0 + 0.01) << "shape " << shape;
    // Heavy tails make the sample CV converge slowly at small shapes.
    EXPECT_NEAR(cv, 1 / std::sqrt(shape), 0.05 / std::sqrt(shape)) << "shape " << shape;
  }
}

}  // namespace
}  // namespace maitre
