// Runtime choice of the instruction set for hot loops. Kernels are compiled
// for the x86-64 baseline (SSE2); a loop that gains from wider vectors also
// gets an AVX2 copy (DTR_TARGET_AVX2 on a function), chosen at run time with
// cpu_has_avx2(). FMA stays off in those copies, so no multiply-add is
// contracted and each lane computes bitwise what the baseline loop computes:
// results never depend on the CPU (Note [determinism]).
#pragma once

#if defined(__x86_64__) && defined(__GNUC__)
#define DTR_HAVE_AVX2_DISPATCH 1
#define DTR_TARGET_AVX2 __attribute__((target("avx2")))
#else
#define DTR_HAVE_AVX2_DISPATCH 0
#define DTR_TARGET_AVX2
#endif

namespace dtr::cpu {

/// True when this CPU runs AVX2 code (always false where there is no
/// dispatch: the baseline loops run).
inline bool cpu_has_avx2() {
#if DTR_HAVE_AVX2_DISPATCH
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
#else
  return false;
#endif
}

}  // namespace dtr::cpu
