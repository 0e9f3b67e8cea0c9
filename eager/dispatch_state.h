// The thread-local state that changes what an op computes or records, as one
// value: replay and checkpoint recomputation run under the state their op or
// region ran under (Note [replay equals original]). A new thread-local mode
// is added here, to DispatchState, current() and set_dispatch_state(), and
// every snapshot and restore picks it up.
//
// What is in it: grad mode (whether ops record autograd nodes; a checkpoint
// recomputation must record them) and autocast on every device type (the
// compute dtype of ops; a region may run ops on several device types).
// What is not, on purpose: the RNG (a process-wide generator, not per thread;
// each random op records its own (seed, offset) in its lineage and replay
// hands that to the kernel, so replay never touches the generator), the
// ReadCapture of checkpoint (observes which tensors a region reads; changes
// no value), the op named in out-of-memory reports (remat::CurrentOpScope),
// and whether a thread is inside parallel_for (kernels give the same bits
// for any thread count, Note [determinism]).
#pragma once

#include "eager/autocast.h"

namespace dtr {

struct DispatchState {
  /// is_grad_enabled() (torch.is_grad_enabled).
  bool grad_mode = true;
  /// autocast_states() (torch.autocast, one state per device type).
  AutocastStates autocast;

  /// The calling thread's state.
  static DispatchState current();
  friend bool operator==(const DispatchState&, const DispatchState&) = default;
};

/// Makes `s` the calling thread's state.
void set_dispatch_state(const DispatchState& s);

/// Sets the thread's dispatch state in a scope and puts the previous one
/// back when the scope ends, also when it ends by an exception.
class DispatchStateGuard {
 public:
  explicit DispatchStateGuard(const DispatchState& s) : prev_(DispatchState::current()) {
    set_dispatch_state(s);
  }
  ~DispatchStateGuard() { set_dispatch_state(prev_); }
  DispatchStateGuard(const DispatchStateGuard&) = delete;
  DispatchStateGuard& operator=(const DispatchStateGuard&) = delete;

 private:
  DispatchState prev_;
};

}  // namespace dtr
