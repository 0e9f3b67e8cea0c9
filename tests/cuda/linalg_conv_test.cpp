// The linalg, conv and attention families' CUDA kernels under host
// emulation (Note [host emulation of CUDA kernels]): the pooling kernels
// through the test device against the CPU's, bitwise; the integer matmul
// and packing kernels of cuda/linalg.cu and the attention block kernels of
// cuda/attention.cu through their launchers on host memory. The cuBLAS and
// cuDNN calls need a GPU (scripts/gpu-check.sh).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "dtr/dtr.h"
#include "second_device.h"
#include "tests/testing.h"

#if DTR_HAVE_CUDA
#include "cuda/emulation.h"
#include "cuda/attention.h"
#include "cuda/linalg.h"
#endif

namespace dtr {
namespace {

#if DTR_HAVE_CUDA

bool has(const std::vector<std::string>& sorted, const std::string& op) {
  return std::binary_search(sorted.begin(), sorted.end(), op);
}

TEST(CudaEmulation, PoolingKernelsAreEmulatedLibraryKernelsAreNot) {
  DTR_SKIP_UNLESS_CUDA_EMULATION();
  const std::vector<std::string>& bound = testing::second_device_cuda_ops();
  const std::vector<std::string> all = cuda::ops_with_cuda_kernels();
  for (const char* op : {"max_pool2d", "max_pool2d_backward", "avg_pool2d", "avg_pool2d_backward",
                         "adaptive_avg_pool2d", "adaptive_avg_pool2d_backward"}) {
    EXPECT_TRUE(has(bound, op)) << op;
  }
  // cuBLAS and cuDNN cannot run on host memory: CUDA kernels, never emulated.
  for (const char* op : {"matmul", "linear", "conv2d", "conv2d_input_grad", "conv2d_weight_grad",
                         "conv_transpose2d", "scaled_dot_product_attention",
                         "scaled_dot_product_attention_backward"}) {
    EXPECT_TRUE(has(all, op)) << op;
    EXPECT_FALSE(has(bound, op)) << op;
  }
}

// The pool's output and its input gradient on the test device (the CUDA
// kernels) and on the CPU, for one gradient g.
struct PoolRun {
  Tensor y, gx;
};
template <typename F>
PoolRun run_pool(const Tensor& x, const Tensor& g, Device d, F pool) {
  Tensor xd = x.to(d).detach();  // a fresh leaf (to(cpu) of a CPU tensor is the tensor itself)
  xd.requires_grad_();
  Tensor y = pool(xd);
  y.backward(g.to(d));
  return {y.detach().to(Device(kCPU)), xd.grad().to(Device(kCPU))};
}

template <typename F>
void expect_pool_bitwise(const Tensor& x, F pool, const char* what) {
  const Tensor y_shape = pool(x);
  const Tensor g = randn(y_shape.shape(), TensorOptions(x.dtype()));
  const PoolRun dev = run_pool(x, g, testing::second_device(), pool);
  const PoolRun cpu = run_pool(x, g, Device(kCPU), pool);
  EXPECT_TRUE(testing::bitwise_equal(dev.y, cpu.y)) << what;
  EXPECT_TRUE(testing::bitwise_equal(dev.gx, cpu.gx)) << what;
}

TEST(CudaEmulation, PoolBackwardGathersOverlappingWindowsBitwiseTheCpuScatter) {
  DTR_SKIP_UNLESS_CUDA_EMULATION();
  manual_seed(7);
  for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    // Rounded to few values, so maxima tie across overlapping windows.
    Tensor x = randint(-3, 4, {2, 3, 9, 7}).to(dt);
    const std::string name(dtype_name(dt));
    // Overlapping windows (stride < kernel) with padding: an element is in
    // up to 9 windows, the maximum of several.
    expect_pool_bitwise(x, [](const Tensor& t) { return max_pool2d(t, {3, 3}, {1, 1}, {1, 1}); },
                        ("max 3x3/1 " + name).c_str());
    expect_pool_bitwise(x, [](const Tensor& t) { return max_pool2d(t, {3, 2}, {2, 1}, {1, 0}); },
                        ("max 3x2/2x1 " + name).c_str());
    expect_pool_bitwise(x, [](const Tensor& t) { return avg_pool2d(t, {3, 3}, {1, 2}, {1, 1}); },
                        ("avg 3x3 " + name).c_str());
    // Non-divisible adaptive windows overlap too (9 -> 4, 7 -> 3).
    expect_pool_bitwise(x, [](const Tensor& t) { return adaptive_avg_pool2d(t, {4, 3}); },
                        ("adaptive " + name).c_str());
    expect_pool_bitwise(x, [](const Tensor& t) { return adaptive_avg_pool2d(t, {12, 10}); },
                        ("adaptive up " + name).c_str());
  }
}

TEST(CudaEmulation, MaxPoolNaNWinsAndTakesTheGradient) {
  DTR_SKIP_UNLESS_CUDA_EMULATION();
  std::vector<float> v(16);
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(i);
  v[5] = std::nanf("");
  v[6] = std::nanf("");  // two NaNs in one window: the later one wins, as on the CPU
  Tensor x = from_vector(v, {1, 1, 4, 4});
  expect_pool_bitwise(x, [](const Tensor& t) { return max_pool2d(t, {2, 2}, {1, 1}); }, "nan");
  const Device d = testing::second_device();
  Tensor y = max_pool2d(x.to(d), {2, 2}, {2, 2}).to(Device(kCPU));
  EXPECT_TRUE(std::isnan(y.to_vector<float>()[0]));
}

// ---- cuda/linalg.cu's launchers on host memory -------------------------------------------

cuda::MatrixBatch batch_of(const Tensor& t, IntList batch, IntList batch_strides) {
  cuda::MatrixBatch m;
  m.data = static_cast<const std::byte*>(t.const_data_ptr());
  m.dtype = t.dtype();
  m.ndim = int(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    m.batch[i] = batch[i];
    m.batch_strides[i] = batch_strides[i];
  }
  const int64_t nd = t.dim();
  m.rows = t.shape()[size_t(nd - 2)];
  m.cols = t.shape()[size_t(nd - 1)];
  m.rs = t.stride(nd - 2);
  m.cs = t.stride(nd - 1);
  return m;
}

TEST(CudaEmulation, IntegerMatmulKernelWrapsLikeTheCpu) {
  const cuda::Exec host{.stream = nullptr, .emulate = true};
  // a (2, 4, 3) transposed from (2, 3, 4); b (3, 5) broadcast over the batch.
  Tensor a = arange(0, 24, 1, TensorOptions(kInt64)).reshape({2, 3, 4}).transpose(1, 2);
  Tensor b = arange(-7, 8, 1, TensorOptions(kInt64)).reshape({3, 5});
  std::vector<int64_t> out(2 * 4 * 5);
  cuda::launch_matmul_integer(batch_of(a, {2}, {a.stride(0)}), batch_of(b, {2}, {0}),
                              reinterpret_cast<std::byte*>(out.data()), kInt64, host);
  EXPECT_EQ(out, matmul(a, b).to_vector<int64_t>());

  // uint8: products and sums wrap modulo 256.
  Tensor a8 = full({3, 2}, 200, TensorOptions(kUInt8));
  Tensor b8 = full({2, 2}, 3, TensorOptions(kUInt8));
  std::vector<uint8_t> out8(3 * 2);
  cuda::launch_matmul_integer(batch_of(a8, {}, {}), batch_of(b8, {}, {}), reinterpret_cast<std::byte*>(out8.data()),
                              kUInt8, host);
  const std::vector<int64_t> want = matmul(a8, b8).to(kInt64).to_vector<int64_t>();
  ASSERT_EQ(want.size(), out8.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(int64_t(out8[i]), want[i]);
  EXPECT_EQ(int64_t(out8[0]), (200 * 3 * 2) % 256);
}

TEST(CudaEmulation, PackedMatricesAreTheStridedBroadcastOperand) {
  const cuda::Exec host{.stream = nullptr, .emulate = true};
  // (3, 4) transposed with a column step of 2, broadcast over a (2, 3) batch.
  Tensor base = arange(0, 48, 1, TensorOptions(kFloat32)).reshape({6, 8});
  Tensor m = base.slice(1, 0, 8, 2).slice(0, 0, 3).transpose(0, 1);  // (4, 3), strides (2, 8)
  std::vector<float> packed(2 * 3 * 4 * 3);
  cuda::launch_pack_matrices(batch_of(m, {2, 3}, {0, 0}), reinterpret_cast<std::byte*>(packed.data()), host);
  const std::vector<float> one = m.contiguous().to_vector<float>();
  for (size_t b = 0; b < 6; ++b)
    for (size_t i = 0; i < one.size(); ++i) EXPECT_EQ(packed[b * one.size() + i], one[i]) << b << " " << i;
  std::vector<float> rows(5 * 3);
  const std::vector<float> bias = {1.5f, -2.0f, 4.0f};
  cuda::launch_fill_rows(reinterpret_cast<std::byte*>(rows.data()), reinterpret_cast<const std::byte*>(bias.data()),
                         kFloat32, 5, 3, host);
  for (size_t i = 0; i < rows.size(); ++i) EXPECT_EQ(rows[i], bias[i % 3]);
}

// ---- cuda/attention.cu's launchers on host memory --------------------------------------

TEST(CudaEmulation, AttentionBlockSoftmaxMasksCausallyAndRebuildsFromLogsumexp) {
  const cuda::Exec host{.stream = nullptr, .emulate = true};
  // Two slices, the block of rows [1, 4) of L = 5 queries over S = 4 keys,
  // causal: rows see 2, 3 and 4 keys; score rows are 4 long.
  const cuda::AttentionBlock blk{.nb = 2, .rows = 3, .keys = 4, .i0 = 1, .S = 4, .L = 5, .causal = true};
  std::vector<float> raw(2 * 3 * 4);
  for (size_t i = 0; i < raw.size(); ++i) raw[i] = float(std::sin(double(i) * 1.7)) * 3.0f;
  std::vector<float> s = raw, lse(2 * 5, -1.0f);
  cuda::launch_attention_softmax(blk, kFloat32, reinterpret_cast<std::byte*>(s.data()),
                                 reinterpret_cast<std::byte*>(lse.data()), host);
  for (int64_t n = 0; n < 2; ++n) {
    EXPECT_EQ(lse[size_t(n * 5 + 3)], -1.0f) << "row 3 of the slice is outside the block";
    for (int64_t r = 0; r < 3; ++r) {
      const int64_t seen = r + 2;
      const float* row = raw.data() + (n * 3 + r) * 4;
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < seen; ++j) mx = std::max(mx, double(row[j]));
      for (int64_t j = 0; j < seen; ++j) sum += std::exp(double(row[j]) - mx);
      EXPECT_NEAR(lse[size_t(n * 5 + r)], mx + std::log(sum), 1e-5) << n << " " << r;
      for (int64_t j = 0; j < 4; ++j) {
        const double want = j < seen ? std::exp(double(row[j]) - mx) / sum : 0.0;
        EXPECT_NEAR(s[size_t((n * 3 + r) * 4 + j)], want, 1e-6) << n << " " << r << " " << j;
      }
    }
  }
  // The backward's probabilities from the raw scores and the logsumexp.
  std::vector<float> p = raw;
  cuda::launch_attention_probs(blk, kFloat32, reinterpret_cast<std::byte*>(p.data()),
                               reinterpret_cast<const std::byte*>(lse.data()), host);
  for (size_t i = 0; i < p.size(); ++i) EXPECT_NEAR(p[i], s[i], 1e-6) << i;
  // dS = P (dP - (sum_e g o - g_lse)), with Ev = 2.
  std::vector<float> g(2 * 5 * 2), o(2 * 5 * 2), glse(2 * 5);
  for (size_t i = 0; i < g.size(); ++i) g[i] = float(i % 7) - 3.0f, o[i] = 0.25f * float(i % 5);
  for (size_t i = 0; i < glse.size(); ++i) glse[i] = 0.5f * float(i);
  std::vector<float> shift(2 * 3), dp(p.size(), 1.0f);
  const auto* G = reinterpret_cast<const std::byte*>(g.data() + 1 * 2);  // the block's first row
  const auto* O = reinterpret_cast<const std::byte*>(o.data() + 1 * 2);
  cuda::launch_attention_row_shift(blk, kFloat32, G, O, reinterpret_cast<const std::byte*>(glse.data() + 1), 2,
                                   reinterpret_cast<std::byte*>(shift.data()), host);
  for (int64_t n = 0; n < 2; ++n) {
    for (int64_t r = 0; r < 3; ++r) {
      const size_t row = size_t(n * 5 + 1 + r);
      const float want = g[row * 2] * o[row * 2] + g[row * 2 + 1] * o[row * 2 + 1] - glse[row];
      EXPECT_FLOAT_EQ(shift[size_t(n * 3 + r)], want) << n << " " << r;
    }
  }
  cuda::launch_attention_score_grad(blk, kFloat32, reinterpret_cast<const std::byte*>(p.data()),
                                    reinterpret_cast<std::byte*>(dp.data()),
                                    reinterpret_cast<const std::byte*>(shift.data()), host);
  for (size_t i = 0; i < dp.size(); ++i) EXPECT_FLOAT_EQ(dp[i], p[i] * (1.0f - shift[i / 4])) << i;
}

#endif

}  // namespace
}  // namespace dtr
