// float32 GEMM blocks through oneDNN's matmul primitive (cpu/onednn_gemm.h).
//
// One primitive per (transposes, M, N, K, lda, ldb, ldc, alpha, beta), made
// for one thread and cached per process; alpha is its output scale and
// beta a sum post-op, so C = alpha · op(A) · op(B) + beta · C as in BLAS.
// Operands are described in place by their strides: a transposed operand is
// a (rows, cols) matrix with strides (1, ld). Only oneDNN's brgemm
// implementations run (make_primitive says why); their scratchpad, where
// oneDNN packs B, is a per-thread buffer rather than oneDNN's own
// allocation. Not oneDNN's sgemm entry point: it mallocs its packing space
// on every call and glibc keeps it (peak RSS of the zoo's lstm 46 -> 92 MB).
#include "cpu/onednn_gemm.h"

#include "core/options.h"

#if DTR_HAVE_ONEDNN

#include <array>
#include <bit>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string_view>

#include "core/error.h"
#include "cpu/onednn_support.h"

namespace dtr::cpu {
namespace {

using dnnl::memory;
using Dims = memory::dims;

struct Primitive {
  bool ok = false;  // oneDNN made it; else the block runs on OpenBLAS
  dnnl::matmul matmul;
  memory::desc a, b, c;
  size_t scratchpad_bytes = 0;
};

using Key = std::array<int64_t, 10>;

// A (rows, cols) float32 matrix at row stride ld, or its transpose in place.
memory::desc matrix(int64_t rows, int64_t cols, int64_t ld, bool transposed) {
  return memory::desc(Dims{rows, cols}, memory::data_type::f32, transposed ? Dims{1, ld} : Dims{ld, 1});
}

Primitive make_primitive(const Key& k, float alpha, float beta) {
  const onednn::OneOmpThread one;
  const bool ta = k[0] != 0, tb = k[1] != 0;
  const int64_t M = k[2], N = k[3], K = k[4];
  Primitive p;
  try {
    p.a = matrix(M, K, k[5], ta);
    p.b = matrix(K, N, k[6], tb);
    p.c = matrix(M, N, k[7], false);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
    if (beta != 0.0f) {
      dnnl::post_ops sum;
      sum.append_sum(beta);
      attr.set_post_ops(sum);
    }
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(p.a, p.b, p.c), attr, onednn::cpu_engine());
    // brgemm kernels only: oneDNN's other matmul implementations (gemm:jit,
    // which it picks e.g. for a transposed operand with a row stride above
    // its width) call its sgemm, whose packing buffers are malloc'ed on every
    // call, outside the scratchpad. Those blocks stay on OpenBLAS.
    if (std::string_view(pd.impl_info_str()).substr(0, 4) != "brg:") return p;
    p.matmul = dnnl::matmul(pd);
    p.scratchpad_bytes = pd.scratchpad_desc().get_size();
    p.ok = true;
  } catch (const dnnl::error& e) {
    // Only "no implementation" and "cannot describe these strides" are
    // properties of the shape, safe to cache: anything else (memory) must
    // not send this shape to OpenBLAS for the cache's life, or a replay
    // after the next clear could take the other library and give other bits
    // (Note [replay equals original]).
    if (e.status == dnnl_out_of_memory) throw std::bad_alloc();
    if (e.status != dnnl_unimplemented && e.status != dnnl_invalid_arguments)
      throw InternalError(fmt::format("oneDNN could not make a {}x{}x{} matmul primitive: {}", M, N, K, e.what()));
    p.ok = false;
  }
  return p;
}

// Made once per key (oneDNN's JIT takes 0.1-2 ms); at most kCacheEntries,
// after which the cache starts afresh, as the convolutions' does.
constexpr size_t kCacheEntries = 512;

std::shared_ptr<const Primitive> primitive(const Key& key, float alpha, float beta) {
  static std::mutex mu;
  static auto& cache = *new std::map<Key, std::shared_ptr<const Primitive>>();  // never destroyed, as the engine
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
  }
  auto made = std::make_shared<const Primitive>(make_primitive(key, alpha, beta));
  std::lock_guard<std::mutex> lock(mu);
  if (cache.size() >= kCacheEntries) cache.clear();
  return cache.emplace(key, std::move(made)).first->second;
}

Key key_of(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb, int64_t ldc,
           float alpha, float beta) {
  return Key{trans_a ? 1 : 0, trans_b ? 1 : 0, M, N, K, lda, ldb, ldc,
             int64_t(std::bit_cast<uint32_t>(alpha)), int64_t(std::bit_cast<uint32_t>(beta))};
}

}  // namespace

bool onednn_gemm_runs(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb,
                      int64_t ldc) {
  if (!onednn_gemm_enabled() || !onednn_gemm_shape(M, N, K)) return false;
  return primitive(key_of(trans_a, trans_b, M, N, K, lda, ldb, ldc, 1.0f, 0.0f), 1.0f, 0.0f)->ok;
}

bool onednn_gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                 int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (!onednn_gemm_enabled() || alpha == 0.0f || M <= 0 || N <= 0 || K <= 0) return false;
  const std::shared_ptr<const Primitive> p =
      primitive(key_of(trans_a, trans_b, M, N, K, lda, ldb, ldc, alpha, beta), alpha, beta);
  if (!p->ok) return false;
  const onednn::OneOmpThread one;
  dnnl::engine& engine = onednn::cpu_engine();
  onednn::ThreadScratch& ts = onednn::thread_scratch();
  memory a(p->a, engine, const_cast<float*>(A)), b(p->b, engine, const_cast<float*>(B)), c(p->c, engine, C);
  memory pad = p->scratchpad_bytes == 0
                   ? memory(memory::desc(), engine, nullptr)
                   : memory(memory::desc(Dims{int64_t(p->scratchpad_bytes)}, memory::data_type::u8,
                                         memory::format_tag::x),
                            engine, ts.gemm_pad.get(p->scratchpad_bytes));
  p->matmul.execute(ts.stream,
                    {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}, {DNNL_ARG_SCRATCHPAD, pad}});
  ts.stream.wait();
  return true;
}

void set_onednn_gemm_enabled(bool enabled) { global_options().onednn_gemm = enabled; }
bool onednn_gemm_enabled() { return global_options().onednn_gemm && onednn::omp_control().usable; }

}  // namespace dtr::cpu

#else  // !DTR_HAVE_ONEDNN

namespace dtr::cpu {

bool onednn_gemm(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*, int64_t, float,
                 float*, int64_t) {
  return false;
}
bool onednn_gemm_runs(bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t) { return false; }
void set_onednn_gemm_enabled(bool enabled) { global_options().onednn_gemm = enabled; }
bool onednn_gemm_enabled() { return false; }

}  // namespace dtr::cpu

#endif  // DTR_HAVE_ONEDNN
