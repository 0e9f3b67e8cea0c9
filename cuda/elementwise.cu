// Elementwise CUDA kernels (cuda/elementwise.h): the functors of the CPU's
// unary, binary, copy and creation families as __host__ __device__ code,
// each run over a strided, broadcasting, converting layout by
// map_elements (cuda/launch.cuh).
#include <cmath>
#include <type_traits>

#include "core/integer_math.h"
#include "cuda/elementwise.h"
#include "cuda/launch.cuh"

namespace dtr::cuda {
namespace {

// Integer wrap-around and ipow: core/integer_math.h, shared with the CPU kernels.

template <typename C>
DTR_HD bool is_nan(C x) {
  if constexpr (std::is_floating_point_v<C>) return x != x;
  else return false;
}
template <typename C>
DTR_HD C max_nan(C a, C b) {
  C m = a < b ? b : a;
  m = is_nan(b) ? b : m;
  return is_nan(a) ? a : m;
}
template <typename C>
DTR_HD C min_nan(C a, C b) {
  C m = b < a ? b : a;
  m = is_nan(b) ? b : m;
  return is_nan(a) ? a : m;
}

// Floating math in the compute type (the integer instantiations of the
// floating-only ops are never launched: the wrappers promote first).
template <typename C>
DTR_HD C f_exp(C x) {
  if constexpr (std::is_same_v<C, float>) return expf(x);
  else return C(exp(double(x)));
}
template <typename C>
DTR_HD C f_log(C x) {
  if constexpr (std::is_same_v<C, float>) return logf(x);
  else return C(log(double(x)));
}
template <typename C>
DTR_HD C f_sqrt(C x) {
  if constexpr (std::is_same_v<C, float>) return sqrtf(x);
  else return C(sqrt(double(x)));
}
template <typename C>
DTR_HD C f_tanh(C x) {
  if constexpr (std::is_same_v<C, float>) return tanhf(x);
  else return C(tanh(double(x)));
}
template <typename C>
DTR_HD C f_erf(C x) {
  if constexpr (std::is_same_v<C, float>) return erff(x);
  else return C(erf(double(x)));
}
template <typename C>
DTR_HD C f_sin(C x) {
  if constexpr (std::is_same_v<C, float>) return sinf(x);
  else return C(sin(double(x)));
}
template <typename C>
DTR_HD C f_cos(C x) {
  if constexpr (std::is_same_v<C, float>) return cosf(x);
  else return C(cos(double(x)));
}
template <typename C>
DTR_HD C f_pow(C a, C b) {
  if constexpr (std::is_integral_v<C>) return ipow(a, b);
  else if constexpr (std::is_same_v<C, float>) return powf(a, b);
  else return C(pow(double(a), double(b)));
}

constexpr double kSqrt2 = 1.41421356237309504880;
constexpr double kSqrt1_2 = 0.70710678118654752440;
constexpr double k2SqrtPi = 1.12837916709551257390;  // 2 / sqrt(pi)

// ---- unary --------------------------------------------------------------------------

template <typename C, UnaryOp Op>
struct Unary {
  C lo, hi;
  DTR_HD C operator()(C x) const {
    if constexpr (Op == UnaryOp::kNeg) return negate(x);
    else if constexpr (Op == UnaryOp::kAbs) return x < C(0) ? negate(x) : (std::is_integral_v<C> ? x : (x == C(0) ? C(0) : x));
    else if constexpr (Op == UnaryOp::kRelu) return x < C(0) ? C(0) : x;
    else if constexpr (Op == UnaryOp::kExp) return f_exp(x);
    else if constexpr (Op == UnaryOp::kLog) return f_log(x);
    else if constexpr (Op == UnaryOp::kSqrt) return f_sqrt(x);
    else if constexpr (Op == UnaryOp::kRsqrt) return C(1) / f_sqrt(x);
    else if constexpr (Op == UnaryOp::kTanh) return f_tanh(x);
    else if constexpr (Op == UnaryOp::kSigmoid) return C(1) / (C(1) + f_exp(-x));
    else if constexpr (Op == UnaryOp::kReciprocal) return C(1) / x;
    else if constexpr (Op == UnaryOp::kSilu) return x / (C(1) + f_exp(-x));
    else if constexpr (Op == UnaryOp::kGeluErf) return x * C(0.5) * (C(1) + f_erf(x * C(kSqrt1_2)));
    else if constexpr (Op == UnaryOp::kGeluTanh) {
      const C inner = C(kSqrt2 * k2SqrtPi * 0.5) * (x + C(0.044715) * x * x * x);
      return C(0.5) * x * (C(1) + f_tanh(inner));
    } else if constexpr (Op == UnaryOp::kSin) return f_sin(x);
    else if constexpr (Op == UnaryOp::kCos) return f_cos(x);
    else if constexpr (Op == UnaryOp::kErf) return f_erf(x);
    else if constexpr (Op == UnaryOp::kClampBoth) {
      const C r = x < lo ? lo : x;
      return r > hi ? hi : r;
    } else if constexpr (Op == UnaryOp::kClampMin) return x < lo ? lo : x;
    else return x > hi ? hi : x;  // kClampMax
  }
};

template <typename C, UnaryOp Op>
void unary(const ElementwiseLayout<2>& L, double lo, double hi, const Exec& e) {
  map_elements<C>(e, L, Unary<C, Op>{C(lo), C(hi)}, "unary");
}

template <typename C>
void unary_typed(UnaryOp op, const ElementwiseLayout<2>& L, double lo, double hi, const Exec& e) {
  switch (op) {
#define DTR_CASE(name) \
  case UnaryOp::name: return unary<C, UnaryOp::name>(L, lo, hi, e);
    DTR_CASE(kNeg) DTR_CASE(kAbs) DTR_CASE(kRelu) DTR_CASE(kClampBoth) DTR_CASE(kClampMin) DTR_CASE(kClampMax)
#undef DTR_CASE
    default: break;
  }
  if constexpr (!std::is_integral_v<C>) {
    switch (op) {
#define DTR_CASE(name) \
  case UnaryOp::name: return unary<C, UnaryOp::name>(L, lo, hi, e);
      DTR_CASE(kExp) DTR_CASE(kLog) DTR_CASE(kSqrt) DTR_CASE(kRsqrt) DTR_CASE(kTanh) DTR_CASE(kSigmoid)
      DTR_CASE(kReciprocal) DTR_CASE(kSilu) DTR_CASE(kGeluErf) DTR_CASE(kGeluTanh) DTR_CASE(kSin)
      DTR_CASE(kCos) DTR_CASE(kErf)
#undef DTR_CASE
      default: break;
    }
  }
}

// ---- binary ------------------------------------------------------------------------

template <typename C, BinaryOp Op>
struct Binary {
  C alpha;
  DTR_HD C operator()(C a, C b) const {
    if constexpr (Op == BinaryOp::kAdd) return wrap_add(a, wrap_mul(alpha, b));
    else if constexpr (Op == BinaryOp::kSub) return wrap_sub(a, wrap_mul(alpha, b));
    else if constexpr (Op == BinaryOp::kMul) return wrap_mul(a, b);
    else if constexpr (Op == BinaryOp::kDiv) return a / b;
    else if constexpr (Op == BinaryOp::kPow) return f_pow(a, b);
    else if constexpr (Op == BinaryOp::kMaximum) return max_nan(a, b);
    else if constexpr (Op == BinaryOp::kMinimum) return min_nan(a, b);
    else if constexpr (Op == BinaryOp::kEq) return C(a == b ? 1 : 0);
    else if constexpr (Op == BinaryOp::kNe) return C(a != b ? 1 : 0);
    else if constexpr (Op == BinaryOp::kLt) return C(a < b ? 1 : 0);
    else if constexpr (Op == BinaryOp::kLe) return C(a <= b ? 1 : 0);
    else if constexpr (Op == BinaryOp::kGt) return C(a > b ? 1 : 0);
    else if constexpr (Op == BinaryOp::kGe) return C(a >= b ? 1 : 0);
    else if constexpr (Op == BinaryOp::kReluBackward) return b <= C(0) ? C(0) : a;
    else if constexpr (Op == BinaryOp::kSigmoidBackward) return a * (C(1) - b) * b;
    else if constexpr (Op == BinaryOp::kTanhBackward) return a * (C(1) - b * b);
    else if constexpr (Op == BinaryOp::kAbsBackward) return a * ((b > C(0) ? C(1) : C(0)) - (b < C(0) ? C(1) : C(0)));
    else if constexpr (Op == BinaryOp::kSiluBackward) {
      const C s = C(1) / (C(1) + f_exp(-b));
      return a * s * (C(1) + b * (C(1) - s));
    } else if constexpr (Op == BinaryOp::kGeluErfBackward) {
      const C cdf = C(0.5) * (C(1) + f_erf(b * C(kSqrt1_2)));
      const C pdf = C(k2SqrtPi * kSqrt1_2 * 0.5) * f_exp(b * b * C(-0.5));
      return a * (cdf + b * pdf);
    } else {  // kGeluTanhBackward
      const C beta = C(kSqrt2 * k2SqrtPi * 0.5), kappa = C(0.044715);
      const C x_sq = b * b;
      const C inner = beta * (b + kappa * x_sq * b);
      const C t = f_tanh(inner);
      const C left = C(0.5) * b, right = C(1) + t;
      const C right_derivative = left * (C(1) - t * t) * beta * (C(1) + C(3) * kappa * x_sq);
      return a * (C(0.5) * right + right_derivative);
    }
  }
};

template <typename C, BinaryOp Op>
void binary(const ElementwiseLayout<3>& L, double alpha, const Exec& e) {
  map_elements<C>(e, L, Binary<C, Op>{C(alpha)}, "binary");
}

template <typename C>
void binary_typed(BinaryOp op, const ElementwiseLayout<3>& L, double alpha, const Exec& e) {
  switch (op) {
#define DTR_CASE(name) \
  case BinaryOp::name: return binary<C, BinaryOp::name>(L, alpha, e);
    DTR_CASE(kAdd) DTR_CASE(kSub) DTR_CASE(kMul) DTR_CASE(kPow) DTR_CASE(kMaximum) DTR_CASE(kMinimum)
    DTR_CASE(kEq) DTR_CASE(kNe) DTR_CASE(kLt) DTR_CASE(kLe) DTR_CASE(kGt) DTR_CASE(kGe)
#undef DTR_CASE
    default: break;
  }
  if constexpr (!std::is_integral_v<C>) {
    switch (op) {
#define DTR_CASE(name) \
  case BinaryOp::name: return binary<C, BinaryOp::name>(L, alpha, e);
      DTR_CASE(kDiv) DTR_CASE(kReluBackward) DTR_CASE(kSigmoidBackward) DTR_CASE(kTanhBackward)
      DTR_CASE(kAbsBackward) DTR_CASE(kSiluBackward) DTR_CASE(kGeluErfBackward) DTR_CASE(kGeluTanhBackward)
#undef DTR_CASE
      default: break;
    }
  }
}

// ---- tensor-scalar -------------------------------------------------------------------

template <typename C, ScalarOp Op>
struct Scalar {
  C s;
  DTR_HD C operator()(C x) const {
    if constexpr (Op == ScalarOp::kAdd) return wrap_add(x, s);
    else if constexpr (Op == ScalarOp::kMul) return wrap_mul(x, s);
    else if constexpr (Op == ScalarOp::kDiv) return x / s;
    else if constexpr (Op == ScalarOp::kPow) {
      // The exact shortcuts of cpu/binary.cpp's pow_scalar.
      if constexpr (std::is_integral_v<C>) return ipow(x, s);
      else if (s == C(1)) return x;
      else if (s == C(2)) return x * x;
      else if (s == C(3)) return x * x * x;
      else if (s == C(0.5)) return f_sqrt(x);
      else if (s == C(-0.5)) return C(1) / f_sqrt(x);
      else if (s == C(-1)) return C(1) / x;
      else if (s == C(-2)) return C(1) / (x * x);
      else return f_pow(x, s);
    } else if constexpr (Op == ScalarOp::kEq) return C(x == s ? 1 : 0);
    else if constexpr (Op == ScalarOp::kNe) return C(x != s ? 1 : 0);
    else if constexpr (Op == ScalarOp::kLt) return C(x < s ? 1 : 0);
    else if constexpr (Op == ScalarOp::kLe) return C(x <= s ? 1 : 0);
    else if constexpr (Op == ScalarOp::kGt) return C(x > s ? 1 : 0);
    else return C(x >= s ? 1 : 0);
  }
};

template <typename C>
void scalar_typed(ScalarOp op, const ElementwiseLayout<2>& L, double other, const Exec& e) {
  switch (op) {
#define DTR_CASE(name) \
  case ScalarOp::name: return map_elements<C>(e, L, Scalar<C, ScalarOp::name>{C(other)}, "scalar");
    DTR_CASE(kAdd) DTR_CASE(kMul) DTR_CASE(kPow) DTR_CASE(kEq) DTR_CASE(kNe) DTR_CASE(kLt) DTR_CASE(kLe)
    DTR_CASE(kGt) DTR_CASE(kGe)
#undef DTR_CASE
    case ScalarOp::kDiv:
      if constexpr (!std::is_integral_v<C>) map_elements<C>(e, L, Scalar<C, ScalarOp::kDiv>{C(other)}, "scalar");
      return;
  }
}

template <typename C>
struct Where {
  DTR_HD C operator()(C k, C a, C b) const { return k != C(0) ? a : b; }
};

}  // namespace

void launch_unary(UnaryOp op, DType compute, const ElementwiseLayout<2>& L, double lo, double hi, const Exec& e) {
  compute_dispatch(compute, [&](auto tag) { unary_typed<decltype(tag)>(op, L, lo, hi, e); });
}

void launch_binary(BinaryOp op, DType compute, const ElementwiseLayout<3>& L, double alpha, const Exec& e) {
  compute_dispatch(compute, [&](auto tag) { binary_typed<decltype(tag)>(op, L, alpha, e); });
}

void launch_scalar(ScalarOp op, DType compute, const ElementwiseLayout<2>& L, double other, const Exec& e) {
  compute_dispatch(compute, [&](auto tag) { scalar_typed<decltype(tag)>(op, L, other, e); });
}

void launch_where(DType compute, const ElementwiseLayout<4>& L, const Exec& e) {
  compute_dispatch(compute, [&](auto tag) {
    using C = decltype(tag);
    map_elements<C>(e, L, Where<C>{}, "where");
  });
}

void launch_convert(const ElementwiseLayout<2>& L, const Exec& e) {
  const DType out = L.dtype[0], in = L.dtype[1];
  if (out == in) {
    // Same dtype: bytes, by element size.
    const int64_t isz = itemsize(out);
    launch(
        e, L.numel,
        [=] __host__ __device__(int64_t i) {
          int64_t off[2];
          offsets_of(L, i, off);
          for (int64_t b = 0; b < isz; ++b) L.data[0][off[0] + b] = L.data[1][off[1] + b];
        },
        "copy");
    return;
  }
  // Integers through int64 (exact), floating values through double.
  if (!is_floating(out) && !is_floating(in)) {
    map_elements<int64_t>(e, L, [] __host__ __device__(int64_t v) { return v; }, "convert");
  } else {
    map_elements<double>(e, L, [] __host__ __device__(double v) { return v; }, "convert");
  }
}

void launch_fill(const ElementwiseLayout<1>& L, double value, int64_t int_value, bool use_int, const Exec& e) {
  if (use_int) {
    map_elements<int64_t>(e, L, [int_value] __host__ __device__() { return int_value; }, "fill");
  } else {
    map_elements<double>(e, L, [value] __host__ __device__() { return value; }, "fill");
  }
}

void launch_arange(std::byte* out, DType dt, int64_t n, double start, double step, bool use_int,
                   int64_t int_start, int64_t int_step, const Exec& e) {
  const int64_t isz = itemsize(dt);
  if (use_int) {
    const auto s0 = uint64_t(int_start), st = uint64_t(int_step);
    launch(
        e, n, [=] __host__ __device__(int64_t i) { store<int64_t>(out + i * isz, dt, int64_t(s0 + uint64_t(i) * st)); },
        "arange");
  } else {
    launch(
        e, n, [=] __host__ __device__(int64_t i) { store<double>(out + i * isz, dt, start + double(i) * step); },
        "arange");
  }
}

void launch_random(RandomKind kind, std::byte* out, DType dt, int64_t n, RngState rng, int64_t low,
                   int64_t range, const Exec& e) {
  const int64_t isz = itemsize(dt);
  switch (kind) {
    case RandomKind::kUniform:
      launch(
          e, n,
          [=] __host__ __device__(int64_t i) {
            const float u = u32_to_uniform(philox_u32(rng, uint64_t(2 * i)));
            if (dt == DType::kFloat32) reinterpret_cast<float*>(out)[i] = u;
            else store<double>(out + i * isz, dt, double(u));
          },
          "rand");
      return;
    case RandomKind::kNormal:
      launch(
          e, n,
          [=] __host__ __device__(int64_t i) {
            const float z = box_muller(philox_u32(rng, uint64_t(2 * i)), philox_u32(rng, uint64_t(2 * i + 1)));
            if (dt == DType::kFloat32) reinterpret_cast<float*>(out)[i] = z;
            else store<double>(out + i * isz, dt, double(z));
          },
          "randn");
      return;
    case RandomKind::kInt:
      launch(
          e, n,
          [=] __host__ __device__(int64_t i) {
            const uint64_t hi = philox_u32(rng, uint64_t(2 * i));
            const uint64_t r = (hi << 32) | philox_u32(rng, uint64_t(2 * i + 1));
            store<int64_t>(out + i * isz, dt, low + int64_t(r % uint64_t(range)));
          },
          "randint");
      return;
  }
}

}  // namespace dtr::cuda
