// The fused attention's own kernels (cuda/attention.h): softmax with
// logsumexp over a block's score rows, the probabilities rebuilt from the
// saved logsumexp, and the score gradient. Each index writes its own row or
// element; every sum runs in a fixed order.
#include <cmath>
#include <limits>

#include "cuda/attention.h"
#include "cuda/launch.cuh"

namespace dtr::cuda {
namespace {

DTR_HD int64_t seen_keys(const AttentionBlock& b, int64_t r) {
  if (!b.causal) return b.S;
  const int64_t i = b.i0 + r + 1;
  return i < b.S ? i : b.S;
}

template <typename T>
DTR_HD T t_exp(T x) {
  if constexpr (sizeof(T) == sizeof(float)) return expf(x);
  else return exp(x);
}

template <typename T>
struct Softmax {
  AttentionBlock b;
  T* s;
  T* lse;
  DTR_HD void operator()(int64_t i) const {
    const int64_t n = i / b.rows, r = i % b.rows;
    T* row = s + i * b.keys;
    const int64_t seen = seen_keys(b, r);
    T mx = -std::numeric_limits<T>::infinity();
    for (int64_t j = 0; j < seen; ++j) mx = row[j] > mx ? row[j] : mx;
    double sum = 0;
    for (int64_t j = 0; j < seen; ++j) {
      row[j] = t_exp(row[j] - mx);
      sum += double(row[j]);
    }
    const T inv = T(1.0 / sum);
    for (int64_t j = 0; j < seen; ++j) row[j] *= inv;
    for (int64_t j = seen; j < b.keys; ++j) row[j] = T(0);
    lse[n * b.L + r] = T(double(mx) + log(sum));
  }
};

template <typename T>
struct Probs {
  AttentionBlock b;
  T* p;
  const T* lse;
  DTR_HD void operator()(int64_t i) const {
    const int64_t row = i / b.keys, j = i % b.keys;
    const int64_t n = row / b.rows, r = row % b.rows;
    p[i] = j < seen_keys(b, r) ? t_exp(p[i] - lse[n * b.L + r]) : T(0);
  }
};

template <typename T>
struct RowShift {
  AttentionBlock b;
  const T* g;
  const T* o;
  const T* glse;
  int64_t Ev;
  T* shift;
  DTR_HD void operator()(int64_t i) const {
    const int64_t n = i / b.rows, r = i % b.rows;
    const T* gr = g + (n * b.L + r) * Ev;
    const T* orow = o + (n * b.L + r) * Ev;
    double d = 0;
    for (int64_t e = 0; e < Ev; ++e) d += double(gr[e]) * double(orow[e]);
    shift[i] = T(d) - (glse != nullptr ? glse[n * b.L + r] : T(0));
  }
};

template <typename T>
struct ScoreGrad {
  int64_t keys;
  const T* p;
  T* dp;
  const T* shift;
  DTR_HD void operator()(int64_t i) const { dp[i] = p[i] * (dp[i] - shift[i / keys]); }
};

template <typename T>
T* as(std::byte* p) {
  return reinterpret_cast<T*>(p);
}
template <typename T>
const T* as(const std::byte* p) {
  return reinterpret_cast<const T*>(p);
}

}  // namespace

void launch_attention_softmax(const AttentionBlock& blk, DType dt, std::byte* s, std::byte* lse, const Exec& e) {
  const int64_t n = blk.nb * blk.rows;
  if (dt == DType::kFloat64) launch(e, n, Softmax<double>{blk, as<double>(s), as<double>(lse)}, "attention_softmax");
  else launch(e, n, Softmax<float>{blk, as<float>(s), as<float>(lse)}, "attention_softmax");
}

void launch_attention_probs(const AttentionBlock& blk, DType dt, std::byte* p, const std::byte* lse, const Exec& e) {
  const int64_t n = blk.nb * blk.rows * blk.keys;
  if (dt == DType::kFloat64) launch(e, n, Probs<double>{blk, as<double>(p), as<double>(lse)}, "attention_probs");
  else launch(e, n, Probs<float>{blk, as<float>(p), as<float>(lse)}, "attention_probs");
}

void launch_attention_row_shift(const AttentionBlock& blk, DType dt, const std::byte* g, const std::byte* o,
                                const std::byte* glse, int64_t Ev, std::byte* shift, const Exec& e) {
  const int64_t n = blk.nb * blk.rows;
  if (dt == DType::kFloat64)
    launch(e, n, RowShift<double>{blk, as<double>(g), as<double>(o), as<double>(glse), Ev, as<double>(shift)},
           "attention_row_shift");
  else
    launch(e, n, RowShift<float>{blk, as<float>(g), as<float>(o), as<float>(glse), Ev, as<float>(shift)},
           "attention_row_shift");
}

void launch_attention_score_grad(const AttentionBlock& blk, DType dt, const std::byte* p, std::byte* dp,
                                 const std::byte* shift, const Exec& e) {
  const int64_t n = blk.nb * blk.rows * blk.keys;
  if (dt == DType::kFloat64)
    launch(e, n, ScoreGrad<double>{blk.keys, as<double>(p), as<double>(dp), as<double>(shift)}, "attention_score_grad");
  else
    launch(e, n, ScoreGrad<float>{blk.keys, as<float>(p), as<float>(dp), as<float>(shift)}, "attention_score_grad");
}

}  // namespace dtr::cuda
