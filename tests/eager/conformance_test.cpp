// The op conformance harness (DESIGN.md "Testing"): every op of eager/ops.h,
// one row per case, checked against PyTorch reference values committed in
// tests/golden/golden.txt (written by tests/golden/gen_golden.py; the format
// is described there). Every case runs on every device of
// conformance_devices(); for each case and device:
//   Conformance.Float64/<case>_<device>        values and input gradients vs PyTorch, rtol 1e-10
//   Conformance.Float32/<case>_<device>        the same in float32, rtol 1e-5
//   Conformance.BudgetBitwise/<case>_<device>  forward + backward again under a tight memory
//                                              budget: bitwise equal to the unlimited run
//   ConformanceGradcheck.Float64/<case>_<device>  finite differences (differentiable cases)
//   ConformanceRandom.BudgetBitwise/<op>_<device> random ops: bitwise replay under a budget
// Gradients are those of L = sum_k sum(out_k * w_k) with the generator's weights.
// The rows of kCases mirror the generator's lambdas, name for name.
// OpRegistryCompleteness (at the end) checks that the cases reach every
// primitive row of the registry.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "core/backend.h"
#include "core/logging.h"
#include "dtr/dtr.h"
#include "second_device.h"
#include "tests/testing.h"

namespace dtr {

// Names the device in gtest's parameter listings (found by ADL).
void PrintTo(const Device& d, std::ostream* os) { *os << d.str(); }

namespace {

using Inputs = std::vector<Tensor>;
using Outputs = std::vector<Tensor>;

/// The devices every case runs on: the CPU, the test device, and the first
/// CUDA device when one is present.
std::vector<Device> conformance_devices() {
  std::vector<Device> devices = {Device(kCPU), testing::second_device()};
  if (const Backend* cuda = find_backend(kCUDA); cuda != nullptr && cuda->device_count() > 0)
    devices.push_back(Device(kCUDA));
  return devices;
}

/// Where a case runs: the run's floating dtype and the device.
struct CaseRun {
  DType dtype = kFloat64;
  Device device;
};
/// Options of a factory of the run's floating dtype on its device.
TensorOptions options(const CaseRun& r) { return TensorOptions(r.dtype).device(r.device); }

/// A case: the op call on rebuilt inputs (on the run's device).
using CaseFn = std::function<Outputs(const Inputs& x, const CaseRun& run)>;

template <typename... T>
Outputs outs(const std::tuple<T...>& t) {
  return std::apply([](const auto&... e) { return Outputs{e...}; }, t);
}

// ---------------------------------------------------------------------------- the table
// Keep in the same order and with the same names as gen_golden.py.

// In a case, `dt` are the options of a factory of the run's floating dtype
// on its device, `on` those of a factory that infers its dtype.
#define CASE(name, ...)                                                 \
  {                                                                     \
    name, [](const Inputs& x, const CaseRun& run) -> Outputs {              \
      const TensorOptions dt = options(run), on(run.device);            \
      (void)x;                                                          \
      (void)dt;                                                         \
      (void)on;                                                         \
      return __VA_ARGS__;                                               \
    }                                                                   \
  }

Outputs batch_norm_case(const Inputs& x, bool training, bool affine) {
  Tensor rm = x[1], rv = x[2];
  Tensor out = batch_norm(x[0], rm, rv, affine ? x[3] : Tensor(), affine ? x[4] : Tensor(), training,
                          0.1, 1e-5);
  // The running statistics after the call (updated in place in training).
  return {out, rm.clone(), rv.clone()};
}

const std::vector<std::pair<std::string, CaseFn>>& cases() {
  static const std::vector<std::pair<std::string, CaseFn>> table = {
      // ---- creation
      CASE("zeros", {zeros({2, 3}, dt)}),
      CASE("ones", {ones({2, 3}, dt)}),
      CASE("full", {full({2, 2}, 2.5, dt)}),
      CASE("arange_end", {arange(5, on)}),
      CASE("arange_start_step", {arange(1.0, 2.0, 0.25, dt)}),
      CASE("arange_negative_step", {arange(5, -3, -2, on)}),
      CASE("full_int_value", {full({2, 2}, 3, on)}),
      CASE("full_bool_value", {full({3}, true, on)}),
      CASE("zeros_like", {zeros_like(x[0])}),
      CASE("ones_like", {ones_like(x[0])}),
      CASE("full_like", {full_like(x[0], -1.5)}),
      // ---- unary
      CASE("neg", {neg(x[0])}),
      CASE("abs", {abs(x[0])}),
      CASE("exp", {exp(x[0])}),
      CASE("log", {log(x[0])}),
      CASE("sqrt", {sqrt(x[0])}),
      CASE("rsqrt", {rsqrt(x[0])}),
      CASE("tanh", {tanh(x[0])}),
      CASE("sigmoid", {sigmoid(x[0])}),
      CASE("relu", {relu(x[0])}),
      CASE("reciprocal", {reciprocal(x[0])}),
      CASE("gelu", {gelu(x[0])}),
      CASE("gelu_tanh", {gelu(x[0], "tanh")}),
      CASE("silu", {silu(x[0])}),
      CASE("clamp", {clamp(x[0], -0.5, 0.5)}),
      CASE("clamp_min", {clamp(x[0], -0.25, std::nullopt)}),
      CASE("clamp_max", {clamp(x[0], std::nullopt, 0.25)}),
      CASE("sin", {sin(x[0])}),
      CASE("cos", {cos(x[0])}),
      CASE("erf", {erf(x[0])}),
      CASE("sin_method", {x[0].sin()}),
      // ---- binary
      CASE("add", {add(x[0], x[1])}),
      CASE("add_alpha", {add(x[0], x[1], 2.5)}),
      CASE("add_broadcast", {add(x[0], x[1])}),
      CASE("add_scalar", {add(x[0], 1.5)}),
      CASE("add_int64", {add(x[0], x[1])}),
      CASE("sub", {sub(x[0], x[1])}),
      CASE("sub_alpha", {sub(x[0], x[1], 0.5)}),
      CASE("sub_broadcast", {sub(x[0], x[1])}),
      CASE("sub_scalar", {sub(x[0], 0.75)}),
      CASE("rsub_scalar", {2.0 - x[0]}),
      CASE("mul", {mul(x[0], x[1])}),
      CASE("mul_broadcast", {mul(x[0], x[1])}),
      CASE("mul_scalar", {mul(x[0], -3.0)}),
      CASE("mul_int64", {mul(x[0], x[1])}),
      CASE("div", {div(x[0], x[1])}),
      CASE("div_broadcast", {div(x[0], x[1])}),
      CASE("div_scalar", {div(x[0], 4.0)}),
      CASE("rdiv_scalar", {3.0 / x[0]}),
      CASE("pow", {pow(x[0], x[1])}),
      CASE("pow_broadcast", {pow(x[0], x[1])}),
      CASE("pow_scalar_2", {pow(x[0], 2.0)}),
      CASE("pow_scalar_3", {pow(x[0], 3)}),
      CASE("pow_scalar_half", {pow(x[0], 0.5)}),
      CASE("pow_scalar_neg", {pow(x[0], -1.5)}),
      CASE("maximum", {maximum(x[0], x[1])}),
      CASE("maximum_broadcast", {maximum(x[0], x[1])}),
      CASE("minimum", {minimum(x[0], x[1])}),
      CASE("minimum_broadcast", {minimum(x[0], x[1])}),
      // ---- comparisons
      CASE("eq", {eq(x[0], x[1])}),
      CASE("eq_broadcast", {eq(x[0], x[1])}),
      CASE("eq_scalar", {eq(x[0], 0.5)}),
      CASE("ne", {ne(x[0], x[1])}),
      CASE("ne_broadcast", {ne(x[0], x[1])}),
      CASE("ne_scalar", {ne(x[0], 0.5)}),
      CASE("lt", {lt(x[0], x[1])}),
      CASE("lt_broadcast", {lt(x[0], x[1])}),
      CASE("lt_scalar", {lt(x[0], 0.5)}),
      CASE("le", {le(x[0], x[1])}),
      CASE("le_broadcast", {le(x[0], x[1])}),
      CASE("le_scalar", {le(x[0], 0.5)}),
      CASE("gt", {gt(x[0], x[1])}),
      CASE("gt_broadcast", {gt(x[0], x[1])}),
      CASE("gt_scalar", {gt(x[0], 0.5)}),
      CASE("ge", {ge(x[0], x[1])}),
      CASE("ge_broadcast", {ge(x[0], x[1])}),
      CASE("ge_scalar", {ge(x[0], 0.5)}),
      // ---- where
      CASE("where", {where(x[0], x[1], x[2])}),
      CASE("where_broadcast", {where(x[0], x[1], x[2])}),
      // ---- reductions
      CASE("sum_all", {sum(x[0])}),
      CASE("sum_dim", {sum(x[0], {1})}),
      CASE("sum_dims_keepdim", {sum(x[0], {0, 2}, true)}),
      CASE("sum_negative_dim", {sum(x[0], {-1})}),
      CASE("sum_int64", {sum(x[0], {1})}),
      CASE("mean_all", {mean(x[0])}),
      CASE("mean_dim", {mean(x[0], {-1})}),
      CASE("mean_dims_keepdim", {mean(x[0], {0, 1}, true)}),
      CASE("max_all", {max(x[0])}),
      CASE("max_dim", outs(max(x[0], 1))),
      CASE("max_dim_keepdim", outs(max(x[0], -1, true))),
      CASE("argmax", {argmax(x[0], 2)}),
      CASE("argmax_keepdim", {argmax(x[0], 0, true)}),
      CASE("var_all", {var(x[0], {}, 1)}),
      CASE("var_dim", {var(x[0], {1}, 1)}),
      CASE("var_correction0_keepdim", {var(x[0], {0, 2}, 0, true)}),
      CASE("argmin", {argmin(x[0], 1)}),
      CASE("argmin_keepdim", {argmin(x[0], -1, true)}),
      CASE("argmin_method", {x[0].argmin(0)}),
      CASE("amax_all", {amax(x[0])}),
      CASE("amax_dims", {amax(x[0], {0, 2})}),
      CASE("amax_keepdim", {amax(x[0], {-1}, true)}),
      CASE("amax_int64", {amax(x[0], {1})}),
      CASE("amin_all", {amin(x[0])}),
      CASE("amin_dim", {amin(x[0], {1})}),
      CASE("amin_method_keepdim", {x[0].amin({0, 1}, true)}),
      CASE("logsumexp", {logsumexp(x[0], {1})}),
      CASE("logsumexp_keepdim", {logsumexp(x[0], {0, 2}, true)}),
      CASE("logsumexp_all", {logsumexp(x[0], {})}),
      CASE("logsumexp_large", {logsumexp(x[0], {-1})}),
      CASE("logsumexp_method", {x[0].logsumexp({0})}),
      CASE("cumsum", {cumsum(x[0], 1)}),
      CASE("cumsum_dim0", {cumsum(x[0], 0)}),
      CASE("cumsum_method_negative_dim", {x[0].cumsum(-1)}),
      CASE("cumsum_int64", {cumsum(x[0], 1)}),
      // ---- sorting
      CASE("sort", outs(sort(x[0]))),
      CASE("sort_descending_dim0", outs(sort(x[0], 0, true))),
      CASE("sort_method", outs(x[0].sort(1, true))),
      CASE("topk", outs(topk(x[0], 2))),
      CASE("topk_smallest_dim1", outs(topk(x[0], 2, 1, false))),
      CASE("topk_method", outs(x[0].topk(1, 0))),
      CASE("topk_int64", outs(topk(x[0], 2))),
      // ---- matmul / linear
      CASE("matmul_2d", {matmul(x[0], x[1])}),
      CASE("matmul_dot", {matmul(x[0], x[1])}),
      CASE("matmul_1d_2d", {matmul(x[0], x[1])}),
      CASE("matmul_2d_1d", {matmul(x[0], x[1])}),
      CASE("matmul_batched", {matmul(x[0], x[1])}),
      CASE("matmul_batched_2d", {matmul(x[0], x[1])}),
      CASE("matmul_broadcast", {matmul(x[0], x[1])}),
      CASE("matmul_1d_batched", {matmul(x[0], x[1])}),
      CASE("linear", {linear(x[0], x[1], x[2])}),
      CASE("linear_no_bias", {linear(x[0], x[1])}),
      CASE("linear_1d", {linear(x[0], x[1], x[2])}),
      // ---- softmax family and losses
      CASE("softmax", {softmax(x[0], -1)}),
      CASE("softmax_dim0", {softmax(x[0], 0)}),
      CASE("log_softmax", {log_softmax(x[0], 1)}),
      CASE("log_softmax_last", {log_softmax(x[0], -1)}),
      CASE("cross_entropy", {cross_entropy(x[0], x[1])}),
      CASE("cross_entropy_sum", {cross_entropy(x[0], x[1], {}, "sum", -100)}),
      CASE("cross_entropy_none", {cross_entropy(x[0], x[1], {}, "none", -100)}),
      CASE("cross_entropy_ignore_index", {cross_entropy(x[0], x[1], {}, Reduction::Mean, 2)}),
      CASE("cross_entropy_spatial", {cross_entropy(x[0], x[1])}),
      CASE("nll_loss", {nll_loss(x[0], x[1])}),
      CASE("nll_loss_sum", {nll_loss(x[0], x[1], {}, "sum", -100)}),
      CASE("nll_loss_none", {nll_loss(x[0], x[1], {}, "none", 2)}),
      CASE("mse_loss", {mse_loss(x[0], x[1])}),
      CASE("mse_loss_sum", {mse_loss(x[0], x[1], "sum")}),
      CASE("mse_loss_none", {mse_loss(x[0], x[1], "none")}),
      // ---- normalization
      CASE("layer_norm", {layer_norm(x[0], {4}, x[1], x[2])}),
      CASE("layer_norm_2d_no_affine", {layer_norm(x[0], {3, 4})}),
      CASE("layer_norm_eps", {layer_norm(x[0], {4}, x[1], x[2], 0.1)}),
      CASE("rms_norm", {rms_norm(x[0], {4}, x[1], 1e-5)}),
      CASE("rms_norm_default_eps", {rms_norm(x[0], {3, 4})}),
      CASE("batch_norm_train", batch_norm_case(x, true, true)),
      CASE("batch_norm_eval", batch_norm_case(x, false, true)),
      CASE("batch_norm_train_2d_no_affine", batch_norm_case(x, true, false)),
      // ---- embedding, dropout in its deterministic settings
      CASE("embedding", {embedding(x[0], x[1])}),
      CASE("dropout_eval", {dropout(x[0], 0.5, false)}),
      CASE("dropout_p0", {dropout(x[0], 0.0, true)}),
      CASE("one_hot", {one_hot(x[0])}),
      CASE("one_hot_num_classes", {one_hot(x[0], 6)}),
      // ---- convolution and pooling
      CASE("conv2d", {conv2d(x[0], x[1], x[2])}),
      CASE("conv2d_stride_padding", {conv2d(x[0], x[1], x[2], {2, 2}, {1, 1})}),
      CASE("conv2d_dilation", {conv2d(x[0], x[1], Tensor(), {1, 1}, {0, 0}, {2, 2})}),
      CASE("conv2d_groups", {conv2d(x[0], x[1], x[2], {1, 1}, {1, 1}, {1, 1}, 2)}),
      CASE("conv2d_rect", {conv2d(x[0], x[1], x[2], {2, 1}, {0, 1})}),
      CASE("conv2d_depthwise", {conv2d(x[0], x[1], Tensor(), {1, 1}, {0, 0}, {1, 1}, 3)}),
      CASE("max_pool2d", {max_pool2d(x[0], {2, 2})}),
      CASE("max_pool2d_stride_padding", {max_pool2d(x[0], {3, 3}, {2, 2}, {1, 1})}),
      CASE("max_pool2d_rect", {max_pool2d(x[0], {2, 3}, {1, 2})}),
      CASE("avg_pool2d", {avg_pool2d(x[0], {2, 2})}),
      CASE("avg_pool2d_stride_padding", {avg_pool2d(x[0], {3, 3}, {2, 2}, {1, 1})}),
      CASE("adaptive_avg_pool2d", {adaptive_avg_pool2d(x[0], {2, 3})}),
      CASE("adaptive_avg_pool2d_global", {adaptive_avg_pool2d(x[0], {1, 1})}),
      // ---- vision: transposed convolution, group norm, padding, resampling, dropout2d
      CASE("conv_transpose2d", {conv_transpose2d(x[0], x[1], x[2])}),
      CASE("conv_transpose2d_stride_padding", {conv_transpose2d(x[0], x[1], x[2], {2}, {1}, {1})}),
      CASE("conv_transpose2d_groups_dilation",
           {conv_transpose2d(x[0], x[1], Tensor(), {1}, {0}, {0}, 2, {2})}),
      CASE("conv_transpose2d_rect", {conv_transpose2d(x[0], x[1], x[2], {2, 1}, {0, 1}, {1, 0})}),
      CASE("conv_transpose2d_output_padding_dilation",
           {conv_transpose2d(x[0], x[1], Tensor(), {1}, {0}, {1}, 1, {2})}),
      CASE("group_norm", {group_norm(x[0], 2, x[1], x[2])}),
      CASE("group_norm_3d_no_affine", {group_norm(x[0], 3)}),
      CASE("group_norm_one_group_eps", {group_norm(x[0], 1, x[1], x[2], 0.1)}),
      CASE("group_norm_per_channel", {group_norm(x[0], 3, x[1])}),
      CASE("pad_constant", {pad(x[0], {1, 2})}),
      CASE("pad_constant_value_2d", {pad(x[0], {1, 0, 2, 1}, "constant", 1.5)}),
      CASE("pad_constant_negative", {pad(x[0], {-1, 1, 0, -1})}),
      CASE("pad_constant_3dims", {pad(x[0], {1, 1, 1, 1, 1, 0})}),
      CASE("pad_reflect_1d", {pad(x[0], {2, 3}, "reflect")}),
      CASE("pad_reflect_2d", {pad(x[0], {1, 2, 2, 1}, "reflect")}),
      CASE("pad_reflect_2d_unbatched", {pad(x[0], {3, 0, 0, 2}, "reflect")}),
      CASE("interpolate_nearest_size", {interpolate(x[0], {5, 7})}),
      CASE("interpolate_nearest_scale", {interpolate(x[0], {}, {2.0})}),
      CASE("interpolate_nearest_scale_fraction", {interpolate(x[0], {}, {1.5, 0.5})}),
      CASE("interpolate_nearest_down", {interpolate(x[0], {2, 3})}),
      CASE("interpolate_bilinear", {interpolate(x[0], {5, 7}, {}, "bilinear", false)}),
      CASE("interpolate_bilinear_align_corners", {interpolate(x[0], {5, 7}, {}, "bilinear", true)}),
      CASE("interpolate_bilinear_scale", {interpolate(x[0], {}, {1.7}, "bilinear")}),
      CASE("interpolate_bilinear_down", {interpolate(x[0], {2, 3}, {}, "bilinear")}),
      CASE("dropout2d_eval", {dropout2d(x[0], 0.5, false)}),
      CASE("dropout2d_p0", {dropout2d(x[0], 0.0, true)}),
      // ---- views
      CASE("view", {view(x[0], {6, 4})}),
      CASE("view_infer", {view(x[0], {4, -1})}),
      CASE("reshape_noncontiguous", {reshape(transpose(x[0], 0, 2), {-1, 6})}),
      CASE("transpose", {transpose(x[0], 0, 2)}),
      CASE("permute", {permute(x[0], {2, 0, 1})}),
      CASE("slice", {slice(x[0], 1, 1, 3)}),
      CASE("slice_step", {slice(x[0], 2, 1, std::nullopt, 2)}),
      CASE("slice_negative_start", {slice(x[0], 1, -2, std::nullopt)}),
      CASE("slice_end_past_size", {slice(x[0], 2, 1, 100)}),
      CASE("narrow", {narrow(x[0], 2, 1, 2)}),
      CASE("select", {select(x[0], 1, 1)}),
      CASE("select_negative", {select(x[0], 2, -1)}),
      CASE("unsqueeze", {unsqueeze(x[0], 1)}),
      CASE("unsqueeze_last", {unsqueeze(x[0], -1)}),
      CASE("squeeze", {squeeze(x[0])}),
      CASE("squeeze_dim", {squeeze(x[0], 1)}),
      CASE("expand", {expand(x[0], {2, 3, 4})}),
      CASE("flatten", {flatten(x[0], 1)}),
      CASE("flatten_all", {flatten(x[0])}),
      CASE("contiguous", {contiguous(transpose(x[0], 1, 2))}),
      CASE("view_chain",
           {mul(unsqueeze(slice(slice(permute(x[0], {1, 0, 2}), 0, 1, std::nullopt), 2, std::nullopt,
                                std::nullopt, 3),
                          0),
                2.0)}),
      // ---- joining and indexing
      CASE("cat", {cat({x[0], x[1], x[2]}, 0)}),
      CASE("cat_dim1", {cat({x[0], x[1]}, 1)}),
      CASE("cat_negative_dim", {cat({x[0], x[1]}, -1)}),
      CASE("stack", {stack({x[0], x[1]}, 0)}),
      CASE("stack_dim1", {stack({x[0], x[1], x[2]}, 1)}),
      CASE("split", split(x[0], 2, 0)),
      CASE("split_dim1", split(x[0], 3, 1)),
      CASE("chunk", chunk(x[0], 3, 1)),
      CASE("chunk_even", chunk(x[0], 3, 0)),
      CASE("index_select", {index_select(x[0], 0, x[1])}),
      CASE("index_select_dim1", {index_select(x[0], 1, x[1])}),
      CASE("gather", {gather(x[0], 1, x[1])}),
      CASE("gather_dim0", {gather(x[0], 0, x[1])}),
      CASE("masked_fill", {masked_fill(x[0], x[1], -2.0)}),
      CASE("masked_fill_broadcast", {masked_fill(x[0], x[1], 3.5)}),
      CASE("tril", {tril(x[0])}),
      CASE("tril_diagonal", {tril(x[0], -1)}),
      CASE("triu", {triu(x[0])}),
      CASE("triu_diagonal", {triu(x[0], 2)}),
      CASE("tril_batched", {tril(x[0])}),
      // ---- reordering, tiling, accumulating scatters
      CASE("flip", {flip(x[0], {0, 2})}),
      CASE("flip_negative_dim", {x[0].flip({-1})}),
      CASE("roll", {roll(x[0], {1, -2}, {0, 2})}),
      CASE("roll_flattened", {x[0].roll({5})}),
      CASE("roll_past_size", {roll(x[0], {7}, {1})}),
      CASE("repeat", {x[0].repeat({2, 1, 3})}),
      CASE("repeat_ones", {repeat(x[0], {1, 1})}),
      CASE("repeat_interleave", {repeat_interleave(x[0], 2, 1)}),
      CASE("repeat_interleave_flat", {x[0].repeat_interleave(3)}),
      CASE("repeat_interleave_tensor", {repeat_interleave(x[0], x[1], 0)}),
      CASE("repeat_interleave_gqa", {repeat_interleave(x[0], 2, 1)}),
      CASE("scatter_add", {scatter_add(x[0], 0, x[1], x[2])}),
      CASE("scatter_add_dim1", {x[0].scatter_add(1, x[1], x[2])}),
      CASE("scatter_add_", {x[0].clone().scatter_add_(1, x[1], x[2])}),
      CASE("index_add", {index_add(x[0], 0, x[1], x[2])}),
      CASE("index_add_alpha_dim1", {x[0].index_add(1, x[1], x[2], -1.5)}),
      CASE("index_add_", {x[0].clone().index_add_(0, x[1], x[2], 2.0)}),
      // ---- einsum
      CASE("einsum_matmul", {einsum("ij,jk->ik", {x[0], x[1]})}),
      CASE("einsum_bmm", {einsum("bij,bjk->bik", {x[0], x[1]})}),
      CASE("einsum_attention_scores", {einsum("bhqd,bhkd->bhqk", {x[0], x[1]})}),
      CASE("einsum_attention_values", {einsum("bhqk,bhkd->bhqd", {x[0], x[1]})}),
      CASE("einsum_dot", {einsum("i,i->", {x[0], x[1]})}),
      CASE("einsum_transpose", {einsum("ij->ji", {x[0]})}),
      CASE("einsum_diagonal", {einsum("ii->i", {x[0]})}),
      CASE("einsum_sum_all", {einsum("ij->", {x[0]})}),
      CASE("einsum_implicit", {einsum("ji,kj", {x[0], x[1]})}),
      CASE("einsum_outer", {einsum("i,j->ij", {x[0], x[1]})}),
      CASE("einsum_ellipsis", {einsum("...ij,...jk->...ik", {x[0], x[1]})}),
      CASE("einsum_broadcast_batch", {einsum("bij,bjk->bik", {x[0], x[1]})}),
      CASE("einsum_trace", {einsum("ii", {x[0]})}),
      // ---- attention
      CASE("sdpa", {scaled_dot_product_attention(x[0], x[1], x[2])}),
      CASE("sdpa_causal", {scaled_dot_product_attention(x[0], x[1], x[2], Tensor(), 0.0, true)}),
      CASE("sdpa_causal_heads", {scaled_dot_product_attention(x[0], x[1], x[2], Tensor(), 0.0, true)}),
      CASE("sdpa_scale", {scaled_dot_product_attention(x[0], x[1], x[2], Tensor(), 0.0, false, 0.3)}),
      CASE("sdpa_cross_length", {scaled_dot_product_attention(x[0], x[1], x[2])}),
      CASE("sdpa_bool_mask", {scaled_dot_product_attention(x[0], x[1], x[2], x[3])}),
      CASE("sdpa_float_mask", {scaled_dot_product_attention(x[0], x[1], x[2], x[3])}),
      // ---- rows long enough for the vectorized float32 paths
      CASE("exp_long", {exp(x[0])}),
      CASE("tanh_long", {tanh(x[0])}),
      CASE("gelu_long", {gelu(x[0])}),
      CASE("sigmoid_long", {sigmoid(x[0])}),
      CASE("mul_broadcast_long", {mul(x[0], x[1])}),
      CASE("sum_long", {sum(x[0], {1})}),
      CASE("softmax_long", {softmax(x[0], -1)}),
      CASE("log_softmax_long", {log_softmax(x[0], -1)}),
      CASE("layer_norm_long", {layer_norm(x[0], {131}, x[1], x[2])}),
      // ---- in-place forms (on a clone, so the leaf keeps its gradient) and copies
      CASE("neg_", {x[0].clone().neg_()}),
      CASE("exp_", {x[0].clone().exp_()}),
      CASE("sqrt_", {x[0].clone().sqrt_()}),
      CASE("tanh_", {x[0].clone().tanh_()}),
      CASE("sigmoid_", {x[0].clone().sigmoid_()}),
      CASE("relu_", {x[0].clone().relu_()}),
      CASE("clamp_", {x[0].clone().clamp_(-0.5, 0.5)}),
      CASE("add_", {x[0].clone().add_(x[1], 2)}),
      CASE("sub_", {x[0].clone().sub_(x[1], 0.5)}),
      CASE("mul_", {x[0].clone().mul_(x[1])}),
      CASE("div_", {x[0].clone().div_(x[1])}),
      CASE("add_scalar_", {x[0].clone().add_(1.5)}),
      CASE("mul_scalar_", {x[0].clone().mul_(-2.0)}),
      CASE("div_scalar_", {x[0].clone().div_(4.0)}),
      CASE("masked_fill_", {x[0].clone().masked_fill_(x[1], -1.0)}),
      CASE("copy_", {zeros({3, 4}, dt).copy_(x[0])}),
      CASE("fill_", {x[0].clone().fill_(2.5)}),
      CASE("to_int64", {x[0].to(kInt64)}),
  };
  return table;
}

#undef CASE

const CaseFn* find_case(const std::string& name) {
  for (const auto& [n, fn] : cases())
    if (n == name) return &fn;
  return nullptr;
}

// ---------------------------------------------------------------------------- the fixture

struct InputSpec {
  char kind = 'f';  // f, q: float formula; i: int64; b: bool
  bool requires_grad = false;
  Shape shape;
  std::vector<double> values;  // host values (formula evaluated here for f, q)
  double checksum = 0;         // generator's left-to-right sum (f, q)
};

struct OutputSpec {
  char kind = 'f';  // f: the run's floating dtype; i: int64; b: bool
  Shape shape;
  std::vector<double> values;
};

struct GradSpec {
  size_t input = 0;
  bool none = false;  // PyTorch returned no gradient (input unused)
  std::vector<double> values;
};

struct GoldenCase {
  std::vector<InputSpec> inputs;
  std::vector<OutputSpec> outputs;
  std::vector<GradSpec> grads;
  bool differentiable() const { return !grads.empty(); }
};

struct Fixture {
  std::map<std::string, GoldenCase> cases;
  std::vector<std::string> order;
  std::string error;  // non-empty when the file could not be read or parsed
  uintmax_t bytes = 0;
};

std::filesystem::path fixture_path() {
  if (const char* env = std::getenv("DTR_GOLDEN_FILE")) return env;
  // From CMake, not __FILE__: a compiler launcher may rewrite source paths
  // relative to the build folder (ccache's base_dir), and a relative path
  // would only resolve from there.
  return DTR_TEST_GOLDEN_PATH;
}

Shape read_shape(std::istringstream& in) {
  int64_t ndim = 0;
  in >> ndim;
  Shape s;
  for (int64_t d = 0; d < ndim; ++d) {
    int64_t n = 0;
    in >> n;
    s.push_back(n);
  }
  return s;
}

std::vector<double> read_values(std::istringstream& in) {
  std::vector<double> v;
  std::string tok;
  while (in >> tok) v.push_back(std::strtod(tok.c_str(), nullptr));
  return v;
}

/// The generator's input formulas, evaluated in the same order of double operations.
std::vector<double> formula(char kind, int64_t n, double phase, double scale, double shift) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const double s = std::sin(0.37 * double(i) + phase);
    v[size_t(i)] = kind == 'q' ? std::floor(2.0 * s + 0.5) / 2.0 : shift + scale * s;
  }
  return v;
}

const Fixture& fixture() {
  static const Fixture fx = [] {
    Fixture f;
    const auto path = fixture_path();
    std::ifstream file(path);
    if (!file) {
      f.error = "cannot open " + path.string();
      return f;
    }
    f.bytes = std::filesystem::file_size(path);
    std::string line, current;
    GoldenCase gc;
    int line_no = 0;
    while (std::getline(file, line)) {
      ++line_no;
      if (line.empty() || line[0] == '#') continue;
      std::istringstream in(line);
      std::string tag;
      in >> tag;
      if (tag == "case") {
        in >> current;
        gc = GoldenCase{};
      } else if (tag == "input") {
        InputSpec s;
        in >> s.kind;
        if (s.kind == 'f' || s.kind == 'q') {
          double phase = 0, scale = 1, shift = 0;
          int rg = 0;
          in >> phase >> scale >> shift >> rg;
          s.requires_grad = rg != 0;
          s.shape = read_shape(in);
          in >> s.checksum;
          s.values = formula(s.kind, numel(s.shape), phase, scale, shift);
        } else {
          s.shape = read_shape(in);
          s.values = read_values(in);
        }
        gc.inputs.push_back(std::move(s));
      } else if (tag == "output") {
        OutputSpec o;
        in >> o.kind;
        o.shape = read_shape(in);
        o.values = read_values(in);
        gc.outputs.push_back(std::move(o));
      } else if (tag == "grad") {
        GradSpec g;
        std::string rest;
        in >> g.input;
        if (in >> rest && rest == "none") {
          g.none = true;
        } else {
          g.values.push_back(std::strtod(rest.c_str(), nullptr));
          for (double v : read_values(in)) g.values.push_back(v);
        }
        gc.grads.push_back(std::move(g));
      } else if (tag == "end") {
        f.order.push_back(current);
        f.cases[current] = std::move(gc);
        gc = GoldenCase{};
      } else {
        f.error = "line " + std::to_string(line_no) + ": unknown record '" + tag + "'";
        return f;
      }
    }
    return f;
  }();
  return fx;
}

const GoldenCase* golden(const std::string& name) {
  const auto& cs = fixture().cases;
  const auto it = cs.find(name);
  return it == cs.end() ? nullptr : &it->second;
}

// ---------------------------------------------------------------------------- running a case

/// Host values moved to `device` (a leaf there: before any requires_grad).
Tensor on_device(Tensor t, Device device) {
  return t.device() == device ? t : t.to(device);
}

Tensor make_input(const InputSpec& s, const CaseRun& run) {
  switch (s.kind) {
    case 'i': {
      std::vector<int64_t> v(s.values.begin(), s.values.end());
      return on_device(from_vector(v, s.shape), run.device);
    }
    case 'b': {
      std::vector<bool> v;
      for (double e : s.values) v.push_back(e != 0);
      return on_device(from_vector(v, s.shape), run.device);
    }
    default: {
      Tensor t;
      if (run.dtype == kFloat64) {
        t = from_vector(s.values, s.shape);
      } else {
        t = from_vector(std::vector<float>(s.values.begin(), s.values.end()), s.shape);
      }
      t = on_device(std::move(t), run.device);
      if (s.requires_grad) t.requires_grad_();
      return t;
    }
  }
}

/// The generator's weights w[i] = 0.5 + 0.37 * ((i * 7919) % 13) / 13.
Tensor weights(const Shape& shape, DType dt, Device device) {
  std::vector<double> w(size_t(numel(shape)));
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.5 + 0.37 * double((i * 7919) % 13) / 13.0;
  if (dt == kFloat64) return on_device(from_vector(w, shape), device);
  return on_device(from_vector(std::vector<float>(w.begin(), w.end()), shape), device);
}

struct Result {
  Outputs outputs;
  std::vector<Tensor> grads;  // one per input; undefined where none
};

/// Builds the inputs, runs the case, and back-propagates L = sum_k sum(out_k * w_k)
/// over the floating outputs that require grad. With `evictable_inputs` the op
/// sees clones of the leaves, so its inputs have lineage and may be evicted.
/// `after_forward`, when given, runs between the forward and the backward.
Result run_case(const CaseFn& fn, const GoldenCase& gc, const CaseRun& run, bool evictable_inputs = false,
                const std::function<void()>& after_forward = {}) {
  Inputs leaves, args;
  for (const auto& s : gc.inputs) leaves.push_back(make_input(s, run));
  for (const auto& t : leaves) args.push_back(evictable_inputs ? t.clone() : t);
  Result r;
  r.outputs = fn(args, run);
  args.clear();
  if (after_forward) after_forward();
  Tensor loss;
  for (const auto& o : r.outputs) {
    if (!o.defined() || !o.is_floating_point() || !o.requires_grad()) continue;
    Tensor term = sum(mul(o, weights(o.shape(), o.dtype(), o.device())));
    loss = loss.defined() ? add(loss, term) : term;
  }
  if (loss.defined()) loss.backward();
  for (const auto& t : leaves) r.grads.push_back(t.requires_grad() ? t.grad() : Tensor());
  return r;
}

struct Tolerance {
  double rtol, atol;
};

Tolerance tolerance(DType dt) { return dt == kFloat64 ? Tolerance{1e-10, 1e-12} : Tolerance{1e-5, 1e-6}; }

::testing::AssertionResult matches(const std::string& what, const Tensor& t, char kind, const Shape& shape,
                                   const std::vector<double>& expected, DType dt) {
  if (!t.defined()) return ::testing::AssertionFailure() << what << " is undefined";
  const DType want = kind == 'f' ? dt : kind == 'i' ? kInt64 : kBool;
  if (t.dtype() != want || t.shape() != shape)
    return ::testing::AssertionFailure() << what << ": got " << t.str() << ", expected shape "
                                         << shape_str(shape) << " dtype " << dtype_name(want);
  const std::vector<double> got = t.to_vector<double>();
  double scale = 1;
  for (double e : expected)
    if (std::isfinite(e)) scale = std::max(scale, std::abs(e));
  const Tolerance tol = kind == 'f' ? tolerance(dt) : Tolerance{0, 0};
  for (size_t i = 0; i < got.size(); ++i) {
    const double e = expected[i];
    const bool same_special = (std::isnan(e) && std::isnan(got[i])) || (std::isinf(e) && got[i] == e);
    if (!same_special && !(std::abs(got[i] - e) <= tol.atol * scale + tol.rtol * std::abs(e)))
      return ::testing::AssertionFailure()
             << what << " element " << i << " of " << got.size() << ": got " << got[i] << ", PyTorch "
             << e << " (diff " << got[i] - e << ", shape " << shape_str(shape) << ")";
  }
  return ::testing::AssertionSuccess();
}

void check_against_golden(const std::string& name, DType dt, Device device) {
  const CaseFn* fn = find_case(name);
  const GoldenCase* gc = golden(name);
  ASSERT_NE(fn, nullptr);
  ASSERT_TRUE(fixture().error.empty()) << fixture().error;
  ASSERT_NE(gc, nullptr) << "no fixture entry for '" << name << "': rerun tests/golden/gen_golden.py";
  for (size_t k = 0; k < gc->inputs.size(); ++k) {
    const InputSpec& s = gc->inputs[k];
    if (s.kind != 'f' && s.kind != 'q') continue;
    double sum = 0;
    for (double v : s.values) sum += v;
    ASSERT_NEAR(sum, s.checksum, 1e-12 * std::max(1.0, std::abs(s.checksum)))
        << "input " << k << " rebuilt here differs from the generator's formula";
  }
  const Result r = run_case(*fn, *gc, CaseRun{dt, device});
  ASSERT_EQ(r.outputs.size(), gc->outputs.size()) << "number of outputs";
  for (size_t k = 0; k < r.outputs.size(); ++k) {
    const OutputSpec& o = gc->outputs[k];
    EXPECT_TRUE(matches("output " + std::to_string(k), r.outputs[k], o.kind, o.shape, o.values, dt));
  }
  for (const GradSpec& g : gc->grads) {
    ASSERT_LT(g.input, r.grads.size());
    const Tensor& got = r.grads[g.input];
    const std::string what = "gradient of input " + std::to_string(g.input);
    if (g.none) {
      if (got.defined()) {
        EXPECT_TRUE(matches(what, got, 'f', gc->inputs[g.input].shape,
                            std::vector<double>(size_t(got.numel()), 0.0), dt));
      }
      continue;
    }
    EXPECT_TRUE(matches(what, got, 'f', gc->inputs[g.input].shape, g.values, dt));
  }
}

/// A host-side constant copy of `t` (never evicted), for comparisons after `t` is gone.
Tensor constant_copy(const Tensor& t) {
  if (!t.defined()) return t;
  const Shape flat{t.numel()};
  Tensor c;
  switch (t.dtype()) {
    case kFloat32: c = from_vector(t.to_vector<float>(), flat); break;
    case kFloat64: c = from_vector(t.to_vector<double>(), flat); break;
    case kInt64: c = from_vector(t.to_vector<int64_t>(), flat); break;
    case kBool: c = from_vector(t.to_vector<bool>(), flat); break;
    default: ADD_FAILURE() << "constant_copy: unexpected dtype " << dtype_name(t.dtype()); return t;
  }
  return reshape(c, t.shape());  // a view: still the constant's storage (0-d included)
}

/// Restores an unlimited budget of `device` when the scope ends, whatever happens in it.
struct UnlimitedBudgetOnExit {
  Device device;
  ~UnlimitedBudgetOnExit() { remat::set_memory_budget(device, std::nullopt); }
};

/// Evicts every evictable storage of `device`, then puts `budget` back: what
/// follows (the backward, reading results) must rematerialize what it touches.
void evict_everything(Device device, int64_t budget) {
  spdlog::logger& log = logger();
  const auto level = log.level();
  log.set_level(spdlog::level::err);  // "budget below the unevictable bytes" is expected here
  remat::set_memory_budget(device, 1);
  log.set_level(level);
  remat::set_memory_budget(device, budget);
}

// ---------------------------------------------------------------------------- the tests

std::vector<std::string> all_case_names() {
  std::vector<std::string> names;
  for (const auto& [n, fn] : cases()) names.push_back(n);
  return names;
}

std::vector<std::string> differentiable_case_names() {
  std::vector<std::string> names;
  for (const auto& [n, fn] : cases()) {
    const GoldenCase* gc = golden(n);
    if (gc != nullptr && gc->differentiable()) names.push_back(n);
  }
  return names;
}

/// A test's parameter: a case (or random op) and the device it runs on.
using CaseOnDevice = std::tuple<std::string, Device>;

/// Every name crossed with every device of conformance_devices().
auto on_every_device(const std::vector<std::string>& names) {
  return ::testing::Combine(::testing::ValuesIn(names), ::testing::ValuesIn(conformance_devices()));
}

/// "<case>_<device>", the device spelled with letters, digits and '_' ("cuda_1").
std::string param_name(const ::testing::TestParamInfo<CaseOnDevice>& info) {
  std::string device = std::get<1>(info.param).str();
  for (char& c : device)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return std::get<0>(info.param) + "_" + device;
}

TEST(ConformanceFixture, CoversEveryCaseOfTheTable) {
  const Fixture& fx = fixture();
  ASSERT_TRUE(fx.error.empty()) << fx.error;
  EXPECT_LT(fx.bytes, 500u * 1024u) << "the fixture must stay small";
  for (const auto& [n, fn] : cases()) EXPECT_TRUE(fx.cases.count(n)) << "fixture lacks case " << n;
  for (const auto& n : fx.order) EXPECT_NE(find_case(n), nullptr) << "table lacks case " << n;
  EXPECT_EQ(fx.order, all_case_names()) << "table and generator list the cases in different orders";
}

class Conformance : public ::testing::TestWithParam<CaseOnDevice> {
 protected:
  const std::string& case_name() const { return std::get<0>(GetParam()); }
  Device device() const { return std::get<1>(GetParam()); }
};

TEST_P(Conformance, Float64) { check_against_golden(case_name(), kFloat64, device()); }

TEST_P(Conformance, Float32) { check_against_golden(case_name(), kFloat32, device()); }

// Note [replay equals original]: the same forward and backward under a tight
// budget must produce bitwise the values of the unlimited run. The budget is
// the smallest of a few fractions of the unlimited run's peak that does not
// run out of memory, and everything evictable is evicted between the forward
// and the backward, so the backward and the read-back replay the lineage.
// `run(after_forward)` performs one run (random cases reseed first).
// The budget is the run's device's (Note [per-device memory]).
void check_budget_bitwise(Device device, const std::function<Result(const std::function<void()>&)>& run) {
  ASSERT_FALSE(remat::memory_budget(device).has_value()) << "an earlier test left a budget set";

  // The unlimited run, and how many bytes it needed above what was there.
  // Where the device's allocator rounds its blocks (the CUDA caching
  // allocator's 512 bytes, also the test device's), the budget bounds the
  // allocator's bytes, rounding included (Note [hard budget]), so those are
  // what is measured: a 10-byte tensor takes 512 of the budget.
  const auto counted = [device] {
    const remat::Stats s = remat::stats(device);
    return s.allocated_bytes >= 0 ? s.allocated_bytes : s.resident_bytes;
  };
  const auto peak_counted = [device] {
    const remat::Stats s = remat::stats(device);
    return s.allocated_bytes >= 0 ? s.peak_allocated_bytes : s.peak_bytes;
  };
  std::vector<Tensor> expected_outputs, expected_grads;
  int64_t needed = 0;
  {
    remat::reset_stats();
    const int64_t before = counted();
    const Result r = run({});
    needed = peak_counted() - before;
    for (const auto& t : r.outputs) expected_outputs.push_back(constant_copy(t));
    for (const auto& t : r.grads) expected_grads.push_back(constant_copy(t));
  }

  UnlimitedBudgetOnExit restore{device};
  const int64_t base = counted();
  std::optional<Result> r;
  int64_t budget = 0;
  remat::Stats st;
  for (const double fraction : {0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0}) {
    budget = base + std::max<int64_t>(1, int64_t(double(needed) * fraction));
    remat::set_memory_budget(device, budget);
    remat::reset_stats();
    try {
      r = run([&] { evict_everything(device, budget); });
      // Read everything back under the budget (may rematerialize; that can
      // need more room than the first computation did).
      for (const auto* ts : {&r->outputs, &r->grads}) {
        for (const auto& t : *ts) {
          if (t.defined()) (void)t.to_vector<double>();
        }
      }
      st = remat::stats(device);
      break;
    } catch (const OutOfMemoryError&) {
      r.reset();
    }
  }
  ASSERT_TRUE(r.has_value()) << "OutOfMemoryError even at the unlimited run's peak (" << needed << " bytes)";
  EXPECT_LE(st.peak_bytes, budget) << "Note [hard budget]";
  if (st.allocated_bytes >= 0) EXPECT_LE(st.peak_allocated_bytes, budget) << "Note [hard budget], rounding included";
  remat::set_memory_budget(device, std::nullopt);  // any later rematerialization must replay bitwise too
  ::testing::Test::RecordProperty("budget_bytes", std::to_string(budget - base) + "/" + std::to_string(needed));
  ::testing::Test::RecordProperty("evictions", std::to_string(st.evictions));
  ::testing::Test::RecordProperty("rematerializations", std::to_string(st.rematerializations));
  EXPECT_GT(st.evictions, 0) << "nothing was evicted: the check did not exercise rematerialization";
  EXPECT_GT(st.rematerializations, 0) << "nothing was rematerialized";

  ASSERT_EQ(r->outputs.size(), expected_outputs.size());
  for (size_t k = 0; k < expected_outputs.size(); ++k)
    EXPECT_TRUE(testing::bitwise_equal(r->outputs[k], expected_outputs[k])) << "output " << k;
  ASSERT_EQ(r->grads.size(), expected_grads.size());
  for (size_t k = 0; k < expected_grads.size(); ++k) {
    EXPECT_EQ(r->grads[k].defined(), expected_grads[k].defined()) << "gradient " << k;
    if (r->grads[k].defined() && expected_grads[k].defined()) {
      EXPECT_TRUE(testing::bitwise_equal(r->grads[k], expected_grads[k])) << "gradient " << k;
    }
  }
}

TEST_P(Conformance, BudgetBitwise) {
  const CaseFn* fn = find_case(case_name());
  const GoldenCase* gc = golden(case_name());
  ASSERT_NE(fn, nullptr);
  ASSERT_NE(gc, nullptr);
  check_budget_bitwise(device(), [&](const std::function<void()>& after_forward) {
    return run_case(*fn, *gc, CaseRun{kFloat32, device()}, /*evictable_inputs=*/true, after_forward);
  });
}

INSTANTIATE_TEST_SUITE_P(Ops, Conformance, on_every_device(all_case_names()), param_name);

class ConformanceGradcheck : public Conformance {};

// Finite differences in float64 on the floating outputs that require grad
// (flattened and concatenated when there are several).
TEST_P(ConformanceGradcheck, Float64) {
  const CaseFn* fn = find_case(case_name());
  const GoldenCase* gc = golden(case_name());
  ASSERT_NE(fn, nullptr);
  ASSERT_NE(gc, nullptr);
  const CaseRun run{kFloat64, device()};
  Inputs leaves;
  for (const auto& s : gc->inputs) leaves.push_back(make_input(s, run));
  std::vector<bool> use;
  for (const auto& o : (*fn)(leaves, run))
    use.push_back(o.defined() && o.is_floating_point() && o.requires_grad());
  auto f = [&](const Inputs& in) {
    const Outputs o = (*fn)(in, run);
    std::vector<Tensor> parts;
    for (size_t k = 0; k < o.size() && k < use.size(); ++k)
      if (use[k]) parts.push_back(o[k]);
    if (parts.size() == 1) return parts[0];
    for (auto& p : parts) p = flatten(p);
    return cat(parts, 0);
  };
  EXPECT_TRUE(testing::gradcheck(f, leaves));
}

INSTANTIATE_TEST_SUITE_P(Ops, ConformanceGradcheck, on_every_device(differentiable_case_names()),
                         param_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(ConformanceGradcheck);

// ---------------------------------------------------------------------------- random ops
// No PyTorch values can match Philox draws, so the random ops are checked
// only for Note [replay equals original]: rematerialized under a budget they
// must give bitwise what the unlimited run gave (the recorded (seed, offset)
// is replayed). Each run starts from the same seed.

InputSpec float_input(Shape shape, double phase) {
  InputSpec s;
  s.requires_grad = true;
  s.values = formula('f', numel(shape), phase, 1.0, 0.0);
  s.shape = std::move(shape);
  return s;
}

/// Positive floats in [0.5, 2] (probabilities up to scale), not requiring grad.
InputSpec positive_input(Shape shape, double phase) {
  InputSpec s = float_input(std::move(shape), phase);
  s.requires_grad = false;
  s.values = formula('f', numel(s.shape), phase, 0.75, 1.25);
  return s;
}

struct RandomCase {
  std::string name;
  std::vector<InputSpec> inputs;
  CaseFn fn;
};

const std::vector<RandomCase>& random_cases() {
  static const std::vector<RandomCase> table = {
      {"randn", {}, [](const Inputs&, const CaseRun& r) -> Outputs { return {randn({3, 4}, options(r))}; }},
      {"rand", {}, [](const Inputs&, const CaseRun& r) -> Outputs { return {rand({2, 5}, options(r))}; }},
      {"randint", {},
       [](const Inputs&, const CaseRun& r) -> Outputs { return {randint(-3, 7, {10}, TensorOptions(r.device))}; }},
      {"randn_like", {float_input({3, 4}, 0.5)},
       [](const Inputs& x, const CaseRun&) -> Outputs { return {randn_like(x[0])}; }},
      {"rand_like", {float_input({3, 4}, 0.6)},
       [](const Inputs& x, const CaseRun&) -> Outputs { return {rand_like(x[0])}; }},
      {"randn_in_graph", {float_input({3, 4}, 0.7)},
       [](const Inputs& x, const CaseRun& r) -> Outputs { return {mul(x[0], randn({3, 4}, options(r)))}; }},
      {"dropout_train", {float_input({4, 6}, 0.8)},
       [](const Inputs& x, const CaseRun&) -> Outputs { return {dropout(x[0], 0.3, true)}; }},
      {"multinomial", {positive_input({2, 5}, 1.2)},
       [](const Inputs& x, const CaseRun&) -> Outputs { return {multinomial(x[0], 7, true)}; }},
      {"multinomial_no_replacement", {positive_input({3, 6}, 1.3)},
       [](const Inputs& x, const CaseRun&) -> Outputs { return {x[0].multinomial(4)}; }},
      {"multinomial_1d", {positive_input({5}, 1.4)},
       [](const Inputs& x, const CaseRun&) -> Outputs { return {multinomial(x[0], 5, false)}; }},
      {"dropout2d_train", {float_input({3, 5, 2, 2}, 0.85)},
       [](const Inputs& x, const CaseRun&) -> Outputs { return {dropout2d(x[0], 0.4, true)}; }},
      {"sdpa_dropout",
       {float_input({2, 3, 4}, 0.9), float_input({2, 3, 4}, 1.0), float_input({2, 3, 5}, 1.1)},
       [](const Inputs& x, const CaseRun&) -> Outputs {
         return {scaled_dot_product_attention(x[0], x[1], x[2], Tensor(), 0.25, true)};
       }},
  };
  return table;
}

std::vector<std::string> random_case_names() {
  std::vector<std::string> names;
  for (const auto& c : random_cases()) names.push_back(c.name);
  return names;
}

class ConformanceRandom : public Conformance {};

TEST_P(ConformanceRandom, BudgetBitwise) {
  const auto& cs = random_cases();
  const auto it =
      std::find_if(cs.begin(), cs.end(), [&](const RandomCase& c) { return c.name == case_name(); });
  ASSERT_NE(it, cs.end());
  GoldenCase gc;
  gc.inputs = it->inputs;
  const RngState saved = get_rng_state();
  check_budget_bitwise(device(), [&](const std::function<void()>& after_forward) {
    manual_seed(1234);
    return run_case(it->fn, gc, CaseRun{kFloat32, device()}, /*evictable_inputs=*/true, after_forward);
  });
  set_rng_state(saved);
}

INSTANTIATE_TEST_SUITE_P(Ops, ConformanceRandom, on_every_device(random_case_names()), param_name);

// ---------------------------------------------------------------------------- completeness
// The registry against the kernels and the cases: every primitive row that
// is not a view has a CPU kernel and is reached by some case of the tables
// above (its forward or its backward, on the CPU), and no composite row has
// a kernel. Rows that tests define for themselves are named "test_...".

std::set<std::string>& reached_rows() {
  static std::set<std::string> rows;
  return rows;
}

/// The rows dispatch runs for every case of both tables, forward and backward.
std::set<std::string> rows_reached_by_cases() {
  reached_rows().clear();
  struct ObserverOff {
    ~ObserverOff() { OpRegistry::set_dispatch_observer(nullptr); }
  } off;
  OpRegistry::set_dispatch_observer([](const OpDef& op) { reached_rows().insert(op.name); });
  for (const Device device : conformance_devices()) {
    const CaseRun run{kFloat64, device};
    for (const auto& [name, fn] : cases()) {
      if (const GoldenCase* gc = golden(name)) (void)run_case(fn, *gc, run);
    }
    for (const RandomCase& c : random_cases()) {
      GoldenCase gc;
      gc.inputs = c.inputs;
      (void)run_case(c.fn, gc, run);
    }
  }
  return reached_rows();
}

TEST(OpRegistryCompleteness, EveryPrimitiveRowHasACpuKernelAndAConformanceCase) {
  ASSERT_TRUE(fixture().error.empty()) << fixture().error;
  ASSERT_TRUE(OpRegistry::check_attrs_enabled()) << "the observer sees rows only while checking";
  const std::set<std::string> reached = rows_reached_by_cases();
  size_t primitive = 0;
  for (const auto& row : OpRegistry::instance().ops()) {
    const OpDef& d = *row;
    if (d.name.starts_with("test_")) continue;
    const bool has_cpu_kernel = d.kernels[size_t(kCPU)] != nullptr;
    if (d.kind == OpKind::kComposite) {
      for (size_t t = 0; t < d.kernels.size(); ++t)
        EXPECT_EQ(d.kernels[t], nullptr) << d.name << ": a composite row has a kernel";
      continue;
    }
    if (d.flags.view) {
      EXPECT_FALSE(has_cpu_kernel) << d.name << ": a view row has a kernel dispatch never calls";
      continue;
    }
    // Collective rows exist once a process group has been made (this binary's
    // distributed tests make a world of one); tests/distributed/*_mpitest.cpp
    // check them across ranks.
    if (d.flags.collective) continue;
    if (d.flags.cross_device) {  // the backends' copies (Note [cross-device copies])
      EXPECT_FALSE(has_cpu_kernel) << d.name << ": a cross-device row has a kernel dispatch never calls";
      EXPECT_TRUE(reached.contains(d.name)) << d.name << ": no case on a second device reaches it";
      continue;
    }
    ++primitive;
    EXPECT_TRUE(has_cpu_kernel) << d.name << ": a primitive row without a CPU kernel";
    EXPECT_TRUE(reached.contains(d.name))
        << d.name << ": no conformance case reaches this row; add one to cases() (and gen_golden.py)";
  }
  EXPECT_GT(primitive, 100u);
  for (const std::string& name : reached)
    EXPECT_NE(OpRegistry::instance().find(name), nullptr) << name;
}

}  // namespace
}  // namespace dtr
