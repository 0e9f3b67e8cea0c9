// GEMM on the thread pool (Note [determinism] for GEMM, cpu/linalg.h): the
// blocks depend on (M, N, K) only, and products that are split into blocks
// (rows or columns, transposed operands, batches) are bitwise the same for
// every thread count and agree with a float64 product.
#include <gtest/gtest.h>

#include "core/parallel.h"
#include "cpu/linalg.h"
#include "dtr/dtr.h"
#include "testing.h"

namespace dtr {
namespace {

struct ThreadsGuard {
  int saved = num_threads();
  ~ThreadsGuard() { set_num_threads(saved); }
};

TEST(GemmBlocks, CoverTheLongerSideInPowerOfTwoBlocks) {
  const int64_t shapes[][3] = {{512, 384, 128}, {512, 512, 128}, {128, 784, 512}, {4096, 16, 16},
                               {16, 4096, 16},  {100, 100, 100}, {1000, 1000, 300}, {257, 255, 4096}};
  for (const auto& s : shapes) {
    const int64_t M = s[0], N = s[1], K = s[2];
    const cpu::GemmBlocks g = cpu::gemm_blocks(M, N, K);
    if (g.count == 1) continue;
    const int64_t len = g.rows ? M : N;
    EXPECT_EQ(g.rows, M >= N);
    EXPECT_EQ(g.size % 16, 0);
    EXPECT_GE(g.size, cpu::kGemmMinBlock);
    EXPECT_LT((g.count - 1) * g.size, len);
    EXPECT_GE(g.count * g.size, len);
    EXPECT_GE(double(g.size) * double(M * N * K / len), double(cpu::kGemmBlockMacs) / 2);
  }
  // Small products are one call; a big one is split.
  EXPECT_EQ(cpu::gemm_blocks(64, 64, 32).count, 1);
  EXPECT_EQ(cpu::gemm_blocks(512, 384, 128).count, 2);
  EXPECT_EQ(cpu::gemm_blocks(512, 512, 128).count, 4);
  EXPECT_TRUE(cpu::gemm_blocks(512, 512, 128).rows);
  EXPECT_FALSE(cpu::gemm_blocks(128, 784, 512).rows);
}

/// a @ b in float64 from float32 operands, rounded to float32.
Tensor reference_product(const Tensor& a, const Tensor& b) {
  return matmul(a.to(kFloat64), b.to(kFloat64)).to(kFloat32);
}

TEST(GemmBlocks, SplitProductsAreBitwiseIndependentOfThreads) {
  ThreadsGuard guard;
  manual_seed(11);
  // Rows split, columns split, transposed views on either side, a batch of
  // small products and a batch broadcast against one matrix.
  const Tensor a = randn({520, 300}), b = randn({300, 390});
  const Tensor wide_a = randn({130, 260}), wide_b = randn({700, 260});
  const Tensor qa = randn({6, 5, 64, 40}), qb = randn({6, 5, 40, 64});
  const Tensor x = randn({3, 200, 96}), w = randn({500, 96}), bias = randn({500});
  auto products = [&] {
    return std::vector<Tensor>{matmul(a, b), matmul(transpose(b, 0, 1), transpose(a, 0, 1)),
                               matmul(wide_a, transpose(wide_b, 0, 1)), matmul(qa, qb),
                               linear(x, w, bias), matmul(x, transpose(w, 0, 1))};
  };
  set_num_threads(1);
  const std::vector<Tensor> ref = products();
  EXPECT_TRUE(testing::allclose(ref[0], reference_product(a, b).to_vector<double>(), 1e-4, 1e-4));
  EXPECT_TRUE(testing::allclose(ref[2], reference_product(wide_a, transpose(wide_b, 0, 1)).to_vector<double>(),
                                1e-4, 1e-4));
  EXPECT_TRUE(testing::allclose(ref[3], reference_product(qa, qb).to_vector<double>(), 1e-4, 1e-4));
  for (int threads : {2, 3, 7}) {
    set_num_threads(threads);
    const std::vector<Tensor> got = products();
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_TRUE(testing::bitwise_equal(got[i], ref[i])) << "product " << i << ", " << threads << " threads";
  }
}

}  // namespace
}  // namespace dtr
