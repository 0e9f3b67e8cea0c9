#include "eager/autocast.h"

#include "core/error.h"

namespace dtr {
namespace {
thread_local AutocastState t_state;
}

AutocastState autocast_state() { return t_state; }
void set_autocast_state(AutocastState s) { t_state = s; }

AutocastGuard::AutocastGuard(DType dtype, bool enabled) : prev_(t_state) {
  DTR_CHECK(dtype == kBFloat16 || dtype == kFloat16, ValueError,
            "AutocastGuard: dtype must be bfloat16 or float16, got {}", dtype_name(dtype));
  t_state = AutocastState{enabled, dtype};
}

}  // namespace dtr
