// Launchers of the fused attention's own kernels (cuda/attention.cu), run
// between the cuBLAS GEMMs of cuda/attention_ops.cpp on one block of query
// rows [i0, i0 + rows) of `nb` (batch·head) slices at a time. `dt` is
// float32 or float64 (float16/bfloat16 run in float32 copies, as on the
// CPU). Row r of a block sees keys j < seen(r): S, or under is_causal
// min(S, i0 + r + 1) (top-left aligned, as PyTorch); a block's score rows
// are `keys` long, seen(rows - 1) (cpu/attention.cpp's scheme).
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/exec.h"

namespace dtr::cuda {

/// The block's geometry: rows of queries from i0, score rows of `keys`, S
/// keys in all, L queries per slice (the stride of lse between slices).
struct AttentionBlock {
  int64_t nb = 0, rows = 0, keys = 0, i0 = 0, S = 0, L = 0;
  bool causal = false;
};

/// Softmax of each score row of s (nb, rows, keys) in place over its seen
/// keys (0 beyond), and lse[b * L + r] = max + log(sum of exp) (lse points
/// at the block's first row of its first slice). One index per row, keys
/// in order, the sum in double (as the CPU).
void launch_attention_softmax(const AttentionBlock& blk, DType dt, std::byte* s, std::byte* lse, const Exec& e);

/// p (nb, rows, keys) = exp(p - lse[b * L + r]) over the seen keys, 0 beyond.
void launch_attention_probs(const AttentionBlock& blk, DType dt, std::byte* p, const std::byte* lse, const Exec& e);

/// shift[b * rows + r] = sum_e g[b, r, e] o[b, r, e] (in double, e in
/// order) - g_lse[b * L + r] (g_lse may be null: 0), g and o of row stride
/// Ev and slice stride L * Ev, pointing at the block's first row.
void launch_attention_row_shift(const AttentionBlock& blk, DType dt, const std::byte* g, const std::byte* o,
                                const std::byte* glse, int64_t Ev, std::byte* shift, const Exec& e);

/// dp (nb, rows, keys) = p * (dp - shift[row]).
void launch_attention_score_grad(const AttentionBlock& blk, DType dt, const std::byte* p, std::byte* dp,
                                 const std::byte* shift, const Exec& e);

}  // namespace dtr::cuda
