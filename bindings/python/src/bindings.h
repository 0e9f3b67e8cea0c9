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

/// A Python bool, int or float (or a one-element Tensor) as a Scalar.
/// Throws TypeError otherwise, ValueError for an int beyond int64.
Scalar to_scalar(nanobind::handle h);
/// The single value of a one-element tensor as a Scalar of its category.
Scalar scalar_of(const Tensor& t);
bool is_tensor(nanobind::handle h);

void bind_errors(nanobind::module_& m);
void bind_types(nanobind::module_& m);
void bind_functions(nanobind::module_& m);
void bind_nn_optim(nanobind::module_& m);

}  // namespace dtr::python
