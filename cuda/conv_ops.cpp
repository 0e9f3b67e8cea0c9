// The CUDA kernels of the conv family (cpu/conv.cpp's rows). Convolutions
// run on cuDNN 9's legacy convolution API (cudnn_cnn.h still declares
// cudnnConvolutionForward, cudnnConvolutionBackwardData and
// cudnnConvolutionBackwardFilter), never emulatable; pooling runs on
// cuda/conv.cu's own kernels, emulatable.
//
// Convolutions: NCHW tensors, (Cout, C / groups, kH, kW) filters, cross-
// correlation with the rows' stride, padding, dilation and groups
// (cudnnSetConvolutionGroupCount). conv_transpose2d is the backward-data
// of the convolution from its output to its input, as on the CPU. Bias is
// added by cuda/conv.cu's kernel after the convolution (for float16/
// bfloat16 the output is rounded before the bias is added, where the CPU
// rounds once: a difference within rounding).
//
// Note [cudnn determinism]: algorithms are fixed, never searched for:
// forward IMPLICIT_PRECOMP_GEMM (then IMPLICIT_GEMM where cuDNN refuses
// it), backward data ALGO_1 (then FFT_TILING), backward filter ALGO_1 (then
// FFT_TILING); cuDNN's documentation lists all of these as deterministic
// (BWD_DATA_ALGO_0 and BWD_FILTER_ALGO_0/3 are not, and are never used).
// Math is CUDNN_FMA_MATH for float32 (CUDNN_DEFAULT_MATH would allow TF32
// tensor cores on sm_80 and later), CUDNN_DEFAULT_MATH otherwise; compute
// in double for float64 and float for the rest. Workspaces come from
// cudaMallocAsync on the stream (cuda/scratch.h).
//
// Every path makes the kernel's device current (exec_for) before its first
// CUDA or cuDNN call.
//
// Verified here: compiles and links; the pooling and bias kernels run under
// host emulation in the conformance harness. Not verified: any cuDNN call
// (no GPU was at hand), in particular which of the fixed algorithms cuDNN
// 9 accepts for float64 and for dilated or grouped shapes.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "cuda/conv.h"
#include "cuda/kernel_util.h"
#include "cuda/libraries.h"
#include "cuda/scratch.h"

namespace dtr::cuda {
namespace {

// ---- cuDNN convolutions -------------------------------------------------------------

int dim_of(int64_t v, std::string_view op) {
  DTR_CHECK(v <= int64_t(std::numeric_limits<int>::max()), NotImplementedError,
            "{}: dimension {} exceeds cuDNN's int", op, v);
  return int(v);
}

cudnnDataType_t cudnn_type(DType dt) {
  switch (dt) {
    case kFloat64: return CUDNN_DATA_DOUBLE;
    case kFloat16: return CUDNN_DATA_HALF;
    case kBFloat16: return CUDNN_DATA_BFLOAT16;
    default: return CUDNN_DATA_FLOAT;
  }
}

/// A cuDNN descriptor destroyed with its owner (also when a later member's
/// set-up throws in the owner's constructor).
template <typename T, cudnnStatus_t (*Destroy)(T)>
class Owned {
 public:
  Owned() = default;
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  ~Owned() {
    if (p_ != nullptr) (void)Destroy(p_);
  }
  T* out() { return &p_; }
  T get() const { return p_; }

 private:
  T p_ = nullptr;
};

/// The descriptors of one convolution from x (N, C, H, W) through filter w
/// (K, C / groups, kH, kW) to y (N, K, Ho, Wo), destroyed with it.
class ConvDescriptors {
 public:
  ConvDescriptors(DType dt, IntList x, IntList w, IntList y, const Attrs& a, std::string_view op) {
    for (IntList s : {x, w, y}) {
      DTR_CHECK(numel(s) < (int64_t{1} << 31), NotImplementedError,
                "{}: a tensor of shape {} has 2^31 or more elements, beyond cuDNN's legacy convolutions", op,
                shape_str(s));
    }
    const cudnnDataType_t t = cudnn_type(dt);
    DTR_CUDNN_CHECK(cudnnCreateTensorDescriptor(x_.out()));
    DTR_CUDNN_CHECK(cudnnCreateTensorDescriptor(y_.out()));
    DTR_CUDNN_CHECK(cudnnCreateFilterDescriptor(w_.out()));
    DTR_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(conv_.out()));
    DTR_CUDNN_CHECK(cudnnSetTensor4dDescriptor(x_.get(), CUDNN_TENSOR_NCHW, t, dim_of(x[0], op), dim_of(x[1], op),
                                               dim_of(x[2], op), dim_of(x[3], op)));
    DTR_CUDNN_CHECK(cudnnSetTensor4dDescriptor(y_.get(), CUDNN_TENSOR_NCHW, t, dim_of(y[0], op), dim_of(y[1], op),
                                               dim_of(y[2], op), dim_of(y[3], op)));
    DTR_CUDNN_CHECK(cudnnSetFilter4dDescriptor(w_.get(), t, CUDNN_TENSOR_NCHW, dim_of(w[0], op), dim_of(w[1], op),
                                               dim_of(w[2], op), dim_of(w[3], op)));
    const Shape &s = a.ints("stride"), &p = a.ints("padding"), &d = a.ints("dilation");
    DTR_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(conv(), dim_of(p[0], op), dim_of(p[1], op), dim_of(s[0], op),
                                                    dim_of(s[1], op), dim_of(d[0], op), dim_of(d[1], op),
                                                    CUDNN_CROSS_CORRELATION,
                                                    dt == kFloat64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT));
    DTR_CUDNN_CHECK(cudnnSetConvolutionGroupCount(conv(), dim_of(a.i("groups"), op)));
    DTR_CUDNN_CHECK(cudnnSetConvolutionMathType(conv(), dt == kFloat32 ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH));
  }

  cudnnTensorDescriptor_t x() const { return x_.get(); }
  cudnnTensorDescriptor_t y() const { return y_.get(); }
  cudnnFilterDescriptor_t w() const { return w_.get(); }
  cudnnConvolutionDescriptor_t conv() const { return conv_.get(); }

 private:
  Owned<cudnnTensorDescriptor_t, cudnnDestroyTensorDescriptor> x_, y_;
  Owned<cudnnFilterDescriptor_t, cudnnDestroyFilterDescriptor> w_;
  Owned<cudnnConvolutionDescriptor_t, cudnnDestroyConvolutionDescriptor> conv_;
};

/// cuDNN's scaling factors: double for double data, float otherwise.
struct Scale {
  float f;
  double d;
  const void* of(DType dt) const { return dt == kFloat64 ? static_cast<const void*>(&d) : &f; }
};
constexpr Scale kOne{1.0f, 1.0}, kZero{0.0f, 0.0};

/// The first of `algos` whose workspace query succeeds (Note [cudnn
/// determinism]); its workspace size in `bytes`.
template <typename Algo, typename Query>
Algo first_supported(std::initializer_list<Algo> algos, Query query, size_t& bytes, std::string_view op) {
  for (Algo a : algos) {
    bytes = 0;
    const cudnnStatus_t rc = query(a, &bytes);
    if (rc == CUDNN_STATUS_SUCCESS) return a;
    // cuDNN 9 refines NOT_SUPPORTED into codes 3001... (shape, data type, ...).
    if (CUDNN_STATUS_CATEGORY(rc) != CUDNN_STATUS_NOT_SUPPORTED) check_cudnn(rc, "cudnnGetConvolution*WorkspaceSize");
  }
  throw NotImplementedError(fmt::format("{}: cuDNN supports none of its deterministic algorithms for this "
                                        "convolution",
                                        op));
}

/// Which operand of the convolution x (input) * w (filter) -> y (output) a
/// call writes: y (forward), x (backward data) or w (backward filter).
enum class Pass : uint8_t { kForward, kBackwardData, kBackwardFilter };

/// One cuDNN convolution call of `pass` over the forward's operands x, w, y,
/// the written one overwritten (beta = 0), with its fixed algorithm and a
/// workspace on the stream, on the device `e` was made for.
void run_conv(Pass pass, const KernelContext& c, const Exec& e, const TensorArg& x, const TensorArg& w,
              const TensorArg& y, std::string_view op) {
  cudnnHandle_t h = cudnn_handle(c.device.index);
  const DType dt = x.dtype;
  const ConvDescriptors d(dt, x.shape, w.shape, y.shape, c.attrs, op);
  size_t bytes = 0;
  switch (pass) {
    case Pass::kForward: {
      const auto algo = first_supported(
          {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM},
          [&](cudnnConvolutionFwdAlgo_t a, size_t* b) {
            return cudnnGetConvolutionForwardWorkspaceSize(h, d.x(), d.w(), d.conv(), d.y(), a, b);
          },
          bytes, op);
      const Scratch ws(e, bytes);
      DTR_CUDNN_CHECK(cudnnConvolutionForward(h, kOne.of(dt), d.x(), x.data, d.w(), w.data, d.conv(), algo, ws.data(),
                                              bytes, kZero.of(dt), d.y(), y.data));
      return;
    }
    case Pass::kBackwardData: {
      const auto algo = first_supported(
          {CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING},
          [&](cudnnConvolutionBwdDataAlgo_t a, size_t* b) {
            return cudnnGetConvolutionBackwardDataWorkspaceSize(h, d.w(), d.y(), d.conv(), d.x(), a, b);
          },
          bytes, op);
      const Scratch ws(e, bytes);
      DTR_CUDNN_CHECK(cudnnConvolutionBackwardData(h, kOne.of(dt), d.w(), w.data, d.y(), y.data, d.conv(), algo,
                                                   ws.data(), bytes, kZero.of(dt), d.x(), x.data));
      return;
    }
    case Pass::kBackwardFilter: {
      const auto algo = first_supported(
          {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING},
          [&](cudnnConvolutionBwdFilterAlgo_t a, size_t* b) {
            return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, d.x(), d.y(), d.conv(), d.w(), a, b);
          },
          bytes, op);
      const Scratch ws(e, bytes);
      DTR_CUDNN_CHECK(cudnnConvolutionBackwardFilter(h, kOne.of(dt), d.x(), x.data, d.y(), y.data, d.conv(), algo,
                                                     ws.data(), bytes, kZero.of(dt), d.w(), w.data));
      return;
    }
  }
}

/// t = 0 on the device `e` was made for.
void zero(const TensorArg& t, const Exec& e) {
  const size_t n = size_t(t.numel()) * size_t(itemsize(t.dtype));
  if (n == 0) return;
  if (e.emulate) std::memset(t.data, 0, n);
  else DTR_CUDA_CHECK(cudaMemsetAsync(t.data, 0, n, cudaStreamLegacy));
}

bool any_empty(std::initializer_list<const TensorArg*> ts) {
  for (const TensorArg* t : ts)
    if (t->numel() == 0) return true;
  return false;
}

void check_conv_dtype(const KernelContext& c) { check_floating(c.inputs[0].dtype, c); }

void add_bias(const KernelContext& c, const TensorArg& y, const Exec& e) {
  if (c.inputs.size() > 2)
    launch_add_channel_bias(y.data, c.inputs[2].data, y.dtype, y.shape[0], y.shape[1], y.shape[2] * y.shape[3], e);
}

// inputs: x (N, C, H, W), weight (Cout, Cg, kH, kW), optional bias (Cout), contiguous;
// outputs: y (N, Cout, Ho, Wo).
void conv2d_kernel(const KernelContext& c) {
  check_conv_dtype(c);
  const TensorArg &x = c.inputs[0], &w = c.inputs[1], &y = c.outputs[0];
  if (y.numel() == 0) return;
  const Exec e = exec_for(c.device);  // the device current before any CUDA call
  if (any_empty({&x, &w})) zero(y, e);  // no channels to sum: y = bias
  else run_conv(Pass::kForward, c, e, x, w, y, "conv2d");
  add_bias(c, y, e);
}

// inputs: grad_y (N, Cout, Ho, Wo), weight (Cout, Cg, kH, kW); outputs: grad_x (N, C, H, W).
void conv2d_input_grad_kernel(const KernelContext& c) {
  check_conv_dtype(c);
  const TensorArg &gy = c.inputs[0], &w = c.inputs[1], &gx = c.outputs[0];
  if (gx.numel() == 0) return;
  const Exec e = exec_for(c.device);
  if (any_empty({&gy, &w})) return zero(gx, e);
  run_conv(Pass::kBackwardData, c, e, gx, w, gy, "conv2d_input_grad");
}

// inputs: grad_y (N, Cout, Ho, Wo), x (N, C, H, W); outputs: grad_w (Cout, Cg, kH, kW).
void conv2d_weight_grad_kernel(const KernelContext& c) {
  check_conv_dtype(c);
  const TensorArg &gy = c.inputs[0], &x = c.inputs[1], &gw = c.outputs[0];
  if (gw.numel() == 0) return;
  const Exec e = exec_for(c.device);
  if (any_empty({&gy, &x})) return zero(gw, e);  // no images: the CPU's zeros
  run_conv(Pass::kBackwardFilter, c, e, x, gw, gy, "conv2d_weight_grad");
}

// Output size of a convolution along one dim, 0 when the dilated kernel
// does not fit the padded input (eager/ops/conv.cpp; C++ division truncates
// a negative span toward zero, which would make it 1).
int64_t conv_out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
  const int64_t span = in + 2 * p - d * (k - 1) - 1;
  return span < 0 ? 0 : span / s + 1;
}

// inputs: x (N, Cin, H, W), weight (Cin, Cg, kH, kW), optional bias (Cg * groups);
// outputs: y (N, Cg * groups, Ho, Wo): the backward-data of the convolution
// from y's shape to x's, then y += bias.
void conv_transpose2d_kernel(const KernelContext& c) {
  check_conv_dtype(c);
  const TensorArg &x = c.inputs[0], &w = c.inputs[1], &y = c.outputs[0];
  if (y.numel() == 0) return;
  const Shape &s = c.attrs.ints("stride"), &p = c.attrs.ints("padding"), &d = c.attrs.ints("dilation");
  // output_padding >= stride (allowed below the dilation) makes y larger
  // than any input of x's size reaches; cuDNN's descriptors cannot say so.
  DTR_CHECK(conv_out_size(y.shape[2], w.shape[2], s[0], p[0], d[0]) == x.shape[2] &&
                conv_out_size(y.shape[3], w.shape[3], s[1], p[1], d[1]) == x.shape[3],
            NotImplementedError,
            "conv_transpose2d: output_padding {} not below the stride {}: no CUDA kernel for this case",
            shape_str(c.attrs.ints("output_padding")), shape_str(s));
  const Exec e = exec_for(c.device);
  if (any_empty({&x, &w})) zero(y, e);
  else run_conv(Pass::kBackwardData, c, e, y, w, x, "conv_transpose2d");
  add_bias(c, y, e);
}

// ---- pooling ----------------------------------------------------------------------

PoolGeometry pool_geometry(IntList in, IntList out, const Attrs& a) {
  PoolGeometry g;
  g.planes = in[0] * in[1];
  g.H = in[2], g.W = in[3], g.Ho = out[2], g.Wo = out[3];
  if (a.has("kernel_size")) {
    const Shape &k = a.ints("kernel_size"), &s = a.ints("stride"), &p = a.ints("padding");
    g.kH = k[0], g.kW = k[1], g.sH = s[0], g.sW = s[1], g.pH = p[0], g.pW = p[1];
  }
  return g;
}

template <PoolKind Kind>
void pool_forward_kernel(const KernelContext& c) {
  const TensorArg &x = c.inputs[0], &y = c.outputs[0];
  check_floating(x.dtype, c);
  const Exec e = exec_for(c.device);
  int64_t* indices = Kind == PoolKind::kMax ? c.outputs[1].ptr<int64_t>() : nullptr;
  launch_pool_forward(Kind, pool_geometry(x.shape, y.shape, c.attrs), x.dtype, x.data, y.data, indices, e);
}

// inputs: grad_y (N, C, Ho, Wo) [, indices int64 (N, C, Ho, Wo)]; outputs: grad_x (N, C, H, W).
template <PoolKind Kind>
void pool_backward_kernel(const KernelContext& c) {
  const TensorArg &gy = c.inputs[0], &gx = c.outputs[0];
  check_floating(gy.dtype, c);
  const Exec e = exec_for(c.device);
  const int64_t* indices = Kind == PoolKind::kMax ? c.inputs[1].ptr<int64_t>() : nullptr;
  launch_pool_backward(Kind, pool_geometry(gx.shape, gy.shape, c.attrs), gy.dtype, gy.data, indices, gx.data, e);
}

}  // namespace

void register_conv_kernels() {
  set_cuda_kernel("conv2d", conv2d_kernel, /*emulatable=*/false);
  set_cuda_kernel("conv2d_input_grad", conv2d_input_grad_kernel, /*emulatable=*/false);
  set_cuda_kernel("conv2d_weight_grad", conv2d_weight_grad_kernel, /*emulatable=*/false);
  set_cuda_kernel("conv_transpose2d", conv_transpose2d_kernel, /*emulatable=*/false);
  const auto bind = [](std::string_view name, KernelFn fn) { set_cuda_kernel(name, fn, /*emulatable=*/true); };
  bind("max_pool2d", pool_forward_kernel<PoolKind::kMax>);
  bind("max_pool2d_backward", pool_backward_kernel<PoolKind::kMax>);
  bind("avg_pool2d", pool_forward_kernel<PoolKind::kAvg>);
  bind("avg_pool2d_backward", pool_backward_kernel<PoolKind::kAvg>);
  bind("adaptive_avg_pool2d", pool_forward_kernel<PoolKind::kAdaptiveAvg>);
  bind("adaptive_avg_pool2d_backward", pool_backward_kernel<PoolKind::kAdaptiveAvg>);
}

}  // namespace dtr::cuda
