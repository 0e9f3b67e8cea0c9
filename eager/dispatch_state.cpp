#include "eager/dispatch_state.h"

#include "eager/autograd.h"

namespace dtr {

DispatchState DispatchState::current() {
  return DispatchState{.grad_mode = is_grad_enabled(), .autocast = autocast_states()};
}

void set_dispatch_state(const DispatchState& s) {
  set_grad_enabled(s.grad_mode);
  set_autocast_states(s.autocast);
}

}  // namespace dtr
