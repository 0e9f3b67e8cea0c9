// Binary elementwise kernels (eager/ops/binary.cpp): broadcasting, strided
// (in-place rows write through views), mixed dtypes. Math runs in the type of
// the promoted input dtype (torch.result_type; float32 for float16/bfloat16,
// int64 for integers and bool) and is stored in the output's dtype.
// Integer add/sub/mul/pow wrap around like PyTorch's.
// The elementwise loops must vectorize. With GCC's default -ftrapping-math a
// select whose comparison ends up inside a branch (after jump threading)
// blocks if-conversion and so vectorization; no IEEE result depends on the
// flag (it only promises that floating point exceptions are not observed).
// Set before any include so every inlined function carries it.
#if !defined(__clang__)  // GCC only; clang does not assume trapping math by default
#pragma GCC optimize("no-trapping-math")
#endif

#include <cmath>
#include <functional>
#include <limits>
#include <type_traits>

#include "core/integer_math.h"
#include "cpu/elementwise.h"

namespace dtr::cpu {
namespace {

// std::max / std::min, but a NaN operand wins (torch.maximum/minimum).
// Branch-free selects so the loops vectorize.
template <typename C>
C max_propagate_nan(C a, C b) {
  C m = a < b ? b : a;
  if constexpr (std::is_floating_point_v<C>) {
    m = std::isnan(b) ? b : m;
    m = std::isnan(a) ? a : m;
  }
  return m;
}
template <typename C>
C min_propagate_nan(C a, C b) {
  C m = b < a ? b : a;
  if constexpr (std::is_floating_point_v<C>) {
    m = std::isnan(b) ? b : m;
    m = std::isnan(a) ? a : m;
  }
  return m;
}

// ---- drivers ------------------------------------------------------------------------

// out = f(a, b) with a = input 0, b = input 1 (both broadcast), computed as C.
template <typename C, typename F>
void tensor_tensor(const KernelContext& c, F f) {
  map_elements<C, C, C>(c.outputs[0], {&c.inputs[0], &c.inputs[1]}, f);
}

// out = f(x) with x = input 0, the scalar captured in f.
template <typename C, typename F>
void tensor_scalar(const KernelContext& c, F f) {
  map_elements<C, C>(c.outputs[0], {&c.inputs[0]}, f);
}

DType promoted_inputs(const KernelContext& c) { return inputs_result_type(c, 0, 2); }
DType promoted_with_scalar(const KernelContext& c) {
  return inputs_result_type(c, 0, 1, c.attrs.b("other_is_float"));
}
DType true_division(DType t) { return is_floating(t) ? t : kFloat32; }

// ---- tensor-tensor --------------------------------------------------------------------

void add_kernel(const KernelContext& c) {
  const double alpha = c.attrs.f("alpha");
  compute_type_dispatch(promoted_inputs(c), [&](auto tag) {
    using C = decltype(tag);
    if (alpha == 1) {
      tensor_tensor<C>(c, [](C a, C b) { return wrap_add(a, b); });
    } else {
      const C al = C(alpha);
      tensor_tensor<C>(c, [al](C a, C b) { return wrap_add(a, wrap_mul(al, b)); });
    }
  });
}

void sub_kernel(const KernelContext& c) {
  const double alpha = c.attrs.f("alpha");
  compute_type_dispatch(promoted_inputs(c), [&](auto tag) {
    using C = decltype(tag);
    if (alpha == 1) {
      tensor_tensor<C>(c, [](C a, C b) { return wrap_sub(a, b); });
    } else {
      const C al = C(alpha);
      tensor_tensor<C>(c, [al](C a, C b) { return wrap_sub(a, wrap_mul(al, b)); });
    }
  });
}

void mul_kernel(const KernelContext& c) {
  compute_type_dispatch(promoted_inputs(c), [&](auto tag) {
    using C = decltype(tag);
    tensor_tensor<C>(c, [](C a, C b) { return wrap_mul(a, b); });
  });
}

void div_kernel(const KernelContext& c) {
  floating_compute_dispatch(true_division(promoted_inputs(c)), "div", [&](auto tag) {
    using C = decltype(tag);
    tensor_tensor<C>(c, [](C a, C b) { return a / b; });
  });
}

void pow_kernel(const KernelContext& c) {
  compute_type_dispatch(promoted_inputs(c), [&](auto tag) {
    using C = decltype(tag);
    if constexpr (std::is_integral_v<C>) {
      tensor_tensor<C>(c, [](C a, C b) { return ipow(a, b); });
    } else {
      tensor_tensor<C>(c, [](C a, C b) { return std::pow(a, b); });
    }
  });
}

void maximum_kernel(const KernelContext& c) {
  compute_type_dispatch(promoted_inputs(c), [&](auto tag) {
    using C = decltype(tag);
    tensor_tensor<C>(c, [](C a, C b) { return max_propagate_nan(a, b); });
  });
}

void minimum_kernel(const KernelContext& c) {
  compute_type_dispatch(promoted_inputs(c), [&](auto tag) {
    using C = decltype(tag);
    tensor_tensor<C>(c, [](C a, C b) { return min_propagate_nan(a, b); });
  });
}

template <typename Compare>
void compare_kernel(const KernelContext& c) {
  compute_type_dispatch(promoted_inputs(c), [&](auto tag) {
    using C = decltype(tag);
    map_elements<bool, C, C>(c.outputs[0], {&c.inputs[0], &c.inputs[1]},
                             [](C a, C b) -> bool { return Compare{}(a, b); });
  });
}

// where(cond, a, b), computed in the output's dtype.
void where_kernel(const KernelContext& c) {
  compute_type_dispatch(c.outputs[0].dtype, [&](auto tag) {
    using C = decltype(tag);
    map_elements<C, bool, C, C>(c.outputs[0], {&c.inputs[0], &c.inputs[1], &c.inputs[2]},
                                [](bool k, C a, C b) { return k ? a : b; });
  });
}

// ---- tensor-scalar (attribute "other") ---------------------------------------------------

/// The scalar attribute in the compute type. An integer type must hold it:
/// the op functions promote a floating scalar first, but a by-name caller's
/// NaN or 1e30 on an int64 tensor would be an undefined conversion.
template <typename C>
C scalar_to(double v, const KernelContext& c, std::string_view op) {
  if constexpr (std::is_integral_v<C> && !std::is_same_v<C, bool>) {
    constexpr double lo = double(std::numeric_limits<C>::min());
    constexpr double hi = 2.0 * double(std::numeric_limits<C>::max() / 2 + 1);  // max + 1, exact
    DTR_CHECK(v >= lo && v < hi, ValueError,
              "{}: scalar {} cannot be converted to the integer compute type of a {} result "
              "without overflow",
              op, v, dtype_name(c.outputs[0].dtype));
  }
  return C(v);
}

void add_scalar_kernel(const KernelContext& c) {
  const double other = c.attrs.f("other");
  compute_type_dispatch(promoted_with_scalar(c), [&](auto tag) {
    using C = decltype(tag);
    const C s = scalar_to<C>(other, c, "add");
    tensor_scalar<C>(c, [s](C x) { return wrap_add(x, s); });
  });
}

void mul_scalar_kernel(const KernelContext& c) {
  const double other = c.attrs.f("other");
  compute_type_dispatch(promoted_with_scalar(c), [&](auto tag) {
    using C = decltype(tag);
    const C s = scalar_to<C>(other, c, "mul");
    tensor_scalar<C>(c, [s](C x) { return wrap_mul(x, s); });
  });
}

void div_scalar_kernel(const KernelContext& c) {
  const double other = c.attrs.f("other");
  floating_compute_dispatch(true_division(promoted_with_scalar(c)), "div", [&](auto tag) {
    using C = decltype(tag);
    const C s = scalar_to<C>(other, c, "div");
    tensor_scalar<C>(c, [s](C x) { return x / s; });
  });
}

// Common exponents take the exact shortcuts PyTorch takes.
void pow_scalar_kernel(const KernelContext& c) {
  const double e = c.attrs.f("other");
  compute_type_dispatch(promoted_with_scalar(c), [&](auto tag) {
    using C = decltype(tag);
    if constexpr (std::is_integral_v<C>) {
      const C ie = C(e);
      tensor_scalar<C>(c, [ie](C x) { return ipow(x, ie); });
    } else if (e == 1) {
      tensor_scalar<C>(c, [](C x) { return x; });
    } else if (e == 2) {
      tensor_scalar<C>(c, [](C x) { return x * x; });
    } else if (e == 3) {
      tensor_scalar<C>(c, [](C x) { return x * x * x; });
    } else if (e == 0.5) {
      tensor_scalar<C>(c, [](C x) { return std::sqrt(x); });
    } else if (e == -0.5) {
      tensor_scalar<C>(c, [](C x) { return C(1) / std::sqrt(x); });
    } else if (e == -1) {
      tensor_scalar<C>(c, [](C x) { return C(1) / x; });
    } else if (e == -2) {
      tensor_scalar<C>(c, [](C x) { return C(1) / (x * x); });
    } else {
      const C ce = C(e);
      tensor_scalar<C>(c, [ce](C x) { return std::pow(x, ce); });
    }
  });
}

template <typename Compare>
void compare_scalar_kernel(const KernelContext& c) {
  const double other = c.attrs.f("other");
  compute_type_dispatch(promoted_with_scalar(c), [&](auto tag) {
    using C = decltype(tag);
    const C s = scalar_to<C>(other, c, "comparison");
    map_elements<bool, C>(c.outputs[0], {&c.inputs[0]}, [s](C x) -> bool { return Compare{}(x, s); });
  });
}

}  // namespace

void register_binary_kernels() {
  set_cpu_kernel("add", add_kernel);
  set_cpu_kernel("add_", add_kernel);
  set_cpu_kernel("sub", sub_kernel);
  set_cpu_kernel("sub_", sub_kernel);
  set_cpu_kernel("mul", mul_kernel);
  set_cpu_kernel("mul_", mul_kernel);
  set_cpu_kernel("div", div_kernel);
  set_cpu_kernel("div_", div_kernel);
  set_cpu_kernel("pow", pow_kernel);
  set_cpu_kernel("maximum", maximum_kernel);
  set_cpu_kernel("minimum", minimum_kernel);
  set_cpu_kernel("eq", compare_kernel<std::equal_to<>>);
  set_cpu_kernel("ne", compare_kernel<std::not_equal_to<>>);
  set_cpu_kernel("lt", compare_kernel<std::less<>>);
  set_cpu_kernel("le", compare_kernel<std::less_equal<>>);
  set_cpu_kernel("gt", compare_kernel<std::greater<>>);
  set_cpu_kernel("ge", compare_kernel<std::greater_equal<>>);
  set_cpu_kernel("where", where_kernel);

  set_cpu_kernel("add_scalar", add_scalar_kernel);
  set_cpu_kernel("add_scalar_", add_scalar_kernel);
  set_cpu_kernel("mul_scalar", mul_scalar_kernel);
  set_cpu_kernel("mul_scalar_", mul_scalar_kernel);
  set_cpu_kernel("div_scalar", div_scalar_kernel);
  set_cpu_kernel("div_scalar_", div_scalar_kernel);
  set_cpu_kernel("pow_scalar", pow_scalar_kernel);
  set_cpu_kernel("eq_scalar", compare_scalar_kernel<std::equal_to<>>);
  set_cpu_kernel("ne_scalar", compare_scalar_kernel<std::not_equal_to<>>);
  set_cpu_kernel("lt_scalar", compare_scalar_kernel<std::less<>>);
  set_cpu_kernel("le_scalar", compare_scalar_kernel<std::less_equal<>>);
  set_cpu_kernel("gt_scalar", compare_scalar_kernel<std::greater<>>);
  set_cpu_kernel("ge_scalar", compare_scalar_kernel<std::greater_equal<>>);
}

}  // namespace dtr::cpu
