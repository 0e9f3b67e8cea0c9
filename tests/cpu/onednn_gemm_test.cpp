// The oneDNN matmul path of cpu::gemm (cpu/onednn_gemm.h, Note [determinism]
// for GEMM in cpu/linalg.h): with DTR_ONEDNN_GEMM on, float32 blocks that
// onednn_gemm_shape admits go to oneDNN. It must agree with OpenBLAS and a float64 reference for every
// transpose case and for strided operands, keep BLAS's alpha and beta
// semantics (C not read when beta is 0), give bitwise the same C at every
// thread count and on every repeat, leave the shapes it does not admit to
// OpenBLAS, and be the path that actually runs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>
#include <vector>

#include "core/options.h"
#include "core/parallel.h"
#include "cpu/linalg.h"
#include "cpu/onednn_gemm.h"
#include "dtr/dtr.h"

namespace dtr {
namespace {

// Switches the oneDNN GEMM on (DTR_ONEDNN_GEMM, off by default) for one test;
// the setting and the thread count come back after.
struct GemmGuard {
  int threads = num_threads();
  bool was = global_options().onednn_gemm;
  GemmGuard() { cpu::set_onednn_gemm_enabled(true); }
  ~GemmGuard() {
    cpu::set_onednn_gemm_enabled(was);
    set_num_threads(threads);
  }
};

bool have_onednn() {
#if DTR_TEST_HAVE_ONEDNN
  EXPECT_TRUE(cpu::onednn_gemm_enabled());
  return cpu::onednn_gemm_enabled();
#else
  EXPECT_FALSE(cpu::onednn_gemm_enabled());
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

// op(A) (M, K) and op(B) (K, N); `pad` extra elements per row of A, B and C
// (row strides above the dense ones).
struct Product {
  bool ta, tb;
  int64_t M, N, K;
  int64_t pad = 0;
  int64_t lda() const { return (ta ? M : K) + pad; }
  int64_t ldb() const { return (tb ? K : N) + pad; }
  int64_t ldc() const { return N + pad; }
  int64_t a_size() const { return (ta ? K : M) * lda(); }
  int64_t b_size() const { return (tb ? N : K) * ldb(); }
};

/// C = alpha op(A) op(B) + beta C through cpu::gemm, C starting at c0
/// (padding included).
std::vector<float> run(const Product& p, const std::vector<float>& A, const std::vector<float>& B, float alpha,
                       float beta, float c0) {
  std::vector<float> C(size_t(p.M * p.ldc()), c0);
  cpu::gemm(p.ta, p.tb, p.M, p.N, p.K, alpha, A.data(), p.lda(), B.data(), p.ldb(), beta, C.data(), p.ldc());
  return C;
}

double reference(const Product& p, const std::vector<float>& A, const std::vector<float>& B, int64_t i,
                 int64_t j) {
  double s = 0;
  for (int64_t k = 0; k < p.K; ++k) {
    const double a = p.ta ? A[size_t(k * p.lda() + i)] : A[size_t(i * p.lda() + k)];
    const double b = p.tb ? B[size_t(j * p.ldb() + k)] : B[size_t(k * p.ldb() + j)];
    s += a * b;
  }
  return s;
}

// Products oneDNN takes (one block and split ones, each transpose case,
// strided ones) and ones it leaves to OpenBLAS (too few multiply-adds, a
// single row).
const std::vector<Product> kProducts = {
    {false, false, 256, 192, 96},    {false, true, 300, 260, 130},   {true, false, 130, 700, 64},
    {true, true, 96, 80, 160},       {false, true, 2048, 64, 16},    {false, false, 100, 70, 50, 3},
    {true, true, 90, 110, 70, 5},    {false, false, 40, 30, 20},     {false, true, 1, 256, 1024},
    {true, false, 2048, 600, 8, 1},
};

TEST(OnednnGemm, IsOffByDefault) {
  EXPECT_FALSE(Options{}.onednn_gemm);
  EXPECT_FALSE(options_from_env().onednn_gemm && std::getenv("DTR_ONEDNN_GEMM") == nullptr);
}

TEST(OnednnGemm, AgreesWithOpenBlasAndAFloat64Reference) {
  GemmGuard guard;
  if (!have_onednn()) GTEST_SKIP() << "built without oneDNN";
  for (const Product& p : kProducts) {
    const auto A = filled(p.a_size(), 1), B = filled(p.b_size(), 2);
    for (const auto& [alpha, beta] : {std::pair{1.0f, 0.0f}, std::pair{0.125f, 1.0f}, std::pair{-2.0f, 0.5f}}) {
      cpu::set_onednn_gemm_enabled(true);
      const auto got = run(p, A, B, alpha, beta, 0.75f);
      cpu::set_onednn_gemm_enabled(false);
      const auto blas = run(p, A, B, alpha, beta, 0.75f);
      for (int64_t i = 0; i < p.M; ++i) {
        for (int64_t j = 0; j < p.ldc(); ++j) {
          const size_t at = size_t(i * p.ldc() + j);
          if (j >= p.N) {  // a row's padding is never written
            ASSERT_EQ(got[at], 0.75f) << p.M << "x" << p.N << "x" << p.K << " padding at " << i << "," << j;
            continue;
          }
          const double want = alpha * reference(p, A, B, i, j) + beta * 0.75;
          ASSERT_NEAR(got[at], want, 1e-4 * (1 + std::abs(want)))
              << p.M << "x" << p.N << "x" << p.K << " alpha " << alpha << " beta " << beta << " at " << i << "," << j;
          ASSERT_NEAR(got[at], blas[at], 1e-4 * (1 + std::abs(want)));
        }
      }
    }
  }
}

TEST(OnednnGemm, BetaZeroNeverReadsCAndAlphaZeroNeverReadsAOrB) {
  GemmGuard guard;
  if (!have_onednn()) GTEST_SKIP() << "built without oneDNN";
  const Product p{false, true, 200, 150, 64};
  ASSERT_TRUE(cpu::onednn_gemm_shape(p.M, p.N, p.K));
  const auto A = filled(p.a_size(), 3), B = filled(p.b_size(), 4);
  const auto fresh = run(p, A, B, 0.5f, 0.0f, std::numeric_limits<float>::quiet_NaN());
  const auto zero = run(p, A, B, 0.5f, 0.0f, 0.0f);
  const auto acc = run(p, A, B, 0.5f, 1.0f, 2.0f);
  for (size_t i = 0; i < fresh.size(); ++i) {
    ASSERT_FALSE(std::isnan(fresh[i])) << i;
    ASSERT_EQ(fresh[i], zero[i]) << i;
    ASSERT_NEAR(acc[i], zero[i] + 2.0f, 1e-5 * (1 + std::abs(zero[i]))) << i;
  }
  // alpha 0 scales C only, as BLAS does: a NaN in A does not reach C.
  auto nan_a = A;
  nan_a[7] = std::numeric_limits<float>::quiet_NaN();
  const auto scaled = run(p, nan_a, B, 0.0f, 0.5f, 3.0f);
  for (size_t i = 0; i < scaled.size(); ++i) ASSERT_EQ(scaled[i], 1.5f) << i;
}

TEST(OnednnGemm, IsBitwiseIndependentOfThreadsAndRepeats) {
  GemmGuard guard;
  if (!have_onednn()) GTEST_SKIP() << "built without oneDNN";
  for (const Product& p : kProducts) {
    const auto A = filled(p.a_size(), 5), B = filled(p.b_size(), 6);
    set_num_threads(1);
    const auto ref = run(p, A, B, 1.0f, 0.0f, 0.0f);
    EXPECT_EQ(run(p, A, B, 1.0f, 0.0f, 0.0f), ref) << p.M << "x" << p.N << "x" << p.K << ", repeat";
    for (int threads : {2, 3, 7}) {
      set_num_threads(threads);
      EXPECT_EQ(run(p, A, B, 1.0f, 0.0f, 0.0f), ref) << p.M << "x" << p.N << "x" << p.K << ", " << threads;
    }
  }
}

TEST(OnednnGemm, IsThePathThatRunsForTheShapesItAdmits) {
  GemmGuard guard;
  if (!have_onednn()) GTEST_SKIP() << "built without oneDNN";
  set_num_threads(1);
  // Switching oneDNN off changes some bits of a long product (another
  // library's summation order), so the default path for it is oneDNN's...
  const Product big{false, true, 512, 256, 1024};
  ASSERT_TRUE(cpu::onednn_gemm_shape(big.M, big.N, big.K));
  // oneDNN 2.6 has brgemm kernels for AVX-512 CPUs only; elsewhere every
  // block stays on OpenBLAS and only the second half applies.
  if (cpu::onednn_gemm_runs(big.ta, big.tb, big.M, big.N, big.K, big.lda(), big.ldb(), big.ldc())) {
    const auto A = filled(big.a_size(), 7), B = filled(big.b_size(), 8);
    const auto with = run(big, A, B, 1.0f, 0.0f, 0.0f);
    cpu::set_onednn_gemm_enabled(false);
    const auto without = run(big, A, B, 1.0f, 0.0f, 0.0f);
    cpu::set_onednn_gemm_enabled(true);
    EXPECT_NE(with, without);
  }
  // ...while a single row and a small product stay on OpenBLAS, bitwise,
  // as does an admitted block oneDNN has no brgemm kernel for (with oneDNN
  // 2.6: a transposed A whose row stride exceeds its width, a weight
  // gradient's row block, which oneDNN would hand to its malloc'ing sgemm).
  for (const Product& p : {Product{false, true, 1, 256, 1024}, Product{false, false, 40, 30, 20},
                           Product{true, false, 128, 256, 2048, 640}}) {
    const bool admitted = cpu::onednn_gemm_shape(p.M, p.N, p.K);
    if (admitted && cpu::onednn_gemm_runs(p.ta, p.tb, p.M, p.N, p.K, p.lda(), p.ldb(), p.ldc())) continue;
    const auto A = filled(p.a_size(), 9), B = filled(p.b_size(), 10);
    const auto with = run(p, A, B, 1.0f, 0.0f, 0.0f);
    cpu::set_onednn_gemm_enabled(false);
    EXPECT_EQ(run(p, A, B, 1.0f, 0.0f, 0.0f), with) << p.M << "x" << p.N << "x" << p.K;
    cpu::set_onednn_gemm_enabled(true);
  }
  EXPECT_FALSE(cpu::onednn_gemm_shape(1, 256, 1024));
  EXPECT_FALSE(cpu::onednn_gemm_shape(40, 30, 20));
}

TEST(OnednnGemm, AnMlpStepIsBitwiseTheSameUnderABudget) {
  // A float32 MLP whose products oneDNN takes, one forward and backward
  // unbudgeted and once more under a budget that forces replays: the
  // replayed products are the same oneDNN calls, so the loss and the
  // gradients match bitwise.
  GemmGuard guard;
  if (!have_onednn()) GTEST_SKIP() << "built without oneDNN";
  struct Run {
    std::vector<std::vector<float>> values;
    int64_t rematerializations = 0, peak = 0;
  };
  auto step = [](std::optional<int64_t> budget) {
    manual_seed(11);
    std::vector<Tensor> w;
    Tensor x;
    {
      NoGradGuard ng;
      x = randn({1024, 256});  // activations (1 MiB each) outweigh the weights (256 KiB)
      for (int i = 0; i < 4; ++i) w.push_back((randn({256, 256}) * 0.06).requires_grad_());
    }
    remat::reset_stats();
    remat::set_memory_budget(budget);
    Tensor h = x;
    for (size_t i = 0; i < w.size(); ++i) {
      h = linear(h, w[i]);
      if (i + 1 < w.size()) h = relu(h);
    }
    Tensor loss = (h * h).mean();
    loss.backward();
    Run r;
    r.values.push_back(loss.to_vector<float>());
    for (const Tensor& t : w) r.values.push_back(t.grad().to_vector<float>());
    r.rematerializations = remat::stats().rematerializations;
    r.peak = remat::stats().peak_bytes;
    remat::set_memory_budget(std::nullopt);
    return r;
  };
  const Run free_run = step(std::nullopt);
  const Run budgeted = step(free_run.peak * 6 / 10);
  EXPECT_EQ(free_run.rematerializations, 0);
  EXPECT_GT(budgeted.rematerializations, 0);
  EXPECT_EQ(free_run.values, budgeted.values);
}

}  // namespace
}  // namespace dtr
