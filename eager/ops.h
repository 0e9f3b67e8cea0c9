// The free op functions of the public API (DESIGN.md "Public C++ API").
// Names, arguments and semantics follow PyTorch (torch.* / torch.nn.functional.*);
// each op's row in the registry lives in eager/ops/<family>.cpp next to its
// backward rule. Every function throws ValueError / TypeError / IndexError
// naming the op, shapes and dtypes on bad input.
#pragma once

#include <functional>
#include <initializer_list>
#include <optional>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include "eager/reduction.h"
#include "eager/tensor.h"

namespace dtr {

// ---- creation (eager/ops/creation.cpp) ----------------------------------------
// A dtype given in opts always wins; without one, each factory picks PyTorch's
// default (noted below). Shapes with a negative size or 2^60 elements or more
// throw ValueError naming the shape.
/// torch.empty / torch.zeros / torch.ones; float32 by default. (empty fills
/// with zeros: its bytes must be reproducible on replay.)
Tensor empty(IntList shape, TensorOptions opts = {});
Tensor zeros(IntList shape, TensorOptions opts = {});
Tensor ones(IntList shape, TensorOptions opts = {});
/// torch.full; by default the dtype follows `value`: bool → bool, integer →
/// int64, floating → float32. Integer values are exact in int64.
Tensor full(IntList shape, Scalar value, TensorOptions opts = {});
/// torch.arange: [start, end) by step, ceil((end - start) / step) elements.
/// By default int64 when start, end and step are all integers, else float32
/// (arange(0, 1, 0.25) = float32 [0, 0.25, 0.5, 0.75]). ValueError for a zero
/// step, a step of the wrong sign or a non-finite bound.
Tensor arange(Scalar end, TensorOptions opts = {});
Tensor arange(Scalar start, Scalar end, Scalar step = 1, TensorOptions opts = {});
/// Uniform [0, 1) from Philox at the global (seed, offset) (torch.rand);
/// float32 by default, TypeError for a non-floating dtype.
Tensor rand(IntList shape, TensorOptions opts = {});
/// Standard normal (torch.randn); float32 by default, TypeError for a non-floating dtype.
Tensor randn(IntList shape, TensorOptions opts = {});
/// Integers uniform in [low, high) (torch.randint); int64 by default.
/// ValueError unless low < high.
Tensor randint(int64_t low, int64_t high, IntList shape, TensorOptions opts = {});
// The *_like forms take t's shape, dtype and device (torch.zeros_like, ...).
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor empty_like(const Tensor& t);
Tensor full_like(const Tensor& t, Scalar value);
Tensor randn_like(const Tensor& t);
Tensor rand_like(const Tensor& t);
/// Copies `values` into a new tensor of `shape` (default: 1-D), a constant
/// (never evicted); the dtype is T's unless opts give one (torch.tensor).
/// Throws ValueError when the element count does not match.
template <typename T>
Tensor from_vector(const std::vector<T>& values, IntList shape = {}, TensorOptions opts = dtype_of<T>());
/// torch.from_blob: wraps `data` (not copied, not owned) as a tensor of
/// `shape` and `dtype`, row-major or with `strides` (in elements, >= 0);
/// `data` must outlive every use. The tensor aliases the buffer, as in
/// PyTorch: a later write to the buffer is seen by the tensor, and an
/// in-place op on the tensor writes into the buffer.
///
/// Rule under a budget (Note [borrowed storage]): lineage never reads a
/// borrowed buffer again, because the program may refill it. The result of
/// every op that reads the tensor (or a view of it) directly is pinned as a
/// constant holding the value computed when the op ran: it is never evicted
/// and counts against the budget; everything computed from it is evictable
/// and rebuilt from it, never from the buffer. So refilling a staging
/// buffer changes no value computed before. (Autograd saves the tensor
/// itself, as PyTorch does: a backward run after a refill reads the new bytes.)
///
/// Throws ValueError for a negative size or stride, a span (1 + sum of
/// (size - 1) * stride elements) whose byte size overflows int64 or the
/// address space, a null `data` unless the tensor is empty (numel 0, as in
/// PyTorch), or `data` not aligned to the dtype's item size (naming the
/// pointer, the dtype and the alignment). A span larger than the real
/// buffer cannot be detected.
Tensor from_blob(void* data, IntList shape, DType dtype, Device device = Device());
Tensor from_blob(void* data, IntList shape, IntList strides, DType dtype, Device device = Device());
/// torch::from_blob with a deleter: as above, but the tensor owns the
/// buffer: `deleter(data)` runs exactly once, on whichever thread drops the
/// last tensor (or view, or lineage reference) on the storage. When
/// from_blob throws (the errors above, ValueError for an empty deleter,
/// DeviceError for a device that does not exist) the deleter is not called
/// and the buffer stays the caller's.
Tensor from_blob(void* data, IntList shape, IntList strides, std::function<void(void*)> deleter,
                 DType dtype, Device device = Device());

/// torch::tensor: a new constant tensor holding `values` (a scalar, a braced
/// list, or a list of equal-length lists for a matrix). Without a dtype in
/// opts: float32 for floating values, int64 for integers, bool for bools
/// (libtorch's rule). ValueError for ragged rows. (eager/ops/libtorch_forms.cpp)
template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T>>>
Tensor tensor(T value, TensorOptions opts = {});
template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T>>>
Tensor tensor(std::initializer_list<T> values, TensorOptions opts = {});
template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T>>>
Tensor tensor(std::initializer_list<std::initializer_list<T>> rows, TensorOptions opts = {});
template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T>>>
Tensor tensor(const std::vector<T>& values, TensorOptions opts = {});

// ---- random state (eager/random.cpp) -----------------------------------------
/// Sets the global Philox seed and resets its offset (torch.manual_seed).
void manual_seed(uint64_t seed);
RngState get_rng_state();
void set_rng_state(RngState s);

// ---- unary (eager/ops/unary.cpp) -------------------------------------------
// Elementwise, any shape and strides; the result has x's shape. Dtypes as
// PyTorch: exp, log, sqrt, rsqrt, tanh, sigmoid and reciprocal of an integer
// or bool tensor give float32; neg, abs and relu keep integer dtypes and
// throw TypeError for bool; gelu and silu throw TypeError for non-floating x.
// float16/bfloat16 compute in float32 and round. In-place forms are the
// Tensor methods neg_, exp_, sqrt_, tanh_, sigmoid_, relu_, clamp_.
Tensor neg(const Tensor& x);         // torch.neg
Tensor abs(const Tensor& x);         // torch.abs
Tensor exp(const Tensor& x);         // torch.exp
Tensor log(const Tensor& x);         // torch.log
Tensor sqrt(const Tensor& x);        // torch.sqrt
Tensor rsqrt(const Tensor& x);       // torch.rsqrt: 1 / sqrt(x)
Tensor tanh(const Tensor& x);        // torch.tanh
Tensor sigmoid(const Tensor& x);     // torch.sigmoid
Tensor relu(const Tensor& x);        // torch.relu (keeps NaN)
Tensor reciprocal(const Tensor& x);  // torch.reciprocal: 1 / x
/// torch.nn.functional.gelu; approximate: "none" (erf form) or "tanh"
/// (ValueError otherwise).
Tensor gelu(const Tensor& x, std::string_view approximate = "none");
/// torch.nn.functional.silu: x * sigmoid(x).
Tensor silu(const Tensor& x);
/// torch::leaky_relu: x where x > 0, else negative_slope * x (the gradient
/// is 1 or negative_slope; negative_slope at 0, as PyTorch). TypeError for a
/// bool tensor. A composite of gt, mul and where (eager/ops/libtorch_forms.cpp).
Tensor leaky_relu(const Tensor& x, Scalar negative_slope = 0.01);
/// torch.clamp: min(max(x, min), max); either bound may be omitted, not both
/// (ValueError). Promotes with the bounds: int tensor, float bound → float32.
Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max);

// ---- unary: trigonometric and erf (eager/ops/unary.cpp) ---------------------
// Elementwise, any shape; integer and bool inputs give float32, as PyTorch.
Tensor sin(const Tensor& x);  // torch.sin
Tensor cos(const Tensor& x);  // torch.cos
Tensor erf(const Tensor& x);  // torch.erf

// ---- binary, broadcasting, with scalar forms (eager/ops/binary.cpp) ---------
// Operands broadcast like NumPy/PyTorch (ValueError naming the op and both
// shapes otherwise). The result dtype is torch.result_type: float32 with
// float64 → float64; a 0-d tensor or a Scalar widens only across categories
// (int32 tensor + 0-d int64 → int32; int64 tensor + 2.5 → float32). div is
// true division (integers → float32); comparisons give bool. In-place forms
// are the Tensor methods add_, sub_, mul_, div_.
/// a + alpha * b (torch.add). TypeError for a floating alpha with integer tensors.
Tensor add(const Tensor& a, const Tensor& b, Scalar alpha = 1);
Tensor add(const Tensor& a, Scalar b);
/// a - alpha * b (torch.sub). TypeError for two bool tensors.
Tensor sub(const Tensor& a, const Tensor& b, Scalar alpha = 1);
Tensor sub(const Tensor& a, Scalar b);
Tensor mul(const Tensor& a, const Tensor& b);  // torch.mul
Tensor mul(const Tensor& a, Scalar b);
Tensor div(const Tensor& a, const Tensor& b);  // torch.div (true division)
Tensor div(const Tensor& a, Scalar b);
/// torch.pow. Integer tensors stay integer; an integer tensor to a negative
/// integer Scalar power throws ValueError.
Tensor pow(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, Scalar exponent);
Tensor maximum(const Tensor& a, const Tensor& b);  // torch.maximum (NaN wins)
Tensor minimum(const Tensor& a, const Tensor& b);  // torch.minimum (NaN wins)
// Comparisons (torch.eq/ne/lt/le/gt/ge): bool results, not differentiable.
Tensor eq(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, Scalar b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, Scalar b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, Scalar b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, Scalar b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, Scalar b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, Scalar b);
/// cond ? a : b elementwise, broadcasting all three (torch.where); cond must
/// be bool (TypeError); the dtype is that of a and b promoted.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);

// ---- reductions (eager/ops/reduce.cpp) ---------------------------------------
/// Empty `dims` reduces over every dimension.
Tensor sum(const Tensor& x, IntList dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, IntList dims = {}, bool keepdim = false);
/// Largest element of the whole tensor (0-d).
Tensor max(const Tensor& x);
/// (values, indices) along `dim` (torch.max(x, dim)).
std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);
/// torch::max(a, b): elementwise, = maximum(a, b).
Tensor max(const Tensor& a, const Tensor& b);
// min mirrors max (eager/ops/libtorch_forms.cpp): the whole-tensor form is
// amin (the gradient shared among ties, as PyTorch's min()), the dim form
// gives (values, int64 indices of the first minimum; NaN counts as the
// minimum) with the gradient flowing to that index only.
Tensor min(const Tensor& x);
std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim = false);
/// torch::min(a, b): elementwise, = minimum(a, b).
Tensor min(const Tensor& a, const Tensor& b);
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);
/// Index of the largest / smallest element of x flattened (torch.argmax(x)
/// with no dim): a 0-d int64. ValueError for an empty x.
Tensor argmax(const Tensor& x);
Tensor argmin(const Tensor& x);
/// Variance with Bessel's `correction` (torch.var(x, dims, correction=1)).
Tensor var(const Tensor& x, IntList dims = {}, int64_t correction = 1, bool keepdim = false);
/// Index of the smallest element along `dim`, first occurrence on ties (torch.argmin).
Tensor argmin(const Tensor& x, int64_t dim, bool keepdim = false);
/// Largest / smallest element over `dims` (torch.amax, torch.amin); the
/// gradient is shared evenly among tied extremes. IndexError for a reduced
/// dim of size 0.
Tensor amax(const Tensor& x, IntList dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, IntList dims = {}, bool keepdim = false);
/// log(sum(exp(x))) over `dims`, computed stably (torch.logsumexp); integer
/// inputs give float32.
Tensor logsumexp(const Tensor& x, IntList dims, bool keepdim = false);
/// Cumulative sum along `dim`, sequential (torch.cumsum); integer and bool
/// inputs give int64.
Tensor cumsum(const Tensor& x, int64_t dim);

// ---- sorting (eager/ops/sort.cpp) --------------------------------------------
// (values, int64 indices) along `dim`. NaN counts as the largest value; equal
// values keep the lower index first (stable), so a replay selects the same
// indices. Gradients scatter back to the indices.
/// torch.sort(x, dim, descending, stable=True).
std::tuple<Tensor, Tensor> sort(const Tensor& x, int64_t dim = -1, bool descending = false);
/// torch.topk: the k largest (smallest unless `largest`) along `dim`, in
/// sorted order. IndexError for k outside [0, size of dim].
std::tuple<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true,
                                bool sorted = true);

// ---- linear algebra (eager/ops/linalg.cpp) -----------------------------------
/// torch.matmul: 1-D/2-D/batched with broadcasting of batch dims.
Tensor matmul(const Tensor& a, const Tensor& b);
/// torch.mm: a (n, k) x b (k, m) → (n, m). ValueError unless both are 2-D
/// with matching k (naming both shapes).
Tensor mm(const Tensor& a, const Tensor& b);
/// torch.bmm: a (B, n, k) x b (B, k, m) → (B, n, m). ValueError unless both
/// are 3-D with equal B and matching k.
Tensor bmm(const Tensor& a, const Tensor& b);
/// x @ weight^T + bias; x (*, in), weight (out, in), bias (out) or undefined.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());

// ---- activations (eager/ops/loss.cpp) ---------------------------------------
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);

// ---- losses, with libtorch's signatures (torch::nll_loss, torch::mse_loss, ...) ----
// `reduction` is a LossReduction (eager/reduction.h): Reduction::Mean / Sum /
// None (libtorch's int64 codes), the tags kMean / kSum / kNone, or PyTorch's
// "mean" / "sum" / "none"; ValueError for anything else. "none" returns the
// per-element losses (the target's shape for the class-index losses). The
// unweighted class-index losses and mse_loss are registry rows
// (eager/ops/loss.cpp); the weighted and smoothed forms and the other losses
// are composites of registry ops (eager/ops/loss_functions.cpp), so they
// rematerialize and differentiate through their parts. Every loss throws
// TypeError for non-floating inputs and ValueError for mismatched shapes,
// naming the loss and the shapes.
//
/// torch::nll_loss: input (N, C), (N, C, d...) or (C) of log-probabilities;
/// target int64 (N), (N, d...) or () of class indices; loss = -w[t] x[t]
/// per element, 0 where target == ignore_index. "mean" divides the sum by
/// the sum of w[t] over the counted elements (NaN when none is). weight: C
/// class weights of input's dtype, or undefined (all 1). IndexError for a
/// target outside [0, C).
Tensor nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                LossReduction reduction = Reduction::Mean, int64_t ignore_index = -100);
/// torch::cross_entropy_loss: nll_loss(log_softmax(input, 1), ...), fused
/// when there is no weight and no smoothing. label_smoothing ε in [0, 1]
/// (ValueError otherwise) mixes in the uniform distribution: (1 - ε) nll +
/// ε/C sum_c -w_c log p_c, reduced as PyTorch 1.13 reduces it. A floating
/// target of input's shape holds class probabilities instead (loss = -sum_c
/// w_c t_c log p_c; "mean" divides by the number of samples; ignore_index
/// does not apply).
Tensor cross_entropy_loss(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                          LossReduction reduction = Reduction::Mean, int64_t ignore_index = -100,
                          double label_smoothing = 0.0);
/// torch.nn.functional.cross_entropy: the same function as cross_entropy_loss.
Tensor cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                     LossReduction reduction = Reduction::Mean, int64_t ignore_index = -100,
                     double label_smoothing = 0.0);
/// torch::mse_loss: (input - target)^2. Same shape and floating dtype required
/// (ValueError / TypeError; PyTorch would broadcast with a warning).
Tensor mse_loss(const Tensor& input, const Tensor& target,
                LossReduction reduction = Reduction::Mean);
/// torch::l1_loss: |input - target|. Shapes and dtypes as mse_loss.
Tensor l1_loss(const Tensor& input, const Tensor& target, LossReduction reduction = Reduction::Mean);
/// torch::smooth_l1_loss: 0.5 d^2 / beta where d = |input - target| < beta,
/// else d - 0.5 beta; beta = 0 is l1_loss. ValueError for beta < 0.
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target,
                      LossReduction reduction = Reduction::Mean, double beta = 1.0);
/// torch::huber_loss: 0.5 d^2 where d < delta, else delta (d - 0.5 delta).
/// ValueError for delta <= 0.
Tensor huber_loss(const Tensor& input, const Tensor& target,
                  LossReduction reduction = Reduction::Mean, double delta = 1.0);
/// torch::binary_cross_entropy: -w (t log x + (1 - t) log(1 - x)) with each
/// log clamped at -100, as PyTorch. input: probabilities in [0, 1]
/// (ValueError otherwise: this reads the values, a host sync); target of
/// input's shape; weight broadcastable to it, or undefined.
Tensor binary_cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                            LossReduction reduction = Reduction::Mean);
/// torch::binary_cross_entropy_with_logits: binary_cross_entropy of
/// sigmoid(input) computed stably, -w (p t log s(x) + (1 - t) log(1 - s(x)))
/// with p = pos_weight (broadcast along the last dim), both optional.
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const Tensor& weight = {}, const Tensor& pos_weight = {},
                                        LossReduction reduction = Reduction::Mean);
/// torch::kl_div: target (log t - input) pointwise, 0 where target is 0
/// (input: log-probabilities); with log_target, exp(t) (t - input). "mean"
/// averages over every element (libtorch's; "batchmean" is sum / N).
Tensor kl_div(const Tensor& input, const Tensor& target, LossReduction reduction = Reduction::Mean,
              bool log_target = false);

// ---- normalization (eager/ops/norm.cpp) -------------------------------------
Tensor layer_norm(const Tensor& x, IntList normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);
Tensor rms_norm(const Tensor& x, IntList normalized_shape, const Tensor& weight = Tensor(),
                std::optional<double> eps = std::nullopt);
/// torch.nn.functional.group_norm on x (N, C, *): channels split into
/// num_groups groups, each (sample, group) normalized over its C/num_groups
/// channels and spatial positions (biased variance), then scaled by weight
/// (C) and shifted by bias (C), either undefined.
Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);
/// torch.nn.functional.batch_norm on (N, C, ...). In training mode the
/// running statistics are updated in place by a separate side-effect op after
/// the pure normalization (Note [replay equals original]).
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum = 0.1,
                  double eps = 1e-5);

// ---- embedding, dropout (eager/ops/nn_functional.cpp) ------------------------
/// weight (V, D), indices int64 (*) → (*, D).
Tensor embedding(const Tensor& weight, const Tensor& indices);
/// Zeroes elements with probability p and scales the rest by 1/(1-p); mask
/// from Philox at the recorded (seed, offset).
Tensor dropout(const Tensor& x, double p = 0.5, bool training = true);
/// torch.nn.functional.one_hot: int64 indices (*) → int64 (*, num_classes);
/// -1 infers max + 1. IndexError for an index < 0 or >= num_classes.
Tensor one_hot(const Tensor& indices, int64_t num_classes = -1);
/// torch.multinomial: int64 samples from the rows of probs (C) or (R, C),
/// Philox draws at the recorded (seed, offset). ValueError for an invalid
/// distribution.
Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement = false);
/// torch.nn.functional.dropout2d: zeroes whole channels of (N, C, H, W) (or
/// (N, C, L)) with probability p, scales the rest by 1/(1-p).
Tensor dropout2d(const Tensor& x, double p = 0.5, bool training = true);

// ---- convolution and pooling (eager/ops/conv.cpp) ----------------------------
/// x (N, C_in, H, W), weight (C_out, C_in/groups, kH, kW), bias (C_out) or undefined.
Tensor conv2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
              IntList stride = {1, 1}, IntList padding = {0, 0}, IntList dilation = {1, 1},
              int64_t groups = 1);
/// x (N, C_in, H, W), weight (C_in, C_out/groups, kH, kW), bias (C_out) or
/// undefined (torch.nn.functional.conv_transpose2d, same argument order).
Tensor conv_transpose2d(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor(),
                        IntList stride = {1, 1}, IntList padding = {0, 0},
                        IntList output_padding = {0, 0}, int64_t groups = 1,
                        IntList dilation = {1, 1});
Tensor max_pool2d(const Tensor& x, IntList kernel_size, IntList stride = {},
                  IntList padding = {0, 0});
Tensor avg_pool2d(const Tensor& x, IntList kernel_size, IntList stride = {},
                  IntList padding = {0, 0});
Tensor adaptive_avg_pool2d(const Tensor& x, IntList output_size);

// ---- padding and resampling (eager/ops/resample.cpp) -------------------------
/// torch.nn.functional.pad: `pad` holds (before, after) pairs from the last
/// dim backwards. mode "constant" (any rank, negative pads crop) or "reflect"
/// (last 1 dim of 2-D/3-D input, or last 2 dims of 3-D/4-D input).
Tensor pad(const Tensor& x, IntList pad, std::string_view mode = "constant",
           std::optional<double> value = std::nullopt);
/// torch.nn.functional.interpolate on (N, C, H, W): exactly one of size (one
/// or two ints) and scale_factor (one or two values) non-empty; mode
/// "nearest" or "bilinear"; align_corners only for bilinear.
Tensor interpolate(const Tensor& x, IntList size = {}, std::vector<double> scale_factor = {},
                   std::string_view mode = "nearest",
                   std::optional<bool> align_corners = std::nullopt);

// ---- views (eager/ops/view.cpp): outputs share the input's storage -----------
Tensor view(const Tensor& x, IntList shape);
/// A view when strides allow, else a copy (torch.reshape).
Tensor reshape(const Tensor& x, IntList shape);
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1);
Tensor permute(const Tensor& x, IntList dims);
Tensor slice(const Tensor& x, int64_t dim, std::optional<int64_t> start,
             std::optional<int64_t> end, int64_t step = 1);
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length);
Tensor select(const Tensor& x, int64_t dim, int64_t index);
Tensor unsqueeze(const Tensor& x, int64_t dim);
Tensor squeeze(const Tensor& x);
Tensor squeeze(const Tensor& x, int64_t dim);
Tensor expand(const Tensor& x, IntList shape);
Tensor flatten(const Tensor& x, int64_t start_dim = 0, int64_t end_dim = -1);
Tensor contiguous(const Tensor& x);

// ---- joining and indexing (eager/ops/index.cpp) ------------------------------
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
Tensor masked_fill(const Tensor& x, const Tensor& mask, Scalar value);
Tensor tril(const Tensor& x, int64_t diagonal = 0);
Tensor triu(const Tensor& x, int64_t diagonal = 0);

// ---- reordering and tiling (eager/ops/index.cpp) -----------------------------
// Copies of x (any dtype) with its elements moved; each is differentiable
// (flip's gradient is a flip, roll's a roll back, repeat's and
// repeat_interleave's sum the tiles and the groups). IndexError for a bad dim.
/// torch.flip: reversed along each of `dims`. ValueError for a repeated dim.
Tensor flip(const Tensor& x, IntList dims);
/// torch.roll: shifted by shifts[k] along dims[k], wrapping around; without
/// dims, x flattened rolled by the single shift, then given its shape back.
/// ValueError when shifts and dims do not align.
Tensor roll(const Tensor& x, IntList shifts, IntList dims = {});
/// torch.Tensor.repeat: tiled repeats[k] times along dim k; repeats.size()
/// >= x.dim() (leading dims are added), entries >= 0 (ValueError otherwise).
Tensor repeat(const Tensor& x, IntList repeats);
/// torch.repeat_interleave: every element repeated `repeats` times along dim
/// (x flattened without dim); the tensor form (int64/int32, 1-d of x.size(dim)
/// or one entry) gives element i repeats[i] copies. ValueError for negative
/// repeats or a mismatched repeats shape, TypeError for a repeats dtype.
Tensor repeat_interleave(const Tensor& x, int64_t repeats, std::optional<int64_t> dim = std::nullopt);
Tensor repeat_interleave(const Tensor& x, const Tensor& repeats, std::optional<int64_t> dim = std::nullopt);

// ---- accumulating scatters (eager/ops/index.cpp) -----------------------------
// Deterministic: each output element sums its contributions in index order,
// one thread per output row, no atomics, so a replay is bitwise. Dtypes:
// float32, float64, float16, bfloat16, int64, int32 (NotImplementedError
// otherwise); the added tensor must have x's dtype (TypeError). Index values
// outside [0, x.size(dim)) throw IndexError. In-place forms are the Tensor
// methods scatter_add_ and index_add_.
/// torch.scatter_add: out = x; out[index[i][j]][j] += src[i][j] for dim 0 (and
/// likewise for any dim). index int64 with x's number of dims, no larger than
/// src anywhere nor than x outside dim (ValueError). Gradients: x → g,
/// src → gather(g, dim, index) (zeros where src has no index entry).
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
/// torch.index_add: out = x; out[.., index[i], ..] += alpha * source[.., i, ..]
/// along dim. index 0-d/1-d int64 or int32; source is x's shape with
/// index.numel() at dim (ValueError). Gradients: x → g, source → alpha *
/// index_select(g, dim, index).
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source,
                 Scalar alpha = 1);

// ---- einsum (eager/ops/einsum.cpp) ---------------------------------------------
/// torch.einsum for any number of operands (contracted pairwise, left to
/// right): "ij,jk->ik", "bhqd,bhkd->bhqk",
/// "i,i->", "ij->ji", "ii->i", "...ij,...jk->...ik"; without "->" the output
/// is every letter used once, upper case before lower case, each in
/// alphabetical order (after the ellipsis dims), as PyTorch.
/// A composition of permute, reshape, sum, diagonal selection and matmul
/// (differentiable through them). Throws ValueError naming the equation for a
/// malformed equation, a wrong operand count, a subscript count that does not
/// match an operand's dims, an output letter not among the inputs, or sizes
/// that do not match (broadcasting size-1 dims as PyTorch).
Tensor einsum(std::string_view equation, const std::vector<Tensor>& operands);

// ---- attention (eager/ops/attention.cpp) -------------------------------------
/// q (*, L, E), k (*, S, E), v (*, S, Ev) → (*, L, Ev).
/// torch.nn.functional.scaled_dot_product_attention; scale defaults to 1/sqrt(E).
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& attn_mask = Tensor(), double dropout_p = 0.0,
                                    bool is_causal = false,
                                    std::optional<double> scale = std::nullopt);

}  // namespace dtr

namespace dtr {
namespace detail {
/// Copies `n` elements of `src_dtype` from host memory into a new constant
/// tensor of `shape` with opts' dtype/device.
Tensor from_host(const void* src, int64_t n, DType src_dtype, IntList shape, TensorOptions opts);
}  // namespace detail

template <typename T>
Tensor from_vector(const std::vector<T>& values, IntList shape, TensorOptions opts) {
  const Shape s = shape.empty() ? Shape{int64_t(values.size())} : Shape(shape.begin(), shape.end());
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<uint8_t> bytes(values.begin(), values.end());
    return detail::from_host(bytes.data(), int64_t(bytes.size()), kBool, s, opts);
  } else {
    return detail::from_host(values.data(), int64_t(values.size()), dtype_of<T>(), s, opts);
  }
}

namespace detail {
/// torch::tensor's body: `values` (row-major) as a tensor of `shape`, in
/// opts' dtype or else float32 / int64 / bool by T's kind.
template <typename T>
Tensor tensor_of(const T* values, int64_t n, IntList shape, TensorOptions opts) {
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<uint8_t> bytes(values, values + n);
    return from_host(bytes.data(), n, kBool, shape, opts.dtype(opts.dtype_or(kBool)));
  } else if constexpr (std::is_floating_point_v<T>) {
    std::vector<double> wide(values, values + n);
    return from_host(wide.data(), n, kFloat64, shape, opts.dtype(opts.dtype_or(kFloat32)));
  } else {
    std::vector<int64_t> wide(values, values + n);
    return from_host(wide.data(), n, kInt64, shape, opts.dtype(opts.dtype_or(kInt64)));
  }
}
}  // namespace detail

template <typename T, typename>
Tensor tensor(T value, TensorOptions opts) {
  return detail::tensor_of(&value, 1, {}, opts);
}
template <typename T, typename>
Tensor tensor(std::initializer_list<T> values, TensorOptions opts) {
  return detail::tensor_of(values.begin(), int64_t(values.size()), {int64_t(values.size())}, opts);
}
template <typename T, typename>
Tensor tensor(const std::vector<T>& values, TensorOptions opts) {
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<uint8_t> bytes(values.begin(), values.end());
    return detail::from_host(bytes.data(), int64_t(bytes.size()), kBool, {int64_t(bytes.size())},
                             opts.dtype(opts.dtype_or(kBool)));
  } else {
    return detail::tensor_of(values.data(), int64_t(values.size()), {int64_t(values.size())}, opts);
  }
}
template <typename T, typename>
Tensor tensor(std::initializer_list<std::initializer_list<T>> rows, TensorOptions opts) {
  const int64_t cols = rows.size() == 0 ? 0 : int64_t(rows.begin()->size());
  std::vector<T> flat;
  for (const auto& r : rows) {
    DTR_CHECK(int64_t(r.size()) == cols, ValueError,
              "tensor: rows must have equal lengths, got {} and {}", cols, r.size());
    flat.insert(flat.end(), r.begin(), r.end());
  }
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<uint8_t> bytes(flat.begin(), flat.end());
    return detail::from_host(bytes.data(), int64_t(bytes.size()), kBool,
                             {int64_t(rows.size()), cols}, opts.dtype(opts.dtype_or(kBool)));
  } else {
    return detail::tensor_of(flat.data(), int64_t(flat.size()), {int64_t(rows.size()), cols}, opts);
  }
}
}  // namespace dtr
