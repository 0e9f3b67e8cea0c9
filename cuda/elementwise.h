// The elementwise launchers of cuda/elementwise.cu (unary, binary, scalar,
// where, converting copies, fills, ranges and random fills): one entry per
// kind of kernel, the op chosen by an enum so that cuda/*.cpp, which nvcc
// never compiles, can call them. Semantics are those of the CPU kernels
// (cpu/unary.cpp, cpu/binary.cpp, cpu/copy.cpp, cpu/creation.cpp); the
// compute type C is float for float32/float16/bfloat16, double for float64,
// int64 otherwise.
#pragma once

#include <cstdint>

#include "core/philox.h"
#include "cuda/exec.h"

namespace dtr::cuda {

enum class UnaryOp : uint8_t {
  kNeg, kAbs, kRelu, kExp, kLog, kSqrt, kRsqrt, kTanh, kSigmoid, kReciprocal, kSilu,
  kGeluErf, kGeluTanh, kSin, kCos, kErf, kClampBoth, kClampMin, kClampMax,
};
/// out = op(x); `lo`/`hi` are clamp's bounds.
void launch_unary(UnaryOp op, DType compute, const ElementwiseLayout<2>& L, double lo, double hi, const Exec& e);

enum class BinaryOp : uint8_t {
  kAdd, kSub, kMul, kDiv, kPow, kMaximum, kMinimum, kEq, kNe, kLt, kLe, kGt, kGe,
  // Fused activation backwards: out = f(grad_out, saved).
  kReluBackward, kSigmoidBackward, kTanhBackward, kAbsBackward, kSiluBackward,
  kGeluErfBackward, kGeluTanhBackward,
};
/// out = op(a, b); add and sub scale b by `alpha`.
void launch_binary(BinaryOp op, DType compute, const ElementwiseLayout<3>& L, double alpha, const Exec& e);

enum class ScalarOp : uint8_t { kAdd, kMul, kDiv, kPow, kEq, kNe, kLt, kLe, kGt, kGe };
/// out = op(x, other), `other` converted to the compute type.
void launch_scalar(ScalarOp op, DType compute, const ElementwiseLayout<2>& L, double other, const Exec& e);

/// out = cond ? a : b (operands: out, cond, a, b), computed in `compute`.
void launch_where(DType compute, const ElementwiseLayout<4>& L, const Exec& e);

/// out = in, converted to out's dtype (bytes copied when the dtypes agree).
void launch_convert(const ElementwiseLayout<2>& L, const Exec& e);

/// Every element of out = value (or int_value, exact, when `use_int`).
void launch_fill(const ElementwiseLayout<1>& L, double value, int64_t int_value, bool use_int, const Exec& e);

/// out[i] = start + i * step over a contiguous out (ints: wrapping int64).
void launch_arange(std::byte* out, DType dt, int64_t n, double start, double step, bool use_int,
                   int64_t int_start, int64_t int_step, const Exec& e);

enum class RandomKind : uint8_t { kUniform, kNormal, kInt };
/// Random fills of a contiguous out from Philox at `rng` (Note [replay
/// equals original]): element i uses draws 2i and 2i+1, as on the CPU, so
/// uniform and integer fills are bitwise the CPU's; normal ones agree to
/// float32 rounding of log and cos (the device's libm is not glibc's).
void launch_random(RandomKind kind, std::byte* out, DType dt, int64_t n, RngState rng, int64_t low,
                   int64_t range, const Exec& e);

}  // namespace dtr::cuda
