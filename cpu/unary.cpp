// Unary elementwise kernels (eager/ops/unary.cpp) and the fused backward
// kernels of the activations. Every kernel reads and writes arbitrary strides
// (in-place rows write through views) and computes float16/bfloat16 in
// float32 (cpu/elementwise.h). Formulas follow PyTorch's CPU kernels; in
// float32 exp, tanh and erf are the vectorizable ones of cpu/vec_math.h.
// The elementwise loops must vectorize. With GCC's default -ftrapping-math a
// select whose comparison ends up inside a branch (after jump threading)
// blocks if-conversion and so vectorization; no IEEE result depends on the
// flag (it only promises that floating point exceptions are not observed).
// Set before any include so every inlined function carries it.
#if !defined(__clang__)  // GCC only; clang does not assume trapping math by default
#pragma GCC optimize("no-trapping-math")
#endif

#include <cmath>
#include <type_traits>

#include "core/integer_math.h"
#include "cpu/elementwise.h"
#include "cpu/vec_math.h"

namespace dtr::cpu {
namespace {

// exp, tanh and erf in the compute type: the vectorizable float32 versions
// of cpu/vec_math.h, the C library's in float64.
template <typename C>
C exp_of(C x) {
  if constexpr (std::is_same_v<C, float>) return vec_math::exp(x);
  else return std::exp(x);
}
template <typename C>
C tanh_of(C x) {
  if constexpr (std::is_same_v<C, float>) return vec_math::tanh(x);
  else return std::tanh(x);
}
template <typename C>
C erf_of(C x) {
  if constexpr (std::is_same_v<C, float>) return vec_math::erf(x);
  else return std::erf(x);
}

// ---- forward kernels: out = f(x) ----------------------------------------------

// For ops defined on floating results (integer inputs were promoted to float32).
template <typename F>
void unary_floating(const KernelContext& c, std::string_view name, F f) {
  const TensorArg& x = c.inputs[0];
  const TensorArg& out = c.outputs[0];
  floating_compute_dispatch(out.dtype, name, [&](auto tag) {
    using C = decltype(tag);
    map_elements<C, C>(out, {&x}, [f](C v) { return C(f(v)); });
  });
}

// For ops that keep integer dtypes (neg, abs, relu, clamp).
template <typename F>
void unary_numeric(const KernelContext& c, F f) {
  const TensorArg& x = c.inputs[0];
  const TensorArg& out = c.outputs[0];
  compute_type_dispatch(out.dtype, [&](auto tag) {
    using C = decltype(tag);
    map_elements<C, C>(out, {&x}, [f](C v) { return C(f(v)); });
  });
}

void neg_kernel(const KernelContext& c) {
  unary_numeric(c, [](auto x) { return negate(x); });
}

void abs_kernel(const KernelContext& c) {
  unary_numeric(c, [](auto x) {
    using C = decltype(x);
    if constexpr (std::is_integral_v<C>) {
      return x < 0 ? negate(x) : x;
    } else {
      return std::abs(x);
    }
  });
}

void relu_kernel(const KernelContext& c) {
  // x < 0 ? 0 : x keeps NaN and -0.0 like torch.relu.
  unary_numeric(c, [](auto x) { return x < 0 ? decltype(x)(0) : x; });
}

void clamp_kernel(const KernelContext& c) {
  const bool has_min = c.attrs.has("min"), has_max = c.attrs.has("max");
  const double min = c.attrs.f_or("min", 0), max = c.attrs.f_or("max", 0);
  compute_type_dispatch(c.outputs[0].dtype, [&](auto tag) {
    using C = decltype(tag);
    const C lo = C(min), hi = C(max);
    // min(max(x, lo), hi) as torch.clamp: NaN stays NaN; min > max gives max.
    // One loop per case keeps the selects branch-free (vectorizable).
    const TensorArg& out = c.outputs[0];
    if (has_min && has_max) {
      map_elements<C, C>(out, {&c.inputs[0]}, [=](C x) {
        const C r = x < lo ? lo : x;
        return r > hi ? hi : r;
      });
    } else if (has_min) {
      map_elements<C, C>(out, {&c.inputs[0]}, [=](C x) { return x < lo ? lo : x; });
    } else {
      map_elements<C, C>(out, {&c.inputs[0]}, [=](C x) { return x > hi ? hi : x; });
    }
  });
}

void exp_kernel(const KernelContext& c) {
  unary_floating(c, "exp", [](auto x) { return exp_of(x); });
}
void log_kernel(const KernelContext& c) {
  unary_floating(c, "log", [](auto x) { return std::log(x); });
}
void sqrt_kernel(const KernelContext& c) {
  unary_floating(c, "sqrt", [](auto x) { return std::sqrt(x); });
}
void rsqrt_kernel(const KernelContext& c) {
  unary_floating(c, "rsqrt", [](auto x) { return decltype(x)(1) / std::sqrt(x); });
}
void tanh_kernel(const KernelContext& c) {
  unary_floating(c, "tanh", [](auto x) { return tanh_of(x); });
}
void sigmoid_kernel(const KernelContext& c) {
  unary_floating(c, "sigmoid", [](auto x) {
    using C = decltype(x);
    return C(1) / (C(1) + exp_of(-x));
  });
}
void reciprocal_kernel(const KernelContext& c) {
  unary_floating(c, "reciprocal", [](auto x) { return decltype(x)(1) / x; });
}
void silu_kernel(const KernelContext& c) {
  unary_floating(c, "silu", [](auto x) {
    using C = decltype(x);
    return x / (C(1) + exp_of(-x));
  });
}

// gelu(x) = x * Phi(x), exact (erf) or with the tanh approximation.
void gelu_kernel(const KernelContext& c) {
  if (c.attrs.b("tanh")) {
    unary_floating(c, "gelu", [](auto x) {
      using C = decltype(x);
      const C kBeta = C(M_SQRT2 * M_2_SQRTPI * 0.5);
      const C kKappa = C(0.044715);
      const C x_cube = x * x * x;
      const C inner = kBeta * (x + kKappa * x_cube);
      return C(0.5) * x * (C(1) + tanh_of(inner));
    });
  } else {
    unary_floating(c, "gelu", [](auto x) {
      using C = decltype(x);
      const C kAlpha = C(M_SQRT1_2);
      return x * C(0.5) * (C(1) + erf_of(x * kAlpha));
    });
  }
}

// ---- fused backward kernels: grad_x = f(grad_out, y), y saved by the forward ---

template <typename F>
void backward_floating(const KernelContext& c, std::string_view name, F f) {
  const TensorArg& g = c.inputs[0];
  const TensorArg& y = c.inputs[1];
  const TensorArg& out = c.outputs[0];
  floating_compute_dispatch(out.dtype, name, [&](auto tag) {
    using C = decltype(tag);
    map_elements<C, C, C>(out, {&g, &y}, [f](C dy, C v) { return C(f(dy, v)); });
  });
}

// y = relu's output: the gradient passes where the output is positive.
void relu_backward_kernel(const KernelContext& c) {
  backward_floating(c, "relu_backward", [](auto dy, auto out) {
    return out <= 0 ? decltype(dy)(0) : dy;
  });
}

// y = sigmoid's output: dy * (1 - s) * s.
void sigmoid_backward_kernel(const KernelContext& c) {
  backward_floating(c, "sigmoid_backward", [](auto dy, auto s) {
    return dy * (decltype(dy)(1) - s) * s;
  });
}

// y = tanh's output: dy * (1 - t^2).
void tanh_backward_kernel(const KernelContext& c) {
  backward_floating(c, "tanh_backward", [](auto dy, auto t) {
    return dy * (decltype(dy)(1) - t * t);
  });
}

// y = abs's input: dy * sign(x).
void abs_backward_kernel(const KernelContext& c) {
  backward_floating(c, "abs_backward", [](auto dy, auto x) {
    using C = decltype(dy);
    const C positive = x > 0 ? C(1) : C(0);
    const C negative = x < 0 ? C(1) : C(0);
    return dy * (positive - negative);
  });
}

// y = silu's input: dy * s * (1 + x * (1 - s)), s = sigmoid(x).
void silu_backward_kernel(const KernelContext& c) {
  backward_floating(c, "silu_backward", [](auto dy, auto x) {
    using C = decltype(dy);
    const C s = C(1) / (C(1) + exp_of(-x));
    return dy * s * (C(1) + x * (C(1) - s));
  });
}

// y = gelu's input.
void gelu_backward_kernel(const KernelContext& c) {
  if (c.attrs.b("tanh")) {
    backward_floating(c, "gelu_backward", [](auto dy, auto x) {
      using C = decltype(dy);
      const C kBeta = C(M_SQRT2 * M_2_SQRTPI * 0.5);
      const C kKappa = C(0.044715);
      const C x_sq = x * x;
      const C x_cube = x_sq * x;
      const C inner = kBeta * (x + kKappa * x_cube);
      const C tanh_inner = tanh_of(inner);
      const C left = C(0.5) * x;
      const C right = C(1) + tanh_inner;
      const C left_derivative = C(0.5) * right;
      const C tanh_derivative = C(1) - tanh_inner * tanh_inner;
      const C inner_derivative = kBeta * (C(1) + C(3) * kKappa * x_sq);
      const C right_derivative = left * tanh_derivative * inner_derivative;
      return dy * (left_derivative + right_derivative);
    });
  } else {
    backward_floating(c, "gelu_backward", [](auto dy, auto x) {
      using C = decltype(dy);
      const C kBeta = C(M_2_SQRTPI * M_SQRT1_2 * 0.5);
      const C kAlpha = C(M_SQRT1_2);
      const C cdf = C(0.5) * (C(1) + erf_of(x * kAlpha));
      const C pdf = kBeta * exp_of(x * x * C(-0.5));
      return dy * (cdf + x * pdf);
    });
  }
}

// sin, cos: the C library's, in the compute type. erf: as gelu's.
void sin_kernel(const KernelContext& c) {
  unary_floating(c, "sin", [](auto x) { return std::sin(x); });
}
void cos_kernel(const KernelContext& c) {
  unary_floating(c, "cos", [](auto x) { return std::cos(x); });
}
void erf_kernel(const KernelContext& c) {
  unary_floating(c, "erf", [](auto x) { return erf_of(x); });
}

}  // namespace

void register_unary_kernels() {
  set_cpu_kernel("neg", neg_kernel);
  set_cpu_kernel("neg_", neg_kernel);
  set_cpu_kernel("abs", abs_kernel);
  set_cpu_kernel("exp", exp_kernel);
  set_cpu_kernel("exp_", exp_kernel);
  set_cpu_kernel("log", log_kernel);
  set_cpu_kernel("sqrt", sqrt_kernel);
  set_cpu_kernel("sqrt_", sqrt_kernel);
  set_cpu_kernel("rsqrt", rsqrt_kernel);
  set_cpu_kernel("tanh", tanh_kernel);
  set_cpu_kernel("tanh_", tanh_kernel);
  set_cpu_kernel("sigmoid", sigmoid_kernel);
  set_cpu_kernel("sigmoid_", sigmoid_kernel);
  set_cpu_kernel("relu", relu_kernel);
  set_cpu_kernel("relu_", relu_kernel);
  set_cpu_kernel("reciprocal", reciprocal_kernel);
  set_cpu_kernel("gelu", gelu_kernel);
  set_cpu_kernel("silu", silu_kernel);
  set_cpu_kernel("clamp", clamp_kernel);
  set_cpu_kernel("clamp_", clamp_kernel);
  set_cpu_kernel("sin", sin_kernel);
  set_cpu_kernel("cos", cos_kernel);
  set_cpu_kernel("erf", erf_kernel);
  set_cpu_kernel("relu_backward", relu_backward_kernel);
  set_cpu_kernel("sigmoid_backward", sigmoid_backward_kernel);
  set_cpu_kernel("tanh_backward", tanh_backward_kernel);
  set_cpu_kernel("abs_backward", abs_backward_kernel);
  set_cpu_kernel("silu_backward", silu_backward_kernel);
  set_cpu_kernel("gelu_backward", gelu_backward_kernel);
}

}  // namespace dtr::cpu
