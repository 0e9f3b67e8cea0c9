#include "core/scalar.h"

#include <ostream>

namespace dtr {

std::ostream& operator<<(std::ostream& out, const Scalar& s) {
  if (s.isFloatingPoint()) return out << s.toDouble();
  if (s.isBoolean()) return out << (s.toBool() ? "true" : "false");
  return out << s.toLong();
}

}  // namespace dtr
