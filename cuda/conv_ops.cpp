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
// Note [cudnn determinism]: cuDNN's heuristics (cudnnGetConvolution*
// Algorithm_v7; never the timed cudnnFind*, so no choice depends on timing)
// list the algorithms for the shape. cuda/conv_algo.h keeps those with
// status success that cuDNN reports deterministic, in cuDNN's order
// (backward data ALGO_0 and backward filter ALGO_0/ALGO_3, documented as
// non-deterministic, are dropped whatever their entry says); they are tried
// in that order, going on to the next when cuDNN answers NOT_SUPPORTED (to
// the workspace query or the call) or the workspace cannot be allocated. A
// NotImplementedError names the op, the shapes, the dtype and what was
// tried when none runs. The algorithm that ran, with its math type, is
// cached per (device, pass, shapes, stride, padding, dilation, groups,
// dtype, math type) for the life of the process: every later call of the
// key, a rematerialization's replay among them, runs it again and gives the
// same bits; a cached algorithm that fails later (its workspace no longer
// fits) raises rather than switch. Which algorithm a key gets can depend on
// the memory free at its first call, so two processes may differ in the
// last bits; calls within one process never do.
// Math: descriptors are CUDNN_FMA_MATH for float32 (true FP32, no TF32, as
// the cuBLAS GEMMs: Note [library determinism]), CUDNN_TENSOR_OP_MATH for
// float16/bfloat16 and CUDNN_DEFAULT_MATH for float64, for the heuristics
// and each call; an entry listed with a math type that allows more than
// that runs under the dtype's. Compute is double for float64 and float
// otherwise. Workspaces come from cudaMallocAsync on the stream
// (cuda/scratch.h).
//
// Every path makes the kernel's device current (exec_for) before its first
// CUDA or cuDNN call.
//
// Verified here: compiles and links; the selection and the cache
// (cuda/conv_algo.h) run in tests/cuda/conv_algo_test.cpp on made-up
// heuristics; the pooling and bias kernels run under host emulation in the
// conformance harness. Not verified: any cuDNN call (no GPU was at hand),
// in particular which algorithms cuDNN 9's heuristics list for float64,
// bfloat16, dilated or grouped shapes, and their math types.
#include <cuda_runtime_api.h>

#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "cuda/conv.h"
#include "cuda/conv_algo.h"
#include "cuda/kernel_util.h"
#include "cuda/libraries.h"
#include "cuda/scratch.h"

namespace dtr::cuda {
namespace {

// ---- cuDNN convolutions -------------------------------------------------------------

// conv_algo.h names cuDNN's enums by value.
static_assert(int(CUDNN_DEFAULT_MATH) == int(ConvMath::kDefault) &&
              int(CUDNN_TENSOR_OP_MATH) == int(ConvMath::kTensorOp) &&
              int(CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION) == int(ConvMath::kTensorOpAllowConversion) &&
              int(CUDNN_FMA_MATH) == int(ConvMath::kFma));
static_assert(CUDNN_STATUS_SUCCESS == 0);
static_assert(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM == 1 && CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING == 5 &&
              CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED == 7 && CUDNN_CONVOLUTION_FWD_ALGO_COUNT == 8);
static_assert(CUDNN_CONVOLUTION_BWD_DATA_ALGO_0 == 0 && CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING == 3 &&
              CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT == 6);
static_assert(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0 == 0 && CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3 == 3 &&
              CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING == 6 && CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT == 7);

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
/// (K, C / groups, kH, kW) to y (N, K, Ho, Wo), destroyed with it, at math
/// type `math`.
class ConvDescriptors {
 public:
  ConvDescriptors(const ConvKey& k, std::string_view op) {
    for (const std::array<int64_t, 4>& s : {k.x, k.w, k.y}) {
      DTR_CHECK(numel(IntList(s)) < (int64_t{1} << 31), NotImplementedError,
                "{}: a tensor of shape {} has 2^31 or more elements, beyond cuDNN's legacy convolutions", op,
                shape_str(IntList(s)));
    }
    const cudnnDataType_t t = cudnn_type(k.dtype);
    DTR_CUDNN_CHECK(cudnnCreateTensorDescriptor(x_.out()));
    DTR_CUDNN_CHECK(cudnnCreateTensorDescriptor(y_.out()));
    DTR_CUDNN_CHECK(cudnnCreateFilterDescriptor(w_.out()));
    DTR_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(conv_.out()));
    DTR_CUDNN_CHECK(cudnnSetTensor4dDescriptor(x(), CUDNN_TENSOR_NCHW, t, dim_of(k.x[0], op), dim_of(k.x[1], op),
                                               dim_of(k.x[2], op), dim_of(k.x[3], op)));
    DTR_CUDNN_CHECK(cudnnSetTensor4dDescriptor(y(), CUDNN_TENSOR_NCHW, t, dim_of(k.y[0], op), dim_of(k.y[1], op),
                                               dim_of(k.y[2], op), dim_of(k.y[3], op)));
    DTR_CUDNN_CHECK(cudnnSetFilter4dDescriptor(w(), t, CUDNN_TENSOR_NCHW, dim_of(k.w[0], op), dim_of(k.w[1], op),
                                               dim_of(k.w[2], op), dim_of(k.w[3], op)));
    // (pad_h, pad_w, stride_h, stride_w, dilation_h, dilation_w)
    DTR_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(
        conv(), dim_of(k.padding[0], op), dim_of(k.padding[1], op), dim_of(k.stride[0], op),
        dim_of(k.stride[1], op), dim_of(k.dilation[0], op), dim_of(k.dilation[1], op), CUDNN_CROSS_CORRELATION,
        k.dtype == kFloat64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT));
    DTR_CUDNN_CHECK(cudnnSetConvolutionGroupCount(conv(), dim_of(k.groups, op)));
    set_math(k.math);
  }

  void set_math(ConvMath m) { DTR_CUDNN_CHECK(cudnnSetConvolutionMathType(conv(), cudnnMathType_t(m))); }

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

/// The device pointers of the forward's operands x, w, y.
struct Operands {
  void *x, *w, *y;
};

/// One pass's cuDNN entry points: the heuristics, the workspace query and
/// the call, which overwrites the pass's output (beta = 0).
struct ForwardApi {
  using Perf = cudnnConvolutionFwdAlgoPerf_t;
  using Algo = cudnnConvolutionFwdAlgo_t;
  static constexpr const char* kRun = "cudnnConvolutionForward";
  static cudnnStatus_t max_count(cudnnHandle_t h, int* n) { return cudnnGetConvolutionForwardAlgorithmMaxCount(h, n); }
  static cudnnStatus_t heuristics(cudnnHandle_t h, const ConvDescriptors& d, int n, int* got, Perf* p) {
    return cudnnGetConvolutionForwardAlgorithm_v7(h, d.x(), d.w(), d.conv(), d.y(), n, got, p);
  }
  static cudnnStatus_t workspace(cudnnHandle_t h, const ConvDescriptors& d, Algo a, size_t* bytes) {
    return cudnnGetConvolutionForwardWorkspaceSize(h, d.x(), d.w(), d.conv(), d.y(), a, bytes);
  }
  static cudnnStatus_t run(cudnnHandle_t h, const ConvDescriptors& d, Algo a, void* ws, size_t bytes,
                           const Operands& o, DType dt) {
    return cudnnConvolutionForward(h, kOne.of(dt), d.x(), o.x, d.w(), o.w, d.conv(), a, ws, bytes, kZero.of(dt),
                                   d.y(), o.y);
  }
};

struct BackwardDataApi {
  using Perf = cudnnConvolutionBwdDataAlgoPerf_t;
  using Algo = cudnnConvolutionBwdDataAlgo_t;
  static constexpr const char* kRun = "cudnnConvolutionBackwardData";
  static cudnnStatus_t max_count(cudnnHandle_t h, int* n) {
    return cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, n);
  }
  static cudnnStatus_t heuristics(cudnnHandle_t h, const ConvDescriptors& d, int n, int* got, Perf* p) {
    return cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d.w(), d.y(), d.conv(), d.x(), n, got, p);
  }
  static cudnnStatus_t workspace(cudnnHandle_t h, const ConvDescriptors& d, Algo a, size_t* bytes) {
    return cudnnGetConvolutionBackwardDataWorkspaceSize(h, d.w(), d.y(), d.conv(), d.x(), a, bytes);
  }
  static cudnnStatus_t run(cudnnHandle_t h, const ConvDescriptors& d, Algo a, void* ws, size_t bytes,
                           const Operands& o, DType dt) {
    return cudnnConvolutionBackwardData(h, kOne.of(dt), d.w(), o.w, d.y(), o.y, d.conv(), a, ws, bytes,
                                        kZero.of(dt), d.x(), o.x);
  }
};

struct BackwardFilterApi {
  using Perf = cudnnConvolutionBwdFilterAlgoPerf_t;
  using Algo = cudnnConvolutionBwdFilterAlgo_t;
  static constexpr const char* kRun = "cudnnConvolutionBackwardFilter";
  static cudnnStatus_t max_count(cudnnHandle_t h, int* n) {
    return cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(h, n);
  }
  static cudnnStatus_t heuristics(cudnnHandle_t h, const ConvDescriptors& d, int n, int* got, Perf* p) {
    return cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d.x(), d.y(), d.conv(), d.w(), n, got, p);
  }
  static cudnnStatus_t workspace(cudnnHandle_t h, const ConvDescriptors& d, Algo a, size_t* bytes) {
    return cudnnGetConvolutionBackwardFilterWorkspaceSize(h, d.x(), d.y(), d.conv(), d.w(), a, bytes);
  }
  static cudnnStatus_t run(cudnnHandle_t h, const ConvDescriptors& d, Algo a, void* ws, size_t bytes,
                           const Operands& o, DType dt) {
    return cudnnConvolutionBackwardFilter(h, kOne.of(dt), d.x(), o.x, d.y(), o.y, d.conv(), a, ws, bytes,
                                          kZero.of(dt), d.w(), o.w);
  }
};

// cuDNN 9 refines NOT_SUPPORTED into codes 3001... (shape, data type, ...).
bool not_supported(cudnnStatus_t rc) { return CUDNN_STATUS_CATEGORY(rc) == CUDNN_STATUS_NOT_SUPPORTED; }

/// How one try of an algorithm went: it ran, cuDNN refused it
/// (NOT_SUPPORTED), or its workspace could not be allocated; `why` says
/// which for the last two.
struct Tried {
  enum Outcome : uint8_t { kRan, kRefused, kNoWorkspace } outcome = kRan;
  std::string why;
};

/// Runs `choice` once; failures other than the two of Tried throw.
template <typename Api>
Tried try_run(ConvChoice choice, const Exec& e, cudnnHandle_t h, ConvDescriptors& d, const Operands& o, DType dt) {
  const auto algo = typename Api::Algo(choice.algo);
  d.set_math(choice.math);
  size_t bytes = 0;
  cudnnStatus_t rc = Api::workspace(h, d, algo, &bytes);
  if (not_supported(rc)) return {Tried::kRefused, fmt::format("workspace query: {}", cudnnGetErrorString(rc))};
  check_cudnn(rc, "cudnnGetConvolution*WorkspaceSize");
  std::optional<Scratch> ws;
  try {
    ws.emplace(e, bytes);
  } catch (const OutOfMemoryError&) {
    return {Tried::kNoWorkspace, fmt::format("no memory for its workspace of {} bytes", bytes)};
  }
  rc = Api::run(h, d, algo, ws->data(), bytes, o, dt);
  if (not_supported(rc)) return {Tried::kRefused, fmt::format("{}: {}", Api::kRun, cudnnGetErrorString(rc))};
  check_cudnn(rc, Api::kRun);
  return {};
}

/// The deterministic algorithms cuDNN's heuristics list for the
/// convolution, in the order to try (conv_algo.h).
template <typename Api>
std::vector<ConvChoice> candidates(ConvPass pass, cudnnHandle_t h, const ConvDescriptors& d, const ConvKey& k,
                                   const std::string& what) {
  int n = 0;
  DTR_CUDNN_CHECK(Api::max_count(h, &n));
  std::vector<typename Api::Perf> perf(size_t(std::max(n, 1)));
  int got = 0;
  const cudnnStatus_t rc = Api::heuristics(h, d, int(perf.size()), &got, perf.data());
  if (not_supported(rc)) got = 0;  // no algorithm for the shape: conv_algo_order says so
  else check_cudnn(rc, "cudnnGetConvolution*Algorithm_v7");
  std::vector<ConvCandidate> listed;
  for (int i = 0; i < std::min(got, int(perf.size())); ++i) {
    const typename Api::Perf& p = perf[size_t(i)];
    listed.push_back({.algo = int(p.algo),
                      .status = int(p.status),
                      .deterministic = p.determinism == CUDNN_DETERMINISTIC,
                      .math = ConvMath(p.mathType),
                      .workspace = p.memory});
  }
  return conv_algo_order(pass, listed, k.math, what);
}

/// The convolution of key `k` on operands `o`: the key's cached algorithm,
/// or on its first call the first of cuDNN's deterministic ones that runs
/// (Note [cudnn determinism]).
template <typename Api>
void run_pass(const ConvKey& k, const Exec& e, cudnnHandle_t h, const Operands& o, std::string_view op) {
  ConvDescriptors d(k, op);
  const std::string what = fmt::format("{} ({})", op, conv_key_str(k));
  bool chose = false;
  const ConvChoice c = conv_algo_cache().find_or_choose(
      k,
      [&] {
        std::vector<std::string> tried;
        for (const ConvChoice choice : candidates<Api>(k.pass, h, d, k, what)) {
          const Tried t = try_run<Api>(choice, e, h, d, o, k.dtype);
          if (t.outcome == Tried::kRan) return choice;
          tried.push_back(fmt::format("{} with {} math ({})", conv_algo_name(k.pass, choice.algo),
                                      conv_math_name(choice.math), t.why));
        }
        throw NotImplementedError(fmt::format("{}: none of cuDNN's deterministic algorithms ran; tried {}", what,
                                              fmt::join(tried, "; ")));
      },
      &chose);
  if (chose) return;  // the search ran it
  // The key's algorithm, and no other: a replay must give the original's bits.
  const Tried t = try_run<Api>(c, e, h, d, o, k.dtype);
  if (t.outcome == Tried::kRan) return;
  std::string msg = fmt::format("{}: its algorithm {} with {} math, chosen at its first call, failed now: {}", what,
                                conv_algo_name(k.pass, c.algo), conv_math_name(c.math), t.why);
  if (t.outcome == Tried::kNoWorkspace) throw OutOfMemoryError(std::move(msg));
  throw NotImplementedError(std::move(msg));
}

std::array<int64_t, 4> four(IntList s) { return {s[0], s[1], s[2], s[3]}; }
std::array<int64_t, 2> two(IntList s) { return {s[0], s[1]}; }

/// One cuDNN convolution call of `pass` over the forward's operands x, w, y,
/// the written one overwritten, on the device `e` was made for.
void run_conv(ConvPass pass, const KernelContext& c, const Exec& e, const TensorArg& x, const TensorArg& w,
              const TensorArg& y, std::string_view op) {
  const Attrs& a = c.attrs;
  const ConvKey k{.device = c.device.index,
                  .pass = pass,
                  .x = four(x.shape),
                  .w = four(w.shape),
                  .y = four(y.shape),
                  .stride = two(a.ints("stride")),
                  .padding = two(a.ints("padding")),
                  .dilation = two(a.ints("dilation")),
                  .groups = a.i("groups"),
                  .dtype = x.dtype,
                  .math = conv_math_for(x.dtype)};
  cudnnHandle_t h = cudnn_handle(c.device.index);
  const Operands o{x.data, w.data, y.data};
  switch (pass) {
    case ConvPass::kForward: return run_pass<ForwardApi>(k, e, h, o, op);
    case ConvPass::kBackwardData: return run_pass<BackwardDataApi>(k, e, h, o, op);
    case ConvPass::kBackwardFilter: return run_pass<BackwardFilterApi>(k, e, h, o, op);
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
  else run_conv(ConvPass::kForward, c, e, x, w, y, "conv2d");
  add_bias(c, y, e);
}

// inputs: grad_y (N, Cout, Ho, Wo), weight (Cout, Cg, kH, kW); outputs: grad_x (N, C, H, W).
void conv2d_input_grad_kernel(const KernelContext& c) {
  check_conv_dtype(c);
  const TensorArg &gy = c.inputs[0], &w = c.inputs[1], &gx = c.outputs[0];
  if (gx.numel() == 0) return;
  const Exec e = exec_for(c.device);
  if (any_empty({&gy, &w})) return zero(gx, e);
  run_conv(ConvPass::kBackwardData, c, e, gx, w, gy, "conv2d_input_grad");
}

// inputs: grad_y (N, Cout, Ho, Wo), x (N, C, H, W); outputs: grad_w (Cout, Cg, kH, kW).
void conv2d_weight_grad_kernel(const KernelContext& c) {
  check_conv_dtype(c);
  const TensorArg &gy = c.inputs[0], &x = c.inputs[1], &gw = c.outputs[0];
  if (gw.numel() == 0) return;
  const Exec e = exec_for(c.device);
  if (any_empty({&gy, &x})) return zero(gw, e);  // no images: the CPU's zeros
  run_conv(ConvPass::kBackwardFilter, c, e, x, gw, gy, "conv2d_weight_grad");
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
  else run_conv(ConvPass::kBackwardData, c, e, y, w, x, "conv_transpose2d");
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
