// Which op's shapes this thread checks, for numel()'s and
// contiguous_strides()' "too many elements" error (core/shape.h).
#pragma once

#include <string_view>

namespace dtr {

/// Names the op whose shapes this thread checks while it lives, so that
/// numel()'s and contiguous_strides()' "too many elements" ValueError starts
/// with the op's name (dispatch() holds one around shape inference). Scopes
/// nest; the innermost names the op.
class ShapeCheckScope {
 public:
  explicit ShapeCheckScope(std::string_view op) noexcept;
  ~ShapeCheckScope();
  ShapeCheckScope(const ShapeCheckScope&) = delete;
  ShapeCheckScope& operator=(const ShapeCheckScope&) = delete;

 private:
  std::string_view previous_;
};

}  // namespace dtr
