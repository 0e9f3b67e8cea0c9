#include "core/device.h"

#include <charconv>

#include <fmt/format.h>

#include "core/error.h"

namespace dtr {

std::string_view device_type_name(DeviceType t) {
  switch (t) {
    case DeviceType::kCPU: return "cpu";
    case DeviceType::kCUDA: return "cuda";
    case DeviceType::kPrivateUse1: return "privateuseone";
  }
  return "?";
}

Device::Device(std::string_view spec) {
  auto fail = [&] {
    throw ValueError(fmt::format(
        "invalid device '{}'; expected 'cpu', 'cuda', 'cuda:N' or 'privateuseone:N'", spec));
  };
  const size_t colon = spec.find(':');
  const std::string_view name = spec.substr(0, colon);
  bool known = false;
  for (int t = 0; t < kNumDeviceTypes; ++t) {
    if (name == device_type_name(DeviceType(t))) {
      type = DeviceType(t);
      known = true;
    }
  }
  if (!known) fail();
  index = 0;
  if (colon == std::string_view::npos) return;
  const char* b = spec.data() + colon + 1;
  const char* e = spec.data() + spec.size();
  if (b == e) fail();
  auto [p, ec] = std::from_chars(b, e, index);
  if (ec != std::errc() || p != e || index < 0) fail();
  if (type == DeviceType::kCPU && index != 0) fail();
}

std::string Device::str() const {
  if (type == DeviceType::kCPU && index == 0) return "cpu";
  return fmt::format("{}:{}", device_type_name(type), index);
}

}  // namespace dtr
