// Note [channel sums]: a batch norm's per-plane sums in double, sixteen
// interleaved partial sums in a fixed order. The AVX2 copy for float32 must
// be bitwise the scalar loop (results never depend on the CPU), and both
// must be sums: close to an exact one.
#include "cpu/channel_sums.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace dtr::cpu {
namespace {

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

TEST(ChannelSums, TheVectorCopyIsTheScalarLoopBitwise) {
  if (!cpu_has_avx2()) GTEST_SKIP() << "this CPU has no AVX2: only the scalar loop runs";
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-12, 12);
  for (int64_t n : {0, 1, 15, 16, 17, 31, 63, 64, 1000, 4099}) {
    // Magnitudes from 1e-12 to 1e12: the order of the adds shows in the
    // last bits of the double sums.
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) v = unit(rng) * std::pow(10.0f, float(exponent(rng)));
    const double mean = n > 0 ? plane_sum_scalar<false>(x.data(), n, 0.0) / double(n) : 0.0;
    const double sum = plane_sum<false>(x.data(), n, 0.0), squares = plane_sum<true>(x.data(), n, mean);
    EXPECT_TRUE(same_bits(sum, plane_sum_scalar<false>(x.data(), n, 0.0))) << "sum of " << n;
    EXPECT_TRUE(same_bits(squares, plane_sum_scalar<true>(x.data(), n, mean))) << "squares of " << n;
  }
}

TEST(ChannelSums, TheVectorGradientSumsAreTheScalarLoopBitwise) {
  if (!cpu_has_avx2()) GTEST_SKIP() << "this CPU has no AVX2: only the scalar loop runs";
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-8, 8);
  for (int64_t n : {0, 1, 15, 16, 17, 63, 1000, 4099}) {
    std::vector<float> g(static_cast<size_t>(n)), x(static_cast<size_t>(n));
    for (size_t i = 0; i < g.size(); ++i) {
      g[i] = unit(rng) * std::pow(10.0f, float(exponent(rng)));
      x[i] = unit(rng) * std::pow(10.0f, float(exponent(rng)));
    }
    double sg = 0, sgx = 0, rg = 0, rgx = 0;
    plane_grad_sums(g.data(), x.data(), n, 0.37f, 1.9f, sg, sgx);
    plane_grad_sums_scalar(g.data(), x.data(), n, 0.37f, 1.9f, rg, rgx);
    EXPECT_TRUE(same_bits(sg, rg)) << "sum of g over " << n;
    EXPECT_TRUE(same_bits(sgx, rgx)) << "sum of g * xhat over " << n;
  }
}

TEST(ChannelSums, AreSumsOfTheValuesAndOfTheirSquaredDeviations) {
  for (int64_t n : {0, 5, 16, 40, 1000}) {
    std::vector<float> x(static_cast<size_t>(n));
    long double exact = 0;
    for (int64_t i = 0; i < n; ++i) {
      x[size_t(i)] = float(i % 7) - 2.5f;
      exact += x[size_t(i)];
    }
    EXPECT_NEAR(plane_sum<false>(x.data(), n, 0.0), double(exact), 1e-9) << n;
    const double mean = n > 0 ? double(exact / n) : 0.0;
    long double q = 0;
    for (float v : x) q += (v - mean) * (v - mean);
    EXPECT_NEAR(plane_sum<true>(x.data(), n, mean), double(q), 1e-9) << n;
    std::vector<double> xd(x.begin(), x.end());
    EXPECT_NEAR(plane_sum<true>(xd.data(), n, mean), double(q), 1e-9) << n;
    // Gradient sums: g = (i mod 5) - 2 against xhat = (x - 0.5) * 2.
    std::vector<float> g(static_cast<size_t>(n));
    long double exact_g = 0, exact_gx = 0;
    for (int64_t i = 0; i < n; ++i) {
      g[size_t(i)] = float(i % 5) - 2.0f;
      exact_g += g[size_t(i)];
      exact_gx += g[size_t(i)] * ((x[size_t(i)] - 0.5f) * 2.0f);
    }
    double sg = 0, sgx = 0;
    plane_grad_sums(g.data(), x.data(), n, 0.5f, 2.0f, sg, sgx);
    EXPECT_NEAR(sg, double(exact_g), 1e-9) << n;
    EXPECT_NEAR(sgx, double(exact_gx), 1e-9) << n;
  }
}

}  // namespace
}  // namespace dtr::cpu
