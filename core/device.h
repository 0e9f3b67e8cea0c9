// Devices: "cpu", "cuda:N", and "privateuseone:N" (a device type left to an
// out-of-tree or test backend, as PyTorch's PrivateUse1). What a device
// type can do is its backend's (core/backend.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace dtr {

enum class DeviceType : uint8_t { kCPU = 0, kCUDA = 1, kPrivateUse1 = 2 };
inline constexpr int kNumDeviceTypes = 3;

/// "cpu", "cuda", "privateuseone".
std::string_view device_type_name(DeviceType t);

struct Device {
  DeviceType type = DeviceType::kCPU;
  int index = 0;

  constexpr Device() = default;
  constexpr Device(DeviceType t, int i = 0) : type(t), index(i) {}  // NOLINT: implicit like torch
  /// Parses "cpu", "cuda", "cuda:1", "privateuseone:0" (an index defaults
  /// to 0; "cpu:0" is "cpu"). Throws ValueError naming the text.
  explicit Device(std::string_view spec);

  bool is_cpu() const { return type == DeviceType::kCPU; }
  bool is_cuda() const { return type == DeviceType::kCUDA; }
  std::string str() const;
  friend bool operator==(const Device&, const Device&) = default;
  template <typename H>
  friend H AbslHashValue(H h, const Device& d) {
    return H::combine(std::move(h), uint8_t(d.type), d.index);
  }
};

inline constexpr DeviceType kCPU = DeviceType::kCPU;
inline constexpr DeviceType kCUDA = DeviceType::kCUDA;
inline constexpr DeviceType kPrivateUse1 = DeviceType::kPrivateUse1;

}  // namespace dtr
