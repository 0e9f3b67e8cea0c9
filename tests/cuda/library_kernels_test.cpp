// The cuBLAS and cuDNN kernels (matmul, linear, the convolutions, fused
// attention) on a CUDA device against the CPU kernels, and run twice for
// bitwise repeatability (Note [library determinism], Note [cudnn
// determinism]). They need a GPU: without one every test here skips (the
// kernels cannot run under host emulation).
#include <gtest/gtest.h>

#include <vector>

#include "core/backend.h"
#include "dtr/dtr.h"
#include "tests/testing.h"

namespace dtr {
namespace {

#if DTR_HAVE_CUDA

bool have_cuda() { return find_backend(kCUDA)->device_count() > 0; }

#define SKIP_WITHOUT_CUDA() \
  if (!have_cuda()) GTEST_SKIP() << "no CUDA device: cuBLAS and cuDNN kernels run only on a GPU"

const Device kGpu(kCUDA, 0);

std::vector<double> values(const Tensor& t) { return t.to(Device(kCPU)).to(kFloat64).to_vector<double>(); }

// Tolerances per dtype: float32 GEMMs are true FP32 (TF32 off), so they
// agree with OpenBLAS to a few float32 ulps of the sums.
double tol(DType dt) { return dt == kFloat64 ? 1e-10 : dt == kFloat32 ? 1e-4 : 2e-2; }

// f maps the inputs to its results (only ops with CUDA kernels on the
// device side: no reductions, no cat).
template <typename F>
void expect_gpu_matches_cpu(F f, std::vector<Tensor> inputs, const char* what) {
  const DType dt = inputs[0].dtype();
  std::vector<Tensor> on_gpu;
  for (const Tensor& t : inputs) on_gpu.push_back(t.to(kGpu));
  const std::vector<Tensor> want = f(inputs), got = f(on_gpu), again = f(on_gpu);
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].device(), kGpu) << what << " result " << i;
    EXPECT_EQ(got[i].shape(), want[i].shape()) << what << " result " << i;
    EXPECT_TRUE(testing::allclose(got[i].to(Device(kCPU)), values(want[i]), tol(dt), tol(dt)))
        << what << " result " << i;
    // Twice on the device: bitwise the same.
    EXPECT_TRUE(testing::bitwise_equal(again[i].to(Device(kCPU)), got[i].to(Device(kCPU)))) << what << " result " << i;
  }
}
using Results = std::vector<Tensor>;

TEST(CudaLibraryKernels, MatmulEveryFormAndDtype) {
  SKIP_WITHOUT_CUDA();
  manual_seed(3);
  for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    const auto mm = [](const std::vector<Tensor>& t) { return Results{matmul(t[0], t[1])}; };
    expect_gpu_matches_cpu(mm, {randn({37, 19}).to(dt), randn({19, 23}).to(dt)}, "2d");
    expect_gpu_matches_cpu(mm, {randn({19}).to(dt), randn({19}).to(dt)}, "dot");
    expect_gpu_matches_cpu(mm, {randn({5, 19}).to(dt), randn({19}).to(dt)}, "2d @ 1d");
    expect_gpu_matches_cpu(mm, {randn({19}).to(dt), randn({19, 6}).to(dt)}, "1d @ 2d");
    // Broadcast batches: b repeated (stride 0), a's batch dims not one stride (packed).
    expect_gpu_matches_cpu(mm, {randn({2, 3, 8, 5}).to(dt), randn({5, 7}).to(dt)}, "batched @ 2d");
    expect_gpu_matches_cpu(mm, {randn({2, 1, 8, 5}).to(dt), randn({3, 5, 7}).to(dt)}, "broadcast");
    // Transposed and sliced operands: column-major reads and packed copies.
    expect_gpu_matches_cpu(
        [](const std::vector<Tensor>& t) {
          return Results{matmul(t[0].transpose(-1, -2), t[1].slice(1, 0, 18, 2)),   // row stride 10
                         matmul(t[0].transpose(-1, -2), t[2].slice(2, 0, 10, 2))};  // column step 2: packed
        },
        {randn({4, 9, 6}).to(dt), randn({4, 18, 5}).to(dt), randn({4, 9, 10}).to(dt)}, "strided");
  }
  // Integer matmul (own kernel).
  const Tensor a = randint(-9, 9, {3, 4, 5}), b = randint(-9, 9, {5, 2});
  EXPECT_EQ(matmul(a.to(kGpu), b.to(kGpu)).to(Device(kCPU)).to_vector<int64_t>(), matmul(a, b).to_vector<int64_t>());
}

TEST(CudaLibraryKernels, LinearWithAndWithoutBias) {
  SKIP_WITHOUT_CUDA();
  manual_seed(4);
  for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    expect_gpu_matches_cpu([](const std::vector<Tensor>& t) { return Results{linear(t[0], t[1], t[2])}; },
                           {randn({3, 7, 33}).to(dt), randn({17, 33}).to(dt), randn({17}).to(dt)}, "bias");
    expect_gpu_matches_cpu([](const std::vector<Tensor>& t) { return Results{linear(t[0], t[1])}; },
                           {randn({9, 33}).to(dt), randn({17, 33}).to(dt)}, "no bias");
  }
}

// A convolution's output and its input and weight gradients for an output
// gradient of 0.5 everywhere (the bias's gradient is a reduction, not a
// kernel of these families, so the bias takes none).
Results conv_and_grads(const std::vector<Tensor>& t, IntList stride, IntList padding, IntList dilation,
                       int64_t groups, bool transposed) {
  Tensor x = t[0].detach(), w = t[1].detach();
  x.requires_grad_();
  w.requires_grad_();
  Tensor y = transposed ? conv_transpose2d(x, w, t[2], stride, padding, {0, 0}, groups, dilation)
                        : conv2d(x, w, t[2], stride, padding, dilation, groups);
  y.backward(full(y.shape(), 0.5, TensorOptions(y.dtype()).device(y.device())));
  return {y.detach(), x.grad(), w.grad()};
}

TEST(CudaLibraryKernels, ConvolutionsAndTheirGradients) {
  SKIP_WITHOUT_CUDA();
  manual_seed(5);
  for (DType dt : {kFloat32, kFloat64, kFloat16}) {
    expect_gpu_matches_cpu(
        [](const std::vector<Tensor>& t) { return conv_and_grads(t, {2, 1}, {1, 2}, {1, 2}, 2, false); },
        {randn({3, 4, 11, 9}).to(dt), randn({6, 2, 3, 3}).to(dt), randn({6}).to(dt)}, "conv2d");
    expect_gpu_matches_cpu(
        [](const std::vector<Tensor>& t) { return conv_and_grads(t, {2, 2}, {1, 0}, {1, 1}, 1, true); },
        {randn({2, 4, 5, 6}).to(dt), randn({4, 3, 3, 2}).to(dt), randn({3}).to(dt)}, "conv_transpose2d");
  }
}

// The fused attention's output and its q, k, v gradients for the output
// gradient t[3].
Results attention_and_grads(const std::vector<Tensor>& t, bool causal) {
  Tensor q = t[0].detach(), k = t[1].detach(), v = t[2].detach();
  for (Tensor* p : {&q, &k, &v}) p->requires_grad_();
  Tensor o = scaled_dot_product_attention(q, k, v, Tensor(), 0.0, causal);
  o.backward(t[3]);
  return {o.detach(), q.grad(), k.grad(), v.grad()};
}

TEST(CudaLibraryKernels, FusedAttentionAcrossBlocks) {
  SKIP_WITHOUT_CUDA();
  manual_seed(6);
  for (DType dt : {kFloat32, kFloat64, kBFloat16}) {
    // L = 150: three blocks of query rows, the last one short.
    for (bool causal : {false, true}) {
      expect_gpu_matches_cpu([causal](const std::vector<Tensor>& t) { return attention_and_grads(t, causal); },
                             {randn({3, 150, 16}).to(dt), randn({3, 150, 16}).to(dt), randn({3, 150, 8}).to(dt),
                              randn({3, 150, 8}).to(dt)},
                             causal ? "causal" : "full");
    }
  }
}

#endif

}  // namespace
}  // namespace dtr
