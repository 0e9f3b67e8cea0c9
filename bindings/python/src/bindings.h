// What the translation units of dtr._C share.
#pragma once

#include <nanobind/nanobind.h>

#include <dtr/dtr.h>

namespace dtr::python {

/// Elementwise ops on more elements than this run without the GIL. Below it
/// the release and re-take (about 350 instructions) is a few percent of the
/// op and buys no parallelism worth having.
inline constexpr int64_t kReleaseGilElements = 1 << 14;

/// Runs `f` without the GIL when the op touches more than
/// kReleaseGilElements elements.
template <typename F>
auto release_if_large(int64_t elements, F&& f) {
  if (elements > kReleaseGilElements) {
    nanobind::gil_scoped_release release;
    return f();
  }
  return f();
}

/// A Python bool, int or float, a numpy scalar of those kinds (numpy.bool_,
/// numpy.integer, numpy.floating: PyTorch treats them as Python scalars), or
/// a one-element Tensor as a Scalar. Throws TypeError otherwise (a numpy
/// complex too), ValueError for an int beyond int64.
Scalar to_scalar(nanobind::handle h);
/// What kind of numpy scalar `h` is; kNone for anything else (and while
/// numpy is not imported).
enum class NumpyScalar { kNone, kBool, kInt, kFloat, kOther };
NumpyScalar numpy_scalar_kind(nanobind::handle h);
/// A Python int (bool included) or float, or any numpy scalar: what the
/// arithmetic operators take as a scalar operand (to_scalar refuses the
/// numpy kinds it cannot hold).
bool is_number(nanobind::handle h);
/// The single value of a one-element tensor as a Scalar of its category.
Scalar scalar_of(const Tensor& t);
bool is_tensor(nanobind::handle h);

void bind_errors(nanobind::module_& m);
void bind_types(nanobind::module_& m);
void bind_functions(nanobind::module_& m);
void bind_nn_optim(nanobind::module_& m);
void bind_ops(nanobind::module_& m);
void bind_more_functions(nanobind::module_& m);

}  // namespace dtr::python
