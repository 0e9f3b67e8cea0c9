// Autocast (torch.autocast): a thread-local state per device type that makes
// ops on tensors of that device type run in the precision PyTorch's autocast
// lists for it give them (OpDef::autocast_policy): a low-precision dtype,
// float32, or the widest input dtype. Every lineage node records the state
// of every device type it ran under, and replay restores it (Note [replay
// equals original]).
#pragma once

#include <array>
#include <cstddef>

#include "core/device.h"
#include "core/dtype.h"

namespace dtr {

/// One device type's autocast state (torch.is_autocast_enabled(device_type),
/// torch.get_autocast_dtype(device_type)).
struct AutocastState {
  bool enabled = false;
  DType dtype = kBFloat16;  // kBFloat16 or kFloat16
  friend bool operator==(const AutocastState&, const AutocastState&) = default;
};

/// The autocast state of every device type: what a thread has and what a
/// lineage node records (DispatchState).
class AutocastStates {
 public:
  /// Every device type off, with PyTorch's default dtype: bfloat16 on the
  /// CPU, float16 on the others.
  constexpr AutocastStates() {
    for (size_t t = 0; t < by_type_.size(); ++t)
      by_type_[t] = AutocastState{false, t == size_t(DeviceType::kCPU) ? kBFloat16 : kFloat16};
  }
  /// Every device type in state `s`.
  constexpr explicit AutocastStates(AutocastState s) { by_type_.fill(s); }

  constexpr const AutocastState& operator[](DeviceType t) const { return by_type_[size_t(t)]; }
  constexpr AutocastState& operator[](DeviceType t) { return by_type_[size_t(t)]; }
  /// Whether any device type has autocast on (one test on the op path).
  constexpr bool any_enabled() const {
    for (const AutocastState& s : by_type_)
      if (s.enabled) return true;
    return false;
  }
  friend bool operator==(const AutocastStates&, const AutocastStates&) = default;

 private:
  std::array<AutocastState, kNumDeviceTypes> by_type_{};
};

/// The calling thread's autocast state on `device_type`.
AutocastState autocast_state(DeviceType device_type);
/// Sets the calling thread's autocast state on `device_type` only. Throws
/// ValueError for a dtype other than kBFloat16 or kFloat16.
void set_autocast_state(DeviceType device_type, AutocastState s);
/// The calling thread's autocast state on every device type.
AutocastStates autocast_states();
/// Sets the calling thread's autocast state on every device type (no check:
/// a recorded state, as replay restores it).
void set_autocast_states(const AutocastStates& s);

/// The CPU's state (the form from before autocast was per device type).
AutocastState autocast_state();
/// Sets every device type to `s` (the form from before autocast was per
/// device type). Throws ValueError for a dtype other than kBFloat16 or
/// kFloat16.
void set_autocast_state(AutocastState s);

/// Autocast in a scope; the previous state of every device type comes back
/// when it ends, also by an exception. Throws ValueError for a dtype other
/// than kBFloat16 or kFloat16.
class AutocastGuard {
 public:
  /// torch.autocast(device_type, dtype, enabled): ops on tensors of
  /// `device_type` autocast to `dtype`; other device types keep their state.
  AutocastGuard(DeviceType device_type, DType dtype, bool enabled = true);
  /// Autocast to `dtype` on every device type (the form from before autocast
  /// was per device type): ops on any device follow their device type's lists.
  explicit AutocastGuard(DType dtype, bool enabled = true);
  ~AutocastGuard() { set_autocast_states(prev_); }
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  AutocastStates prev_;
};

}  // namespace dtr
