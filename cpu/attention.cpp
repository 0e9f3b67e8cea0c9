// Fused scaled-dot-product attention (the scaled_dot_product_attention rows
// of eager/ops/attention.cpp): forward and backward in blocks of query rows,
// so the (N, L, S) scores and probabilities never exist as tensors. Per
// block of kBlockRows queries the scores live in a (rows, S) scratch; the
// forward keeps only the output and the per-row logsumexp, and the backward
// rebuilds each block's probabilities from them (FlashAttention, Dao et al.
// 2022, Algorithm 1 and 2, with the whole key range of a block at once: on
// a CPU a (64, S) block fits in cache for the sequence lengths of interest).
//
// Note [determinism]: one (batch·head) slice per task, query blocks in
// order within it, so dK and dV sum the blocks in the same order for every
// thread count; GEMMs are cpu::gemm's (fixed blocking).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/element.h"
#include "core/parallel.h"
#include "cpu/kernels.h"
#include "cpu/linalg.h"

namespace dtr::cpu {
namespace {

constexpr int64_t kBlockRows = 64;

// Keys a query row sees: all S, or under is_causal (top-left aligned, as
// PyTorch) keys j <= i.
inline int64_t visible_keys(bool causal, int64_t i, int64_t S) { return causal ? std::min(S, i + 1) : S; }

// (N, L, E) q, (N, S, E) k, (N, S, Ev) v → out (N, L, Ev), lse (N, L).
// attrs: scale (double), is_causal (bool).
template <typename T>
void attention_forward(const KernelContext& c) {
  const TensorArg &q = c.inputs[0], &k = c.inputs[1], &v = c.inputs[2];
  const int64_t N = q.shape[0], L = q.shape[1], E = q.shape[2], S = k.shape[1], Ev = v.shape[2];
  const T scale = T(c.attrs.f("scale"));
  const bool causal = c.attrs.b("is_causal");
  const T* qp = q.ptr<T>();
  const T* kp = k.ptr<T>();
  const T* vp = v.ptr<T>();
  T* out = c.outputs[0].ptr<T>();
  T* lse = c.outputs[1].ptr<T>();
  parallel_for(N, 1, [&](int64_t n0, int64_t n1) {
    std::vector<T> scores(size_t(std::min(kBlockRows, L) * S));
    for (int64_t n = n0; n < n1; ++n) {
      const T* qn = qp + n * L * E;
      const T* kn = kp + n * S * E;
      const T* vn = vp + n * S * Ev;
      for (int64_t i0 = 0; i0 < L; i0 += kBlockRows) {
        const int64_t rows = std::min(kBlockRows, L - i0);
        const int64_t keys = visible_keys(causal, i0 + rows - 1, S);
        T* sc = scores.data();
        gemm(false, true, rows, keys, E, scale, qn + i0 * E, E, kn, E, T(0), sc, keys);
        for (int64_t r = 0; r < rows; ++r) {
          T* row = sc + r * keys;
          const int64_t seen = visible_keys(causal, i0 + r, S);
          T mx = -std::numeric_limits<T>::infinity();
          for (int64_t j = 0; j < seen; ++j) mx = std::max(mx, row[j]);
          double sum = 0;
          for (int64_t j = 0; j < seen; ++j) {
            row[j] = std::exp(row[j] - mx);
            sum += double(row[j]);
          }
          const T inv = T(1.0 / sum);
          for (int64_t j = 0; j < seen; ++j) row[j] *= inv;
          std::fill(row + seen, row + keys, T(0));
          lse[n * L + i0 + r] = T(double(mx) + std::log(sum));
        }
        gemm(false, false, rows, Ev, keys, T(1), sc, keys, vn, Ev, T(0), out + (n * L + i0) * Ev, Ev);
      }
    }
  });
}

// (g_out (N, L, Ev), [g_lse (N, L)], q, k, v, out, lse) → dq, dk, dv; attrs as
// the forward plus has_grad_lse. With P = exp(scale q kᵀ − lse) (masked: 0),
// D_i = Σ_e g_out[i, e] out[i, e]:
//   dv = Pᵀ g_out,  dP = g_out vᵀ,  dS = P ⊙ (dP − D + g_lse),
//   dq = scale dS k,  dk = scale dSᵀ q.
template <typename T>
void attention_backward(const KernelContext& c) {
  const bool has_glse = c.attrs.b("has_grad_lse");
  const size_t base = has_glse ? 2 : 1;
  const TensorArg& g = c.inputs[0];
  const TensorArg &q = c.inputs[base], &k = c.inputs[base + 1], &v = c.inputs[base + 2];
  const TensorArg &o = c.inputs[base + 3], &lse_in = c.inputs[base + 4];
  const int64_t N = q.shape[0], L = q.shape[1], E = q.shape[2], S = k.shape[1], Ev = v.shape[2];
  const T scale = T(c.attrs.f("scale"));
  const bool causal = c.attrs.b("is_causal");
  const T* gp = g.ptr<T>();
  const T* glse = has_glse ? c.inputs[1].ptr<T>() : nullptr;
  const T* qp = q.ptr<T>();
  const T* kp = k.ptr<T>();
  const T* vp = v.ptr<T>();
  const T* op = o.ptr<T>();
  const T* lp = lse_in.ptr<T>();
  T* dq = c.outputs[0].ptr<T>();
  T* dk = c.outputs[1].ptr<T>();
  T* dv = c.outputs[2].ptr<T>();
  parallel_for(N, 1, [&](int64_t n0, int64_t n1) {
    const size_t block = size_t(std::min(kBlockRows, L) * S);
    std::vector<T> p(block), dp(block);
    for (int64_t n = n0; n < n1; ++n) {
      const T* qn = qp + n * L * E;
      const T* kn = kp + n * S * E;
      const T* vn = vp + n * S * Ev;
      const T* gn = gp + n * L * Ev;
      const T* on = op + n * L * Ev;
      T* dkn = dk + n * S * E;
      T* dvn = dv + n * S * Ev;
      std::fill(dkn, dkn + S * E, T(0));
      std::fill(dvn, dvn + S * Ev, T(0));
      for (int64_t i0 = 0; i0 < L; i0 += kBlockRows) {
        const int64_t rows = std::min(kBlockRows, L - i0);
        const int64_t keys = visible_keys(causal, i0 + rows - 1, S);
        T* pb = p.data();
        T* dpb = dp.data();
        gemm(false, true, rows, keys, E, scale, qn + i0 * E, E, kn, E, T(0), pb, keys);
        for (int64_t r = 0; r < rows; ++r) {
          T* row = pb + r * keys;
          const int64_t seen = visible_keys(causal, i0 + r, S);
          const T shift = lp[n * L + i0 + r];
          for (int64_t j = 0; j < seen; ++j) row[j] = std::exp(row[j] - shift);
          std::fill(row + seen, row + keys, T(0));
        }
        // dv[0:keys] += Pᵀ g_out[block]
        gemm(true, false, keys, Ev, rows, T(1), pb, keys, gn + i0 * Ev, Ev, T(1), dvn, Ev);
        // dP = g_out[block] vᵀ
        gemm(false, true, rows, keys, Ev, T(1), gn + i0 * Ev, Ev, vn, Ev, T(0), dpb, keys);
        for (int64_t r = 0; r < rows; ++r) {
          const T* gr = gn + (i0 + r) * Ev;
          const T* orow = on + (i0 + r) * Ev;
          double d = 0;
          for (int64_t e = 0; e < Ev; ++e) d += double(gr[e]) * double(orow[e]);
          const T shift = T(d) - (glse != nullptr ? glse[n * L + i0 + r] : T(0));
          T* dsr = dpb + r * keys;
          const T* pr = pb + r * keys;
          for (int64_t j = 0; j < keys; ++j) dsr[j] = pr[j] * (dsr[j] - shift);
        }
        gemm(false, false, rows, E, keys, scale, dpb, keys, kn, E, T(0), dq + (n * L + i0) * E, E);
        gemm(true, false, keys, E, rows, scale, dpb, keys, qn + i0 * E, E, T(1), dkn, E);
      }
    }
  });
}

void attention_kernel(const KernelContext& c) {
  if (has_half_operand(c)) return run_in_float32(c, attention_kernel);
  if (c.inputs[0].dtype == kFloat64) return attention_forward<double>(c);
  DTR_CHECK(c.inputs[0].dtype == kFloat32, TypeError, "scaled_dot_product_attention: unsupported dtype {}",
            dtype_name(c.inputs[0].dtype));
  attention_forward<float>(c);
}

void attention_backward_kernel(const KernelContext& c) {
  if (has_half_operand(c)) return run_in_float32(c, attention_backward_kernel);
  if (c.inputs[0].dtype == kFloat64) return attention_backward<double>(c);
  DTR_CHECK(c.inputs[0].dtype == kFloat32, TypeError,
            "scaled_dot_product_attention_backward: unsupported dtype {}", dtype_name(c.inputs[0].dtype));
  attention_backward<float>(c);
}

}  // namespace

void register_attention_kernels() {
  set_cpu_kernel("scaled_dot_product_attention", attention_kernel);
  set_cpu_kernel("scaled_dot_product_attention_backward", attention_backward_kernel);
}

}  // namespace dtr::cpu
