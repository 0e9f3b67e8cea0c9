// The builder style of the module options (libtorch's TORCH_ARG):
//
//   nn::Conv2dOptions(3, 16, 3).stride(2).padding(1).bias(false)
//
// DTR_ARG(T, name) (eager/arg.h) declares a private member name_ with a
// chainable setter name(value) and a getter name(); put the default after it.
// Pair2 is libtorch's ExpandingArray<2>: an int or an (h, w) pair.
#pragma once

#include <cstdint>

#include "eager/arg.h"

namespace dtr::nn {

/// An (h, w) pair that also accepts a single int, like PyTorch's
/// `kernel_size=3` / `kernel_size=(3, 5)` and libtorch's ExpandingArray<2>
/// (`{3, 5}`).
struct Pair2 {
  int64_t h = 0, w = 0;
  Pair2(int64_t v) : h(v), w(v) {}  // NOLINT: implicit like _pair(v)
  Pair2(int64_t h_, int64_t w_) : h(h_), w(w_) {}
  bool operator==(const Pair2&) const = default;
};

}  // namespace dtr::nn
