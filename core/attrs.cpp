#include "core/attrs.h"

#include <fmt/format.h>

namespace dtr {

void AttrKey::too_long(std::string_view name) {
  throw ValueError(fmt::format("attribute name '{}' is {} bytes long; names are at most {} bytes",
                               name, name.size(), kMaxSize));
}

void Attrs::missing(std::string_view key) {
  throw ValueError(fmt::format("missing attribute '{}'", key));
}

void Attrs::wrong_type(std::string_view key, size_t expected, size_t actual) {
  // AttrValue's alternatives, in order (ParamType's names).
  constexpr std::string_view kNames[] = {"int", "float", "bool", "ints", "dtype"};
  throw TypeError(fmt::format("attribute '{}' expects a value of type {}, got {}", key,
                              kNames[expected], kNames[actual]));
}

std::string Attrs::str() const {
  std::string out;
  for (const auto& [k, v] : items_) {
    if (!out.empty()) out += ", ";
    out += k.view();
    out += '=';
    std::visit(
        [&](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, Shape>) {
            out += shape_str(x);
          } else if constexpr (std::is_same_v<T, DType>) {
            out += dtype_name(x);
          } else {
            out += fmt::format("{}", x);
          }
        },
        v);
  }
  return out;
}

}  // namespace dtr
