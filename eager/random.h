// The global Philox generator: a seed and a counter offset. Random ops reserve
// a range of the counter at dispatch and record (seed, offset) in lineage, so
// replay draws the same bits (Note [replay equals original]).
#pragma once

#include <cstdint>

#include "core/philox.h"

namespace dtr {
void manual_seed(uint64_t seed);
RngState get_rng_state();
void set_rng_state(RngState s);
namespace detail {
/// Returns the current state and advances the offset by `draws` (rounded up to 4).
RngState reserve_rng(uint64_t draws);
}  // namespace detail
}  // namespace dtr
