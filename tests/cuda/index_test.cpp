// The CUDA indexing, embedding and dropout kernels under host emulation
// (Note [host emulation of CUDA kernels]): cases the conformance harness
// does not reach — index range errors read back from the error buffer,
// duplicate indices in the deterministic scatters, seeded dropout masks
// bitwise the CPU's.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "dtr/dtr.h"
#include "second_device.h"
#include "tests/testing.h"

namespace dtr {
namespace {

#if DTR_HAVE_CUDA

#define SKIP_UNLESS_EMULATING()                                                                           \
  do {                                                                                                   \
    (void)zeros({1}, TensorOptions().device(testing::second_device())); /* binds the kernels */          \
    if (testing::second_device_cuda_ops().empty())                                                       \
      GTEST_SKIP() << "run with DTR_TEST_DEVICE_KERNELS=cuda (ctest cuda.emulated)";                      \
  } while (0)

Device dev() { return testing::second_device(); }
Tensor host(const Tensor& t) { return t.to(Device(kCPU)); }
Tensor ids(const std::vector<int64_t>& v, IntList shape) { return from_vector<int64_t>(v, shape); }

TEST(CudaEmulation, IndexFamiliesAreBound) {
  SKIP_UNLESS_EMULATING();
  const std::vector<std::string>& bound = testing::second_device_cuda_ops();
  for (const char* op :
       {"cat", "index_select", "index_select_backward", "gather", "gather_backward", "masked_fill", "masked_fill_",
        "flip", "scatter_add", "scatter_add_", "index_add", "index_add_", "tril", "triu", "slice_backward",
        "select_backward", "embedding", "embedding_backward", "dropout", "dropout_backward", "one_hot",
        "constant_pad_nd", "reflection_pad", "reflection_pad_backward", "upsample_nearest2d",
        "upsample_nearest2d_backward", "upsample_bilinear2d", "upsample_bilinear2d_backward", "sort", "topk", "multinomial"})
    EXPECT_TRUE(std::binary_search(bound.begin(), bound.end(), std::string(op))) << op;
}

TEST(CudaEmulation, OutOfRangeIndicesAreTheCpusIndexError) {
  SKIP_UNLESS_EMULATING();
  Tensor w = randn({5, 3});
  // The bad index sits past the first check chunk (4096 indices), so the combine step is exercised.
  std::vector<int64_t> v(5000, 1);
  v[4500] = 7;
  Tensor idx = ids(v, {5000});
  try {
    (void)embedding(w.to(dev()), idx.to(dev()));
    FAIL() << "embedding with an out-of-range index did not throw";
  } catch (const IndexError& e) {
    EXPECT_NE(std::string(e.what()).find("index 7 (at position 4500"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)index_select(w.to(dev()), 0, ids({0, -1}, {2}).to(dev())), IndexError);
  EXPECT_THROW((void)gather(w.to(dev()), 1, ids({0, 3}, {1, 2}).to(dev())), IndexError);
  EXPECT_THROW((void)one_hot(ids({0, 4}, {2}).to(dev()), 3), IndexError);
  EXPECT_THROW((void)one_hot(ids({-2, 0}, {2}).to(dev()), 3), IndexError);
  EXPECT_THROW((void)scatter_add(w.to(dev()), 0, ids({5, 0, 0}, {1, 3}).to(dev()), w.to(dev())), IndexError);
}

TEST(CudaEmulation, EmbeddingBackwardWithRepeatsIsTheCpusBitwise) {
  SKIP_UNLESS_EMULATING();
  manual_seed(3);
  // 2500 rows, many repeats, a vocabulary over two prefix-sum chunks (1024 rows each).
  std::vector<int64_t> v(2500);
  for (size_t i = 0; i < v.size(); ++i) v[i] = int64_t((i * 7919) % 2100) % 3 == 0 ? 5 : int64_t((i * 31) % 2100);
  Tensor idx = ids(v, {50, 50});
  for (DType dt : {kFloat32, kBFloat16}) {
    Tensor w_cpu = randn({2100, 6}).to(dt).requires_grad_();
    Tensor w_dev = w_cpu.detach().to(dev()).requires_grad_();
    Tensor g = randn({50, 50, 6}).to(dt);
    embedding(w_cpu, idx).backward(g);
    embedding(w_dev, idx.to(dev())).backward(g.to(dev()));
    EXPECT_TRUE(testing::bitwise_equal(host(w_dev.grad()), w_cpu.grad())) << dtype_name(dt);
  }
}

TEST(CudaEmulation, SeededDropoutMaskIsTheCpusBitwise) {
  SKIP_UNLESS_EMULATING();
  for (DType dt : {kFloat32, kFloat16, kFloat64}) {
    Tensor x = randn({3, 1001}).to(dt);
    manual_seed(77);
    Tensor x_cpu = x.detach().requires_grad_();
    Tensor y_cpu = dropout(x_cpu, 0.3);
    manual_seed(77);
    Tensor x_dev = x.to(dev()).requires_grad_();
    Tensor y_dev = dropout(x_dev, 0.3);
    EXPECT_TRUE(testing::bitwise_equal(host(y_dev), y_cpu)) << dtype_name(dt);
    // The mask, through the backward: grad = mask * 1 / (1 - p).
    Tensor g = ones({3, 1001}).to(dt);
    y_cpu.backward(g);
    y_dev.backward(g.to(dev()));
    EXPECT_TRUE(testing::bitwise_equal(host(x_dev.grad()), x_cpu.grad())) << dtype_name(dt);
    // Roughly 30% dropped: the draws are not all the same.
    const double kept = host(x_dev.grad()).to(kFloat64).ne(0).to(kFloat64).sum().item<double>();
    EXPECT_GT(kept, 0.6 * 3003);
    EXPECT_LT(kept, 0.8 * 3003);
  }
}

TEST(CudaEmulation, DuplicateIndexScattersAreTheCpusBitwise) {
  SKIP_UNLESS_EMULATING();
  manual_seed(11);
  Tensor x = randn({4, 6});
  Tensor idx = ids({0, 2, 2, 0, 3, 2, 1, 1, 0, 3, 3, 3}, {2, 6});
  Tensor src = randn({3, 7});
  EXPECT_TRUE(testing::bitwise_equal(host(scatter_add(x.to(dev()), 0, idx.to(dev()), src.to(dev()))),
                                     scatter_add(x, 0, idx, src)));
  Tensor ia = ids({3, 0, 3, 3, 1}, {5});
  Tensor srcb = randn({5, 6}).to(kBFloat16);
  Tensor xb = x.to(kBFloat16);
  EXPECT_TRUE(testing::bitwise_equal(host(index_add(xb.to(dev()), 0, ia.to(dev()), srcb.to(dev()), 0.5)),
                                     index_add(xb, 0, ia, srcb, 0.5)));
  // In place into a strided view.
  Tensor base_cpu = zeros({6, 4});
  Tensor base_dev = base_cpu.to(dev());
  Tensor t_cpu = base_cpu.transpose(0, 1), t_dev = base_dev.transpose(0, 1);
  t_cpu.index_add_(1, ia, ones({4, 5}), 2);
  t_dev.index_add_(1, ia.to(dev()), ones({4, 5}).to(dev()), 2);
  EXPECT_TRUE(testing::bitwise_equal(host(base_dev), base_cpu));
  // Gradients of index_select and gather with repeats.
  Tensor a_cpu = randn({5, 4}).requires_grad_();
  Tensor a_dev = a_cpu.detach().to(dev()).requires_grad_();
  Tensor sel = ids({4, 1, 1, 4, 0}, {5}), gi = ids({1, 1, 0, 3, 3, 3, 2, 0}, {2, 4});
  (index_select(a_cpu, 0, sel).sum() + (gather(a_cpu, 0, gi) * 3).sum()).backward();
  (index_select(a_dev, 0, sel.to(dev())).sum() + (gather(a_dev, 0, gi.to(dev())) * 3).sum()).backward();
  EXPECT_TRUE(testing::bitwise_equal(host(a_dev.grad()), a_cpu.grad()));
}

TEST(CudaEmulation, SeededMultinomialIsTheCpusAndChecksRows) {
  SKIP_UNLESS_EMULATING();
  Tensor p = rand({6, 40});
  p = masked_fill(p, rand({6, 40}).lt(0.3), 0);
  for (bool replacement : {true, false}) {
    manual_seed(21);
    Tensor cpu = multinomial(p, 12, replacement);
    manual_seed(21);
    Tensor got = host(multinomial(p.to(dev()), 12, replacement));
    EXPECT_TRUE(testing::bitwise_equal(got, cpu)) << replacement;
  }
  Tensor bad = ones({3, 4});
  EXPECT_THROW((void)multinomial(masked_fill(bad, ids({0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0}, {3, 4}).to(kBool), -1)
                                     .to(dev()),
                                 2, true),
               ValueError);
  EXPECT_THROW((void)multinomial(zeros({2, 4}).to(dev()), 1, true), ValueError);
  EXPECT_THROW((void)multinomial(ones({2, 4}).to(dev()), 5, false), ValueError);
}

TEST(CudaEmulation, ResampleGradientsAreTheCpusBitwise) {
  SKIP_UNLESS_EMULATING();
  manual_seed(8);
  // Gradients gathered per input element in the CPU's order: equal bit for
  // bit, downsampling and upsampling, float32 and bfloat16 (float32 inside).
  for (DType dt : {kFloat32, kBFloat16}) {
    for (const std::vector<double>& scale : {std::vector<double>{1.7, 0.6}, std::vector<double>{0.45, 2.5}}) {
      Tensor x = randn({2, 3, 7, 9}).to(dt);
      Tensor g_cpu, g_dev;
      for (const char* mode : {"bilinear", "nearest"}) {
        Tensor a = x.detach().requires_grad_();
        Tensor b = x.to(dev()).requires_grad_();
        Tensor w = randn(interpolate(x, {}, scale, mode).shape()).to(dt);
        interpolate(a, {}, scale, mode).backward(w);
        interpolate(b, {}, scale, mode).backward(w.to(dev()));
        EXPECT_TRUE(testing::bitwise_equal(host(b.grad()), a.grad())) << mode << " " << dtype_name(dt);
      }
    }
    Tensor a = randn({2, 5, 6}).to(dt).requires_grad_();
    Tensor b = a.detach().to(dev()).requires_grad_();
    Tensor w = randn({2, 9, 10}).to(dt);
    pad(a, {2, 2, 3, 1}, "reflect").backward(w);
    pad(b, {2, 2, 3, 1}, "reflect").backward(w.to(dev()));
    EXPECT_TRUE(testing::bitwise_equal(host(b.grad()), a.grad())) << dtype_name(dt);
  }
}

TEST(CudaEmulation, SortWithNanAndTiesIsTheCpus) {
  SKIP_UNLESS_EMULATING();
  manual_seed(5);
  // Lines of 300 with many ties (quarters of small integers) and NaNs, along a middle dim.
  Tensor x = randint(-20, 20, {3, 300, 4}).to(kFloat32) / 4;
  x = masked_fill(x, rand({3, 300, 4}).lt(0.05), std::nan(""));
  for (bool descending : {false, true}) {
    auto [v_cpu, i_cpu] = x.sort(1, descending);
    auto [v_dev, i_dev] = x.to(dev()).sort(1, descending);
    EXPECT_TRUE(testing::bitwise_equal(host(v_dev), v_cpu)) << descending;
    EXPECT_TRUE(testing::bitwise_equal(host(i_dev), i_cpu)) << descending;
  }
  auto [tv_cpu, ti_cpu] = x.to(kBFloat16).topk(7, 1);
  auto [tv_dev, ti_dev] = x.to(kBFloat16).to(dev()).topk(7, 1);
  EXPECT_TRUE(testing::bitwise_equal(host(tv_dev), tv_cpu));
  EXPECT_TRUE(testing::bitwise_equal(host(ti_dev), ti_cpu));
}

#endif

}  // namespace
}  // namespace dtr
