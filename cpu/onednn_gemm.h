// float32 GEMM through oneDNN's matmul primitive (cpu/onednn_gemm.cpp), an
// opt-in fast path of cpu::gemm for blocks of at least kOnednnGemmMacs
// multiply-adds (Note [determinism] for GEMM in cpu/linalg.h), switched on
// by DTR_ONEDNN_GEMM (off by default: every distinct shape keeps JIT code
// and primitive state outside the budget, about 60 KB each). Built when
// CMake finds oneDNN (Debian: libdnnl-dev); without it onednn_gemm returns
// false and OpenBLAS runs every block.
#pragma once

#include <cstdint>

namespace dtr::cpu {

/// The fewest multiply-adds (M·N·K), and the fewest rows and columns of C,
/// of a float32 block that goes to oneDNN. Measured single-threaded on an
/// AMD EPYC (AVX-512, oneDNN 2.6's brgemm kernels) against OpenBLAS 0.3.21:
/// 0.79-0.94x OpenBLAS's time from 64^3 up to the GPT's (2048, 1024, 256)
/// products in every transpose case, 0.36-0.51x for (512, 512, 4) and
/// (4, 512, 512), but 4.7x for a (1, 256, 1024) row; making a primitive for
/// a new shape costs 0.1-0.4 ms once (2 ms for the first).
inline constexpr int64_t kOnednnGemmMacs = int64_t{1} << 18;
inline constexpr int64_t kOnednnGemmMinDim = 8;

/// Whether a block of this shape goes to oneDNN when it is built in and
/// switched on: a function of the shapes alone, so a replay makes the same
/// call as the first run.
constexpr bool onednn_gemm_shape(int64_t M, int64_t N, int64_t K) {
  return M >= kOnednnGemmMinDim && N >= kOnednnGemmMinDim && K > 0 &&
         double(M) * double(N) * double(K) >= double(kOnednnGemmMacs);
}

/// C (M, N) = alpha · op(A) · op(B) + beta · C, row-major float32 with row
/// strides lda, ldb, ldc (elements), op(X) = Xᵀ when trans_x, as one oneDNN
/// matmul on the calling thread with one OpenMP thread (BLAS semantics: C is
/// not read when beta is 0). The primitive is made once per (transposes,
/// shapes, strides, alpha, beta) and cached per process; its scratchpad is a
/// per-thread buffer, grown and kept (outside the tensor budget, like the
/// im2col columns). Returns false having written nothing when oneDNN is not
/// built in, its threading cannot be pinned, the path is switched off,
/// alpha is 0 (BLAS then never reads A and B), or oneDNN has no brgemm
/// kernel for the operands (a CPU without AVX-512, a transposed operand
/// whose row stride exceeds its width); the caller then runs OpenBLAS. Throws std::bad_alloc when the
/// scratchpad cannot be had.
bool onednn_gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                 int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

/// Whether a float32 block of these transposes, shapes and row strides runs
/// on oneDNN (alpha 1, beta 0): the path is on, onednn_gemm_shape admits the
/// shape, and oneDNN has a brgemm kernel for it on this CPU. Makes and caches
/// the primitive.
bool onednn_gemm_runs(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb,
                      int64_t ldc);

/// Switches the oneDNN GEMM on or off for the whole process: sets
/// global_options().onednn_gemm (DTR_ONEDNN_GEMM, off by default). Results
/// change with it: not for use while lineage recorded under the other
/// setting may replay, which this does not check (the GEMM tests switch
/// freely); programs use set_option, which refuses that switch (Note [GEMM
/// switch]).
void set_onednn_gemm_enabled(bool enabled);
/// Whether the oneDNN GEMM is built in, its threading can be pinned, and it
/// is switched on (DTR_ONEDNN_GEMM).
bool onednn_gemm_enabled();

}  // namespace dtr::cpu
