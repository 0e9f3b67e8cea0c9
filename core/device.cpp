#include "core/device.h"

#include <charconv>

#include <fmt/format.h>

#include "core/error.h"

namespace dtr {

Device::Device(std::string_view spec) {
  auto fail = [&] {
    throw ValueError(fmt::format("invalid device '{}'; expected 'cpu', 'cuda' or 'cuda:N'", spec));
  };
  if (spec == "cpu") {
    type = DeviceType::kCPU;
    index = 0;
    return;
  }
  if (spec.substr(0, 4) != "cuda") fail();
  type = DeviceType::kCUDA;
  index = 0;
  if (spec.size() == 4) return;
  if (spec[4] != ':' || spec.size() == 5) fail();
  const char* b = spec.data() + 5;
  const char* e = spec.data() + spec.size();
  auto [p, ec] = std::from_chars(b, e, index);
  if (ec != std::errc() || p != e || index < 0) fail();
}

std::string Device::str() const {
  return type == DeviceType::kCPU ? "cpu" : fmt::format("cuda:{}", index);
}

}  // namespace dtr
