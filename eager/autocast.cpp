#include "eager/autocast.h"

#include "core/error.h"

namespace dtr {
namespace {
// Constant-initialized (a constexpr constructor): no per-access guard on
// the op path.
thread_local AutocastStates t_state;

void check_dtype(DType dtype, std::string_view where) {
  DTR_CHECK(dtype == kBFloat16 || dtype == kFloat16, ValueError,
            "{}: dtype must be bfloat16 or float16, got {}", where, dtype_name(dtype));
}
}  // namespace

AutocastState autocast_state(DeviceType device_type) { return t_state[device_type]; }

void set_autocast_state(DeviceType device_type, AutocastState s) {
  check_dtype(s.dtype, "autocast");
  t_state[device_type] = s;
}

AutocastStates autocast_states() { return t_state; }
void set_autocast_states(const AutocastStates& s) { t_state = s; }

AutocastState autocast_state() { return t_state[DeviceType::kCPU]; }

void set_autocast_state(AutocastState s) {
  check_dtype(s.dtype, "autocast");
  t_state = AutocastStates(s);
}

AutocastGuard::AutocastGuard(DeviceType device_type, DType dtype, bool enabled) : prev_(t_state) {
  check_dtype(dtype, "AutocastGuard");
  t_state[device_type] = AutocastState{enabled, dtype};
}

AutocastGuard::AutocastGuard(DType dtype, bool enabled) : prev_(t_state) {
  check_dtype(dtype, "AutocastGuard");
  t_state = AutocastStates(AutocastState{enabled, dtype});
}

}  // namespace dtr
