// Devices: "cpu" and "cuda:N".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace dtr {

enum class DeviceType : uint8_t { kCPU = 0, kCUDA = 1 };
inline constexpr int kNumDeviceTypes = 2;

struct Device {
  DeviceType type = DeviceType::kCPU;
  int index = 0;

  constexpr Device() = default;
  constexpr Device(DeviceType t, int i = 0) : type(t), index(i) {}  // NOLINT: implicit like torch
  /// Parses "cpu", "cuda", "cuda:1". Throws ValueError.
  explicit Device(std::string_view spec);

  bool is_cpu() const { return type == DeviceType::kCPU; }
  bool is_cuda() const { return type == DeviceType::kCUDA; }
  std::string str() const;
  friend bool operator==(const Device&, const Device&) = default;
};

inline constexpr DeviceType kCPU = DeviceType::kCPU;
inline constexpr DeviceType kCUDA = DeviceType::kCUDA;

}  // namespace dtr
