// A seeded random source whose output is the same on every machine and
// standard library: xoshiro256++ (Blackman & Vigna) seeded through
// splitmix64, with the sampling maths written here rather than taken from
// <random>'s distributions, whose algorithms are implementation-defined.
// (Results rely on the platform's log/exp/sqrt, which agree on the
// glibc/x86-64 machines Maitre targets.)
//
// Thread-safety: not synchronised; one Rng per owner.
#pragma once

#include <cmath>
#include <cstdint>

namespace maitre {

// One step of splitmix64: a good 64-bit mixer, used to seed and to derive
// independent sub-streams from one experiment seed.
inline uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// A seed for sub-stream `stream` of `seed`, so that, say, each instance's
// service-time noise does not shift when another stream draws more numbers.
inline uint64_t DeriveSeed(uint64_t seed, uint64_t stream) {
  uint64_t s = seed ^ (stream * 0xd1b54a32d192ed03ULL);
  SplitMix64(s);
  return SplitMix64(s);
}

class Rng {
 public:
  explicit Rng(uint64_t seed) {
    uint64_t s = seed;
    for (uint64_t& word : s_) word = SplitMix64(s);
  }

  uint64_t Next() {
    const uint64_t result = Rotl(s_[0] + s_[3], 23) + s_[0];
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, 1), 53 random bits.
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  // Uniform in (0, 1]: safe to take the log of.
  double UniformPositive() { return static_cast<double>((Next() >> 11) + 1) * 0x1.0p-53; }

  double Exponential(double mean) { return -mean * std::log(UniformPositive()); }

  // Standard normal, by Marsaglia's polar method (no trigonometry); the
  // second value of each pair is kept for the next call.
  double Normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    double u, v, s;
    do {
      u = 2 * Uniform() - 1;
      v = 2 * Uniform() - 1;
      s = u * u + v * v;
    } while (s >= 1 || s == 0);
    double m = std::sqrt(-2 * std::log(s) / s);
    spare_ = v * m;
    has_spare_ = true;
    return u * m;
  }

  // Gamma(shape, scale), mean shape·scale, by Marsaglia & Tsang (2000). For
  // shape < 1 it uses Gamma(shape) = Gamma(shape + 1)·U^(1/shape).
  double Gamma(double shape, double scale) {
    if (shape < 1) {
      double boost = std::exp(std::log(UniformPositive()) / shape);
      return Gamma(shape + 1, scale) * boost;
    }
    const double d = shape - 1.0 / 3.0;
    const double c = 1 / std::sqrt(9 * d);
    while (true) {
      double x, v;
      do {
        x = Normal();
        v = 1 + c * x;
      } while (v <= 0);
      v = v * v * v;
      double u = UniformPositive();
      if (u < 1 - 0.0331 * (x * x) * (x * x)) return d * v * scale;
      if (std::log(u) < 0.5 * x * x + d * (1 - v + std::log(v))) return d * v * scale;
    }
  }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

  uint64_t s_[4];
  double spare_ = 0;
  bool has_spare_ = false;
};

}  // namespace maitre
