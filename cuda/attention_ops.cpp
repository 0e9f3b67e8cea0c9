// The CUDA kernels of the fused scaled_dot_product_attention rows and their
// backward (cpu/attention.cpp's scheme): blocks of kBlockRows query rows,
// each block's scores computed by a cuBLAS strided-batched GEMM over a
// chunk of (batch·head) slices into a (slices, rows, keys) scratch, turned
// into probabilities and logsumexp by cuda/attention.cu's kernels, and
// multiplied on by further GEMMs; the (N, L, S) scores never exist whole.
// The forward keeps the output and the per-row logsumexp; the backward
// rebuilds each block's probabilities from them. float16/bfloat16 run in
// float32 copies (and lse is float32), as the CPU runs them. Not
// emulatable (cuBLAS).
//
// Note [determinism]: blocks run in order on the one stream, so dk and dv
// sum the blocks in order; GEMMs follow Note [library determinism].
//
// Verified here: compiles and links; the kernels between the GEMMs are
// written as launch bodies like the emulated ones. Not verified: any run
// (no GPU was at hand).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "cuda/attention.h"
#include "cuda/elementwise.h"
#include "cuda/gemm.h"
#include "cuda/kernel_util.h"
#include "cuda/scratch.h"

namespace dtr::cuda {
namespace {

constexpr int64_t kBlockRows = 64;  // cpu/attention.cpp's
// Score elements a block's scratch holds at most (per buffer): slices are
// chunked so that slices * rows * S stays below it where one slice allows.
constexpr int64_t kScoreElements = int64_t{1} << 24;

bool is_half(DType t) { return t == kFloat16 || t == kBFloat16; }

/// dst (n elements, dtype dd) = src (dtype sd), both contiguous.
void convert(std::byte* dst, DType dd, const std::byte* src, DType sd, int64_t n, const Exec& e) {
  ElementwiseLayout<2> L;
  L.ndim = 1;
  L.numel = n;
  L.sizes[0] = n;
  L.strides[0][0] = itemsize(dd);
  L.strides[1][0] = itemsize(sd);
  L.data[0] = dst;
  L.data[1] = const_cast<std::byte*>(src);
  L.dtype[0] = dd;
  L.dtype[1] = sd;
  launch_convert(L, e);
}

/// float32 copies of the float16/bfloat16 operands (cpu::run_in_float32's
/// staging): inputs converted on the way in, outputs written to a copy and
/// converted back by finish(). Other operands pass through.
class Float32Staging {
 public:
  explicit Float32Staging(const Exec& e) : e_(e) {}
  const std::byte* in(const TensorArg& t) {
    if (!is_half(t.dtype)) return t.data;
    std::byte* p = keep(t.numel());
    convert(p, kFloat32, t.data, t.dtype, t.numel(), e_);
    return p;
  }
  std::byte* out(const TensorArg& t) {
    if (!is_half(t.dtype)) return t.data;
    std::byte* p = keep(t.numel());
    outs_.push_back({&t, p});
    return p;
  }
  void finish() {
    for (const auto& [t, p] : outs_) convert(t->data, t->dtype, p, kFloat32, t->numel(), e_);
  }

 private:
  std::byte* keep(int64_t n) {
    buffers_.push_back(std::make_unique<Scratch>(e_, size_t(n) * sizeof(float)));
    return buffers_.back()->data();
  }
  Exec e_;
  std::vector<std::unique_ptr<Scratch>> buffers_;
  std::vector<std::pair<const TensorArg*, std::byte*>> outs_;
};

/// What both directions read off q (N, L, E), k (N, S, E), v (N, S, Ev) and
/// the attrs: sizes, scale, is_causal, the compute type and its size.
struct Problem {
  int64_t N, L, E, S, Ev;
  double scale;
  bool causal;
  DType T;
  int64_t tsz;
  int dev;
};
Problem problem_of(const KernelContext& c, const TensorArg& q, const TensorArg& k, const TensorArg& v) {
  check_floating(q.dtype, c);
  const DType T = q.dtype == kFloat64 ? kFloat64 : kFloat32;
  return Problem{q.shape[0], q.shape[1], q.shape[2], k.shape[1], v.shape[2], c.attrs.f("scale"),
                 c.attrs.b("is_causal"), T, itemsize(T), c.device.index};
}

int64_t visible(bool causal, int64_t i, int64_t S) { return causal ? std::min(S, i + 1) : S; }

int64_t slices_per_chunk(int64_t N, int64_t L, int64_t S) {
  const int64_t per_slice = std::max<int64_t>(std::min(kBlockRows, L) * S, 1);
  return std::clamp<int64_t>(kScoreElements / per_slice, 1, std::max<int64_t>(N, 1));
}

// (N, L, E) q, (N, S, E) k, (N, S, Ev) v → out (N, L, Ev), lse (N, L).
// attrs: scale, is_causal.
void attention_kernel(const KernelContext& c) {
  const TensorArg &q = c.inputs[0], &k = c.inputs[1], &v = c.inputs[2];
  const auto [N, L, E, S, Ev, scale, causal, T, tsz, dev] = problem_of(c, q, k, v);
  if (N == 0 || L == 0) return;
  const Exec e = exec_for(c.device);
  Float32Staging st(e);
  const std::byte* Q = st.in(q);
  const std::byte* K = st.in(k);
  const std::byte* V = st.in(v);
  std::byte* O = st.out(c.outputs[0]);
  std::byte* lse = c.outputs[1].data;  // float32 or float64: the compute type
  const int64_t chunk = slices_per_chunk(N, L, S);
  const Scratch scores(e, size_t(chunk * std::min(kBlockRows, L) * S * tsz));
  std::byte* sc = scores.data();
  for (int64_t n0 = 0; n0 < N; n0 += chunk) {
    const int64_t nb = std::min(chunk, N - n0);
    for (int64_t i0 = 0; i0 < L; i0 += kBlockRows) {
      const int64_t rows = std::min(kBlockRows, L - i0);
      const AttentionBlock blk{nb, rows, visible(causal, i0 + rows - 1, S), i0, S, L, causal};
      const int64_t keys = blk.keys;
      // s (rows, keys) = scale q[i0:i0 + rows] k[:keys]^T per slice.
      gemm_rm(dev, T, false, true, rows, keys, E, scale, Q + (n0 * L + i0) * E * tsz, E, L * E,
              K + n0 * S * E * tsz, E, S * E, 0.0, sc, keys, rows * keys, nb);
      launch_attention_softmax(blk, T, sc, lse + (n0 * L + i0) * tsz, e);
      // out[i0:i0 + rows] (rows, Ev) = p (rows, keys) v[:keys].
      gemm_rm(dev, T, false, false, rows, Ev, keys, 1.0, sc, keys, rows * keys, V + n0 * S * Ev * tsz, Ev, S * Ev,
              0.0, O + (n0 * L + i0) * Ev * tsz, Ev, L * Ev, nb);
    }
  }
  st.finish();
}

// (g_out (N, L, Ev), [g_lse (N, L)], q, k, v, out, lse) → dq, dk, dv; attrs
// as the forward plus has_grad_lse. With P = exp(scale q k^T - lse) (masked:
// 0), D_i = sum_e g_out[i, e] out[i, e]:
//   dv = P^T g_out,  dP = g_out v^T,  dS = P (dP - D + g_lse),
//   dq = scale dS k,  dk = scale dS^T q.
void attention_backward_kernel(const KernelContext& c) {
  const bool has_glse = c.attrs.b("has_grad_lse");
  const size_t base = has_glse ? 2 : 1;
  const TensorArg& g = c.inputs[0];
  const TensorArg &q = c.inputs[base], &k = c.inputs[base + 1], &v = c.inputs[base + 2];
  const TensorArg &o = c.inputs[base + 3], &lse_in = c.inputs[base + 4];
  const auto [N, L, E, S, Ev, scale, causal, T, tsz, dev] = problem_of(c, q, k, v);
  const Exec e = exec_for(c.device);
  Float32Staging st(e);
  const std::byte* G = st.in(g);
  const std::byte* Q = st.in(q);
  const std::byte* K = st.in(k);
  const std::byte* V = st.in(v);
  const std::byte* O = st.in(o);
  const std::byte* lse = lse_in.data;
  const std::byte* glse = has_glse ? c.inputs[1].data : nullptr;
  std::byte* dQ = st.out(c.outputs[0]);
  std::byte* dK = st.out(c.outputs[1]);
  std::byte* dV = st.out(c.outputs[2]);
  // dk and dv sum over the blocks: zeroed first; every dq row is written once.
  if (N * S * E > 0) DTR_CUDA_CHECK(cudaMemsetAsync(dK, 0, size_t(N * S * E * tsz), cudaStreamLegacy));
  if (N * S * Ev > 0) DTR_CUDA_CHECK(cudaMemsetAsync(dV, 0, size_t(N * S * Ev * tsz), cudaStreamLegacy));
  if (N > 0 && L > 0) {
    const int64_t chunk = slices_per_chunk(N, L, S);
    const int64_t block = chunk * std::min(kBlockRows, L);
    const Scratch p_buf(e, size_t(block * S * tsz)), dp_buf(e, size_t(block * S * tsz)),
        shift_buf(e, size_t(block * tsz));
    std::byte* P = p_buf.data();
    std::byte* DP = dp_buf.data();
    std::byte* shift = shift_buf.data();
    for (int64_t n0 = 0; n0 < N; n0 += chunk) {
      const int64_t nb = std::min(chunk, N - n0);
      const std::byte* Kn = K + n0 * S * E * tsz;
      const std::byte* Vn = V + n0 * S * Ev * tsz;
      std::byte* dKn = dK + n0 * S * E * tsz;
      std::byte* dVn = dV + n0 * S * Ev * tsz;
      for (int64_t i0 = 0; i0 < L; i0 += kBlockRows) {
        const int64_t rows = std::min(kBlockRows, L - i0);
        const AttentionBlock blk{nb, rows, visible(causal, i0 + rows - 1, S), i0, S, L, causal};
        const int64_t keys = blk.keys, rk = rows * keys;
        const std::byte* Qb = Q + (n0 * L + i0) * E * tsz;
        const std::byte* Gb = G + (n0 * L + i0) * Ev * tsz;
        const std::byte* Ob = O + (n0 * L + i0) * Ev * tsz;
        gemm_rm(dev, T, false, true, rows, keys, E, scale, Qb, E, L * E, Kn, E, S * E, 0.0, P, keys, rk, nb);
        launch_attention_probs(blk, T, P, lse + (n0 * L + i0) * tsz, e);
        // dv[:keys] += P^T g_out[block]
        gemm_rm(dev, T, true, false, keys, Ev, rows, 1.0, P, keys, rk, Gb, Ev, L * Ev, 1.0, dVn, Ev, S * Ev, nb);
        // dP = g_out[block] v[:keys]^T
        gemm_rm(dev, T, false, true, rows, keys, Ev, 1.0, Gb, Ev, L * Ev, Vn, Ev, S * Ev, 0.0, DP, keys, rk, nb);
        launch_attention_row_shift(blk, T, Gb, Ob, glse != nullptr ? glse + (n0 * L + i0) * tsz : nullptr, Ev, shift,
                                   e);
        launch_attention_score_grad(blk, T, P, DP, shift, e);
        // dq[block] = scale dS k[:keys];  dk[:keys] += scale dS^T q[block]
        gemm_rm(dev, T, false, false, rows, E, keys, scale, DP, keys, rk, Kn, E, S * E, 0.0,
                dQ + (n0 * L + i0) * E * tsz, E, L * E, nb);
        gemm_rm(dev, T, true, false, keys, E, rows, scale, DP, keys, rk, Qb, E, L * E, 1.0, dKn, E, S * E, nb);
      }
    }
  }
  st.finish();
}

}  // namespace

void register_attention_kernels() {
  set_cuda_kernel("scaled_dot_product_attention", attention_kernel, /*emulatable=*/false);
  set_cuda_kernel("scaled_dot_product_attention_backward", attention_backward_kernel, /*emulatable=*/false);
}

}  // namespace dtr::cuda
