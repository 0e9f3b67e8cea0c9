// The CUDA kernels of the copy, creation, unary and binary families: each
// builds the layout and compute type the CPU kernel would (cpu/copy.cpp,
// cpu/creation.cpp, cpu/unary.cpp, cpu/binary.cpp) and calls a launcher of
// cuda/elementwise.cu. All are emulatable (Note [host emulation of CUDA
// kernels]).
#include <limits>
#include <type_traits>

#include "cpu/elementwise.h"
#include "cuda/elementwise.h"
#include "cuda/kernel_util.h"

namespace dtr::cuda {
namespace {

using cpu::inputs_result_type;

DType promoted_inputs(const KernelContext& c) { return inputs_result_type(c, 0, 2); }
DType promoted_with_scalar(const KernelContext& c) {
  return inputs_result_type(c, 0, 1, c.attrs.b("other_is_float"));
}
DType true_division(DType t) { return is_floating(t) ? t : kFloat32; }

/// The scalar attribute must fit an integer compute type (cpu/binary.cpp's scalar_to).
void check_scalar(double v, DType compute, std::string_view op, const KernelContext& c) {
  if (is_floating(compute)) return;
  constexpr double lo = double(std::numeric_limits<int64_t>::min());
  constexpr double hi = 2.0 * double(std::numeric_limits<int64_t>::max() / 2 + 1);
  DTR_CHECK(v >= lo && v < hi, ValueError,
            "{}: scalar {} cannot be converted to the integer compute type of a {} result without overflow", op,
            v, dtype_name(c.outputs[0].dtype));
}

// ---- copy ------------------------------------------------------------------------------

void clone_kernel(const KernelContext& c) {
  launch_convert(layout_of<2>(c.outputs[0], {&c.inputs[0]}, "clone"), exec_for(c.device));
}
void copy_kernel(const KernelContext& c) {
  launch_convert(layout_of<2>(c.outputs[0], {&c.inputs[1]}, "copy_"), exec_for(c.device));
}
void fill_kernel(const KernelContext& c) {
  const TensorArg& out = c.outputs[0];
  const double v = c.attrs.f("value");
  if (!is_floating(out.dtype)) check_integer_value(v, out.dtype, "fill_");
  launch_fill(layout_of<1>(out, {}, "fill_"), v, 0, false, exec_for(c.device));
}

// ---- creation --------------------------------------------------------------------------

void full_kernel(const KernelContext& c) {
  const TensorArg& out = c.outputs[0];
  const ElementwiseLayout<1> L = layout_of<1>(out, {}, "full");
  if (c.attrs.has("int_value") && !is_floating(out.dtype)) {
    launch_fill(L, 0, c.attrs.i("int_value"), true, exec_for(c.device));
    return;
  }
  const double v = c.attrs.f("value");
  if (!is_floating(out.dtype)) check_integer_value(v, out.dtype, "full");
  launch_fill(L, v, 0, false, exec_for(c.device));
}
void arange_kernel(const KernelContext& c) {
  const TensorArg& out = c.outputs[0];
  const bool ints = c.attrs.has("int_start") && !is_floating(out.dtype);
  launch_arange(out.data, out.dtype, out.numel(), ints ? 0 : c.attrs.f("start"), ints ? 0 : c.attrs.f("step"), ints,
                ints ? c.attrs.i("int_start") : 0, ints ? c.attrs.i("int_step") : 0, exec_for(c.device));
}
void rand_kernel(const KernelContext& c) {
  const TensorArg& out = c.outputs[0];
  launch_random(RandomKind::kUniform, out.data, out.dtype, out.numel(), c.rng, 0, 1, exec_for(c.device));
}
void randn_kernel(const KernelContext& c) {
  const TensorArg& out = c.outputs[0];
  launch_random(RandomKind::kNormal, out.data, out.dtype, out.numel(), c.rng, 0, 1, exec_for(c.device));
}
void randint_kernel(const KernelContext& c) {
  const TensorArg& out = c.outputs[0];
  const int64_t low = c.attrs.i("low"), range = c.attrs.i("high") - low;
  launch_random(RandomKind::kInt, out.data, out.dtype, out.numel(), c.rng, low, range, exec_for(c.device));
}

// ---- unary -----------------------------------------------------------------------------

/// Ops defined on floating results (integer inputs were promoted already).
template <UnaryOp Op>
void unary_floating(const KernelContext& c) {
  const TensorArg& out = c.outputs[0];
  check_floating(out.dtype, c);
  launch_unary(Op, out.dtype, layout_of<2>(out, {&c.inputs[0]}, "unary"), 0, 0, exec_for(c.device));
}
/// Ops that keep integer dtypes.
template <UnaryOp Op>
void unary_numeric(const KernelContext& c) {
  const TensorArg& out = c.outputs[0];
  launch_unary(Op, out.dtype, layout_of<2>(out, {&c.inputs[0]}, "unary"), 0, 0, exec_for(c.device));
}
void gelu_kernel(const KernelContext& c) {
  if (c.attrs.b("tanh")) unary_floating<UnaryOp::kGeluTanh>(c);
  else unary_floating<UnaryOp::kGeluErf>(c);
}
void clamp_kernel(const KernelContext& c) {
  const bool has_min = c.attrs.has("min"), has_max = c.attrs.has("max");
  const UnaryOp op = has_min && has_max ? UnaryOp::kClampBoth : has_min ? UnaryOp::kClampMin : UnaryOp::kClampMax;
  const TensorArg& out = c.outputs[0];
  launch_unary(op, out.dtype, layout_of<2>(out, {&c.inputs[0]}, "clamp"), c.attrs.f_or("min", 0),
               c.attrs.f_or("max", 0), exec_for(c.device));
}

template <BinaryOp Op>
void backward_floating(const KernelContext& c) {
  const TensorArg& out = c.outputs[0];
  check_floating(out.dtype, c);
  launch_binary(Op, out.dtype, layout_of<3>(out, {&c.inputs[0], &c.inputs[1]}, "backward"), 1, exec_for(c.device));
}
void gelu_backward_kernel(const KernelContext& c) {
  if (c.attrs.b("tanh")) backward_floating<BinaryOp::kGeluTanhBackward>(c);
  else backward_floating<BinaryOp::kGeluErfBackward>(c);
}

// ---- binary ----------------------------------------------------------------------------

template <BinaryOp Op>
void tensor_tensor(const KernelContext& c) {
  DType compute = promoted_inputs(c);
  if constexpr (Op == BinaryOp::kDiv) {
    compute = true_division(compute);
    check_floating(compute, c);
  }
  const double alpha = (Op == BinaryOp::kAdd || Op == BinaryOp::kSub) ? c.attrs.f("alpha") : 1.0;
  if (Op == BinaryOp::kAdd || Op == BinaryOp::kSub) check_scalar(alpha, compute, "alpha", c);
  launch_binary(Op, compute, layout_of<3>(c.outputs[0], {&c.inputs[0], &c.inputs[1]}, "binary"), alpha,
                exec_for(c.device));
}
void where_kernel(const KernelContext& c) {
  launch_where(c.outputs[0].dtype,
               layout_of<4>(c.outputs[0], {&c.inputs[0], &c.inputs[1], &c.inputs[2]}, "where"),
               exec_for(c.device));
}
template <ScalarOp Op>
void tensor_scalar(const KernelContext& c) {
  DType compute = promoted_with_scalar(c);
  if constexpr (Op == ScalarOp::kDiv) {
    compute = true_division(compute);
    check_floating(compute, c);
  }
  const double other = c.attrs.f("other");
  check_scalar(other, compute, "scalar", c);
  launch_scalar(Op, compute, layout_of<2>(c.outputs[0], {&c.inputs[0]}, "scalar"), other, exec_for(c.device));
}

}  // namespace

void register_elementwise_kernels() {
  const auto bind = [](std::string_view name, KernelFn fn) { set_cuda_kernel(name, fn, /*emulatable=*/true); };
  bind("clone", clone_kernel);
  bind("to_dtype", clone_kernel);
  bind("copy_", copy_kernel);
  bind("fill_", fill_kernel);
  bind("full", full_kernel);
  bind("arange", arange_kernel);
  bind("rand", rand_kernel);
  bind("randn", randn_kernel);
  bind("randint", randint_kernel);

  bind("neg", unary_numeric<UnaryOp::kNeg>);
  bind("neg_", unary_numeric<UnaryOp::kNeg>);
  bind("abs", unary_numeric<UnaryOp::kAbs>);
  bind("relu", unary_numeric<UnaryOp::kRelu>);
  bind("relu_", unary_numeric<UnaryOp::kRelu>);
  bind("clamp", clamp_kernel);
  bind("clamp_", clamp_kernel);
  bind("exp", unary_floating<UnaryOp::kExp>);
  bind("exp_", unary_floating<UnaryOp::kExp>);
  bind("log", unary_floating<UnaryOp::kLog>);
  bind("sqrt", unary_floating<UnaryOp::kSqrt>);
  bind("sqrt_", unary_floating<UnaryOp::kSqrt>);
  bind("rsqrt", unary_floating<UnaryOp::kRsqrt>);
  bind("tanh", unary_floating<UnaryOp::kTanh>);
  bind("tanh_", unary_floating<UnaryOp::kTanh>);
  bind("sigmoid", unary_floating<UnaryOp::kSigmoid>);
  bind("sigmoid_", unary_floating<UnaryOp::kSigmoid>);
  bind("reciprocal", unary_floating<UnaryOp::kReciprocal>);
  bind("silu", unary_floating<UnaryOp::kSilu>);
  bind("gelu", gelu_kernel);
  bind("sin", unary_floating<UnaryOp::kSin>);
  bind("cos", unary_floating<UnaryOp::kCos>);
  bind("erf", unary_floating<UnaryOp::kErf>);
  bind("relu_backward", backward_floating<BinaryOp::kReluBackward>);
  bind("sigmoid_backward", backward_floating<BinaryOp::kSigmoidBackward>);
  bind("tanh_backward", backward_floating<BinaryOp::kTanhBackward>);
  bind("abs_backward", backward_floating<BinaryOp::kAbsBackward>);
  bind("silu_backward", backward_floating<BinaryOp::kSiluBackward>);
  bind("gelu_backward", gelu_backward_kernel);

  bind("add", tensor_tensor<BinaryOp::kAdd>);
  bind("add_", tensor_tensor<BinaryOp::kAdd>);
  bind("sub", tensor_tensor<BinaryOp::kSub>);
  bind("sub_", tensor_tensor<BinaryOp::kSub>);
  bind("mul", tensor_tensor<BinaryOp::kMul>);
  bind("mul_", tensor_tensor<BinaryOp::kMul>);
  bind("div", tensor_tensor<BinaryOp::kDiv>);
  bind("div_", tensor_tensor<BinaryOp::kDiv>);
  bind("pow", tensor_tensor<BinaryOp::kPow>);
  bind("maximum", tensor_tensor<BinaryOp::kMaximum>);
  bind("minimum", tensor_tensor<BinaryOp::kMinimum>);
  bind("eq", tensor_tensor<BinaryOp::kEq>);
  bind("ne", tensor_tensor<BinaryOp::kNe>);
  bind("lt", tensor_tensor<BinaryOp::kLt>);
  bind("le", tensor_tensor<BinaryOp::kLe>);
  bind("gt", tensor_tensor<BinaryOp::kGt>);
  bind("ge", tensor_tensor<BinaryOp::kGe>);
  bind("where", where_kernel);
  bind("add_scalar", tensor_scalar<ScalarOp::kAdd>);
  bind("add_scalar_", tensor_scalar<ScalarOp::kAdd>);
  bind("mul_scalar", tensor_scalar<ScalarOp::kMul>);
  bind("mul_scalar_", tensor_scalar<ScalarOp::kMul>);
  bind("div_scalar", tensor_scalar<ScalarOp::kDiv>);
  bind("div_scalar_", tensor_scalar<ScalarOp::kDiv>);
  bind("pow_scalar", tensor_scalar<ScalarOp::kPow>);
  bind("eq_scalar", tensor_scalar<ScalarOp::kEq>);
  bind("ne_scalar", tensor_scalar<ScalarOp::kNe>);
  bind("lt_scalar", tensor_scalar<ScalarOp::kLt>);
  bind("le_scalar", tensor_scalar<ScalarOp::kLe>);
  bind("gt_scalar", tensor_scalar<ScalarOp::kGt>);
  bind("ge_scalar", tensor_scalar<ScalarOp::kGe>);
}

}  // namespace dtr::cuda
