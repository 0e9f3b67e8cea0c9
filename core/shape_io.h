// Printing a Shape as libtorch prints sizes (IntArrayRef's operator<<).
#pragma once

#include <iosfwd>

#include "core/shape.h"

namespace absl {
/// Prints a dtr::Shape (or Strides) as libtorch prints sizes: "[2, 3]".
/// Shape is an alias of absl::InlinedVector, so argument-dependent lookup
/// looks here, in the vector's own namespace, wherever `os << shape` is
/// written.
std::ostream& operator<<(std::ostream& os, const dtr::Shape& shape);
}  // namespace absl
