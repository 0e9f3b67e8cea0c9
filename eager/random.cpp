#include "eager/random.h"

#include <mutex>

namespace dtr {
namespace {
std::mutex g_mu;
RngState g_state{67280421310721ull, 0};  // PyTorch's default seed
}  // namespace

void manual_seed(uint64_t seed) {
  std::lock_guard lock(g_mu);
  g_state = RngState{seed, 0};
}

RngState get_rng_state() {
  std::lock_guard lock(g_mu);
  return g_state;
}

void set_rng_state(RngState s) {
  std::lock_guard lock(g_mu);
  g_state = s;
}

namespace detail {
RngState reserve_rng(uint64_t draws) {
  std::lock_guard lock(g_mu);
  const RngState s = g_state;
  g_state.offset += (draws + 3) / 4 * 4;
  return s;
}
}  // namespace detail
}  // namespace dtr
