// The oneDNN sgemm path of cpu::gemm (Note [determinism] for GEMM in
// cpu/linalg.h): float32 blocks of at least kOnednnGemmMacs multiply-adds go
// to oneDNN. It must agree with OpenBLAS and a float64 reference, keep
// BLAS's beta semantics (C not read when beta is 0), give bitwise the same C
// at every thread count, and be the path that actually runs.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/parallel.h"
#include "cpu/linalg.h"
#include "cpu/onednn_conv.h"
#include "dtr/dtr.h"
#include "testing.h"

namespace dtr {
namespace {

struct GemmGuard {
  int threads = num_threads();
  ~GemmGuard() {
    cpu::set_onednn_gemm_enabled(true);
    set_num_threads(threads);
  }
};

bool have_onednn() {
#if DTR_TEST_HAVE_ONEDNN
  EXPECT_TRUE(cpu::onednn_gemm_enabled());
  return cpu::onednn_gemm_enabled();
#else
  return false;
#endif
}

std::vector<float> filled(int64_t n, uint32_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = float(int32_t(seed >> 8) % 2001 - 1000) / 997.0f;
  }
  return v;
}

struct Product {
  bool ta, tb;
  int64_t M, N, K;
};

/// C = alpha op(A) op(B) + beta C through cpu::gemm, C starting at c0.
std::vector<float> run(const Product& p, const std::vector<float>& A, const std::vector<float>& B, float alpha,
                       float beta, float c0) {
  std::vector<float> C(size_t(p.M * p.N), c0);
  const int64_t lda = p.ta ? p.M : p.K, ldb = p.tb ? p.K : p.N;
  cpu::gemm(p.ta, p.tb, p.M, p.N, p.K, alpha, A.data(), lda, B.data(), ldb, beta, C.data(), p.N);
  return C;
}

double reference(const Product& p, const std::vector<float>& A, const std::vector<float>& B, int64_t i,
                 int64_t j) {
  double s = 0;
  for (int64_t k = 0; k < p.K; ++k) {
    const double a = p.ta ? A[size_t(k * p.M + i)] : A[size_t(i * p.K + k)];
    const double b = p.tb ? B[size_t(j * p.K + k)] : B[size_t(k * p.N + j)];
    s += a * b;
  }
  return s;
}

// Products above the threshold (one block and split ones, each transpose
// case) and one below it.
const std::vector<Product> kProducts = {
    {false, false, 256, 192, 96}, {false, true, 300, 260, 130}, {true, false, 130, 700, 64},
    {true, true, 96, 80, 160},    {false, true, 2048, 64, 16},  {false, false, 40, 30, 20},
};

TEST(OnednnGemm, AgreesWithOpenBlasAndAFloat64Reference) {
  GemmGuard guard;
  if (!have_onednn()) GTEST_SKIP() << "built without oneDNN";
  for (const Product& p : kProducts) {
    const auto A = filled(p.M * p.K, 1), B = filled(p.K * p.N, 2);
    cpu::set_onednn_gemm_enabled(true);
    const auto got = run(p, A, B, 1.0f, 0.0f, 0.0f);
    cpu::set_onednn_gemm_enabled(false);
    const auto blas = run(p, A, B, 1.0f, 0.0f, 0.0f);
    for (int64_t i = 0; i < p.M; i += 7) {
      for (int64_t j = 0; j < p.N; j += 5) {
        const double want = reference(p, A, B, i, j);
        const float g = got[size_t(i * p.N + j)], b = blas[size_t(i * p.N + j)];
        ASSERT_NEAR(g, want, 1e-4 * (1 + std::abs(want))) << p.M << "x" << p.N << "x" << p.K << " at " << i << "," << j;
        ASSERT_NEAR(g, b, 1e-4 * (1 + std::abs(want)));
      }
    }
  }
}

TEST(OnednnGemm, BetaZeroNeverReadsCAndBetaOneAccumulates) {
  GemmGuard guard;
  if (!have_onednn()) GTEST_SKIP() << "built without oneDNN";
  const Product p{false, true, 200, 150, 64};  // 1.9M multiply-adds: oneDNN
  ASSERT_GE(p.M * p.N * p.K, cpu::kOnednnGemmMacs);
  const auto A = filled(p.M * p.K, 3), B = filled(p.K * p.N, 4);
  const auto fresh = run(p, A, B, 0.5f, 0.0f, std::numeric_limits<float>::quiet_NaN());
  const auto zero = run(p, A, B, 0.5f, 0.0f, 0.0f);
  const auto acc = run(p, A, B, 0.5f, 1.0f, 2.0f);
  for (size_t i = 0; i < fresh.size(); ++i) {
    ASSERT_FALSE(std::isnan(fresh[i])) << i;
    ASSERT_EQ(fresh[i], zero[i]) << i;
    ASSERT_NEAR(acc[i], zero[i] + 2.0f, 1e-5 * (1 + std::abs(zero[i]))) << i;
  }
}

TEST(OnednnGemm, IsBitwiseIndependentOfThreadsAndIsThePathThatRuns) {
  GemmGuard guard;
  if (!have_onednn()) GTEST_SKIP() << "built without oneDNN";
  for (const Product& p : kProducts) {
    const auto A = filled(p.M * p.K, 5), B = filled(p.K * p.N, 6);
    set_num_threads(1);
    const auto ref = run(p, A, B, 1.0f, 0.0f, 0.0f);
    for (int threads : {2, 3, 7}) {
      set_num_threads(threads);
      EXPECT_EQ(run(p, A, B, 1.0f, 0.0f, 0.0f), ref) << p.M << "x" << p.N << "x" << p.K << ", " << threads;
    }
  }
  // Switching oneDNN off changes some bits of a long product (another
  // library's summation order), so the default path is oneDNN's.
  const Product p{false, true, 512, 256, 1024};
  const auto A = filled(p.M * p.K, 7), B = filled(p.K * p.N, 8);
  set_num_threads(1);
  const auto with = run(p, A, B, 1.0f, 0.0f, 0.0f);
  cpu::set_onednn_gemm_enabled(false);
  const auto without = run(p, A, B, 1.0f, 0.0f, 0.0f);
  EXPECT_NE(with, without);
}

}  // namespace
}  // namespace dtr
