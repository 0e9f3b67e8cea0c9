// Autocast (torch.autocast): a thread-local state that makes ops flagged
// kLowerPrecision run in a low-precision dtype and ops flagged kFloat32 run in
// float32. Every lineage node records the state it ran under, and replay
// restores it (Note [replay equals original]).
#pragma once

#include "core/dtype.h"

namespace dtr {

struct AutocastState {
  bool enabled = false;
  DType dtype = kBFloat16;  // kBFloat16 or kFloat16
  friend bool operator==(const AutocastState&, const AutocastState&) = default;
};

AutocastState autocast_state();
void set_autocast_state(AutocastState s);

/// Enables autocast to `dtype` (kBFloat16 or kFloat16) in a scope. Throws
/// ValueError for any other dtype.
class AutocastGuard {
 public:
  explicit AutocastGuard(DType dtype, bool enabled = true);
  ~AutocastGuard() { set_autocast_state(prev_); }
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  AutocastState prev_;
};

}  // namespace dtr
