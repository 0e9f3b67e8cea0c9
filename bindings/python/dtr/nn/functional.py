"""torch.nn.functional's names over dtr's ops (eager/ops.h). Shapes, dtypes and
errors are those of the C++ functions; arguments PyTorch has and dtr lacks raise
NotImplementedError when given."""
from .. import _C
from .._C import (adaptive_avg_pool2d, gelu, log_softmax, relu, sigmoid, silu, softmax, tanh)

__all__ = ["linear", "relu", "gelu", "silu", "sigmoid", "tanh", "softmax", "log_softmax",
           "cross_entropy", "nll_loss", "mse_loss", "layer_norm", "rms_norm", "batch_norm",
           "dropout", "embedding", "conv2d", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d",
           "scaled_dot_product_attention", "l1_loss", "smooth_l1_loss", "huber_loss",
           "binary_cross_entropy", "binary_cross_entropy_with_logits", "leaky_relu", "conv1d"]


def _check_reduction(reduction):
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{reduction} is not a valid value for reduction (mean, sum or none)")


def _reduce(loss, reduction):
    """The elementwise `loss` reduced as `reduction` says (checked before)."""
    if reduction == "mean":
        return _C.mean(loss, None, False)
    if reduction == "sum":
        return _C.sum(loss, None, False)
    return loss


def _unsupported(fn, **given):
    for name, value in given.items():
        if value is not None and value is not False and value != 0.0:
            raise NotImplementedError(f"{fn}: the argument {name} is not supported by dtr")


def linear(input, weight, bias=None):
    """x @ weight.T + bias; x (*, in), weight (out, in), bias (out) or None → (*, out)."""
    return _C.linear(input, weight, bias)


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    """torch.nn.functional.cross_entropy: logits (N, C), (C) or (N, C, d...); target int64
    class indices (N), () or (N, d...) -- entries equal to ignore_index are skipped -- or
    class probabilities of input's shape. `weight` (C) rescales each class (a weighted mean
    divides by the summed weights of the counted targets); `label_smoothing` in [0, 1]
    mixes the target with the uniform distribution over the C classes. reduction "mean" |
    "sum" | "none". Without weight and smoothing, index targets use dtr's fused
    cross_entropy row; otherwise a composition of log_softmax, gather, mul and sum (all
    rematerializable). ValueError for a bad reduction or label_smoothing outside [0, 1]."""
    _unsupported("cross_entropy", size_average=size_average, reduce=reduce)
    _check_reduction(reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be between 0.0 and 1.0, got {label_smoothing}")
    probabilities = target.is_floating_point()
    if weight is None and label_smoothing == 0.0 and not probabilities:
        return _C.cross_entropy(input, target, ignore_index, reduction)
    class_dim = 0 if input.dim() == 1 else 1
    logp = _C.log_softmax(input, class_dim)
    n_classes = input.shape[class_dim]
    w = None if weight is None else weight.view(*_class_shape(input.dim(), class_dim, n_classes))
    if probabilities:
        if tuple(target.shape) != tuple(input.shape):
            raise ValueError(f"cross_entropy: probability target of shape {list(target.shape)} must "
                             f"match the input's {list(input.shape)}")
        if label_smoothing > 0.0:
            target = target * (1.0 - label_smoothing) + label_smoothing / n_classes
        terms = logp * target if w is None else logp * target * w
        loss = -_C.sum(terms, class_dim, False)
        return _reduce(loss, reduction)
    nll = _weighted_nll(logp, target, weight, ignore_index, reduction, class_dim)
    if label_smoothing == 0.0:
        return nll
    keep = target != ignore_index
    smooth = -_C.sum(logp if w is None else logp * w, class_dim, False)
    smooth = smooth.masked_fill(target == ignore_index, 0.0)
    if reduction == "mean":
        if weight is None:
            denom = _C.sum(keep.to(smooth.dtype), None, False)
        else:
            safe = target.masked_fill(target == ignore_index, 0)
            denom = _C.sum(_C.index_select(weight, 0, safe.reshape(-1)) * keep.reshape(-1).to(weight.dtype),
                           None, False)
        smooth = _C.sum(smooth, None, False) / denom
    else:
        smooth = _reduce(smooth, reduction)
    return nll * (1.0 - label_smoothing) + smooth * (label_smoothing / n_classes)


def _class_shape(ndim, class_dim, n_classes):
    shape = [1] * ndim
    shape[class_dim] = n_classes
    return shape


def _weighted_nll(logp, target, weight, ignore_index, reduction, class_dim):
    """nll_loss with a class weight: -weight[t] * logp[t] per element, the mean dividing
    by the summed weights of the counted (not ignored) targets."""
    if weight is None:
        return _C.nll_loss(logp, target, ignore_index, reduction)
    if weight.dim() != 1 or weight.shape[0] != logp.shape[class_dim]:
        raise ValueError(f"weight must be a 1-D tensor of {logp.shape[class_dim]} class weights, got "
                         f"shape {list(weight.shape)}")
    ignored = target == ignore_index
    safe = target.masked_fill(ignored, 0)
    picked = _C.gather(logp, class_dim, safe.unsqueeze(class_dim)).squeeze(class_dim)
    w = _C.index_select(weight, 0, safe.reshape(-1)).reshape(*safe.shape).masked_fill(ignored, 0.0)
    loss = -(picked * w)
    if reduction == "mean":
        return _C.sum(loss, None, False) / _C.sum(w, None, False)
    return _reduce(loss, reduction)


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean"):
    """torch.nn.functional.nll_loss: log-probabilities (N, C), (C) or (N, C, d...), int64
    target (N), () or (N, d...); optional class `weight` (C): the mean divides by the
    summed weights of the counted targets. Targets equal to ignore_index are skipped."""
    _unsupported("nll_loss", size_average=size_average, reduce=reduce)
    _check_reduction(reduction)
    return _weighted_nll(input, target, weight, ignore_index, reduction, 0 if input.dim() == 1 else 1)


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    _unsupported("mse_loss", size_average=size_average, reduce=reduce)
    return _C.mse_loss(input, target, reduction)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    return _C.layer_norm(input, normalized_shape, weight, bias, eps)


def rms_norm(input, normalized_shape, weight=None, eps=None):
    return _C.rms_norm(input, normalized_shape, weight, eps)


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    return _C.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


def dropout(input, p=0.5, training=True, inplace=False):
    """Zeroes elements with probability p (mask from dtr's generator) and scales the
    rest by 1/(1-p) when training; the identity otherwise."""
    _unsupported("dropout", inplace=inplace)
    return _C.dropout(input, p, training)


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    """int64 indices (*) into weight (V, D) → (*, D); IndexError for an index out of range."""
    _unsupported("embedding", padding_idx=padding_idx, max_norm=max_norm,
                 scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)
    return _C.embedding(input, weight)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """x (N, C_in, H, W), weight (C_out, C_in/groups, kH, kW); stride, padding and
    dilation an int or a pair (padding "same"/"valid" are not supported)."""
    if isinstance(padding, str):
        raise NotImplementedError("conv2d: string padding is not supported by dtr")
    return _C.conv2d(input, weight, bias, stride, padding, dilation, groups)


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    _unsupported("max_pool2d", ceil_mode=ceil_mode, return_indices=return_indices)
    if dilation != 1:
        raise NotImplementedError("max_pool2d: dilation is not supported by dtr")
    return _C.max_pool2d(input, kernel_size, stride, padding)


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    _unsupported("avg_pool2d", ceil_mode=ceil_mode, divisor_override=divisor_override)
    return _C.avg_pool2d(input, kernel_size, stride, padding)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None):
    """q (*, L, E), k (*, S, E), v (*, S, Ev) → (*, L, Ev); scale defaults to 1/sqrt(E)."""
    return _C.scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal,
                                           scale)


# ---- losses and activations written as compositions of registry ops ---------------------

def _pointwise_loss(name, input, target, reduction):
    _check_reduction(reduction)
    if tuple(input.shape) != tuple(target.shape):
        raise ValueError(f"{name}: target size {list(target.shape)} differs from input size "
                         f"{list(input.shape)} (dtr does not broadcast them)")


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """torch.nn.functional.l1_loss: |input - target|, reduced; shapes must match."""
    _unsupported("l1_loss", size_average=size_average, reduce=reduce)
    _pointwise_loss("l1_loss", input, target, reduction)
    return _reduce(_C.abs(input - target), reduction)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """torch.nn.functional.smooth_l1_loss: 0.5 d^2 / beta where d = |input - target| < beta,
    d - 0.5 beta elsewhere (beta = 0: l1_loss). ValueError for a negative beta."""
    _unsupported("smooth_l1_loss", size_average=size_average, reduce=reduce)
    _pointwise_loss("smooth_l1_loss", input, target, reduction)
    if beta < 0:
        raise ValueError(f"smooth_l1_loss: beta must be non-negative, got {beta}")
    d = _C.abs(input - target)
    if beta == 0.0:
        return _reduce(d, reduction)
    return _reduce(_C.where(d < beta, d * d * (0.5 / beta), d - 0.5 * beta), reduction)


def huber_loss(input, target, reduction="mean", delta=1.0):
    """torch.nn.functional.huber_loss: 0.5 d^2 where d = |input - target| < delta,
    delta (d - 0.5 delta) elsewhere. ValueError for delta <= 0."""
    _pointwise_loss("huber_loss", input, target, reduction)
    if delta <= 0:
        raise ValueError(f"huber_loss: delta must be positive, got {delta}")
    d = _C.abs(input - target)
    return _reduce(_C.where(d < delta, d * d * 0.5, (d - 0.5 * delta) * delta), reduction)


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,
                         reduction="mean"):
    """torch.nn.functional.binary_cross_entropy: -(t log p + (1 - t) log(1 - p)) with
    each log clamped to >= -100 as PyTorch does; input probabilities, target of the same
    shape; `weight` broadcast over the elements."""
    _unsupported("binary_cross_entropy", size_average=size_average, reduce=reduce)
    _pointwise_loss("binary_cross_entropy", input, target, reduction)
    log_p = _C.clamp(_C.log(input), -100.0, None)
    log_q = _C.clamp(_C.log(1.0 - input), -100.0, None)
    loss = -(target * log_p + (1.0 - target) * log_q)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,
                                     reduction="mean", pos_weight=None):
    """torch.nn.functional.binary_cross_entropy_with_logits: binary cross entropy of
    sigmoid(input) in the stable form (1 - t) x + (1 + (pw - 1) t)(log(1 + e^-|x|) +
    max(-x, 0)); `weight` scales every element, `pos_weight` (broadcast over the last
    dim) the positive term."""
    _unsupported("binary_cross_entropy_with_logits", size_average=size_average, reduce=reduce)
    _pointwise_loss("binary_cross_entropy_with_logits", input, target, reduction)
    softplus_neg = _C.log(_C.exp(-_C.abs(input)) + 1.0) + _C.relu(-input)
    if pos_weight is None:
        loss = (1.0 - target) * input + softplus_neg
    else:
        loss = (1.0 - target) * input + (target * (pos_weight - 1.0) + 1.0) * softplus_neg
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    """torch.nn.functional.leaky_relu: x where x > 0, negative_slope * x elsewhere (the
    gradient at 0 is negative_slope, as PyTorch's)."""
    _unsupported("leaky_relu", inplace=inplace)
    return _C.where(input > 0, input, input * negative_slope)


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """torch.nn.functional.conv1d: x (N, C_in, L) or (C_in, L), weight (C_out, C_in/groups,
    k) → (N, C_out, L_out): conv2d over a height-1 image (unsqueeze, conv2d, squeeze), so
    it rematerializes as those rows. padding an int, "valid", or "same" (stride 1; an
    odd total padding dilation * (k - 1) puts the extra zero on the right, as PyTorch)."""
    unbatched = input.dim() == 2
    if unbatched:
        input = input.unsqueeze(0)
    if input.dim() != 3:
        raise ValueError(f"conv1d: expected 2D (unbatched) or 3D (batched) input, got shape "
                         f"{list(input.shape)}")
    if weight.dim() != 3:
        raise ValueError(f"conv1d: weight must be 3D (C_out, C_in/groups, k), got shape {list(weight.shape)}")
    stride, dilation = _single(stride), _single(dilation)
    left, right = _conv1d_padding(padding, weight, stride, dilation)
    if left != right:
        input, left = _C.pad(input, [left, right], "constant", None), 0
    out = _C.conv2d(input.unsqueeze(2), weight.unsqueeze(2), bias, [1, stride], [0, left],
                    [1, dilation], groups).squeeze(2)
    return out.squeeze(0) if unbatched else out


def _single(v):
    if isinstance(v, (tuple, list)):
        if len(v) != 1:
            raise ValueError(f"expected one value for a 1-d convolution, got {v}")
        return v[0]
    return v


def _conv1d_padding(padding, weight, stride, dilation):
    """(left, right) zero padding of a 1-d convolution's input."""
    if padding == "valid":
        return 0, 0
    if padding == "same":
        if stride != 1:
            raise ValueError("padding='same' is not supported for strided convolutions")
        total = dilation * (weight.shape[2] - 1)
        return total // 2, total - total // 2
    if isinstance(padding, str):
        raise ValueError(f"Invalid padding string '{padding}', should be one of {{'valid', 'same'}}")
    p = _single(padding)
    return p, p


# ---- more of torch.nn.functional over eager/ops.h (shapes and errors as there) -------------

def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """x (N, C_in, H, W), weight (C_in, C_out/groups, kH, kW), bias (C_out) or None."""
    return _C.conv_transpose2d(input, weight, bias, stride, padding, output_padding, groups, dilation)


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zeroes whole channels of (N, C, H, W) or (N, C, L) with probability p, scales the rest."""
    _unsupported("dropout2d", inplace=inplace)
    return _C.dropout2d(input, p, training)


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """x (N, C, *) normalized per (sample, group of C/num_groups channels)."""
    return _C.group_norm(input, num_groups, weight, bias, eps)


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """(N, C, H, W) resized by size or scale_factor; mode "nearest" or "bilinear"."""
    _unsupported("interpolate", recompute_scale_factor=recompute_scale_factor, antialias=antialias)
    return _C.interpolate(input, size, scale_factor, mode, align_corners)


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """torch.nn.functional.kl_div: target * (log(target) - input) pointwise (input holds
    log-probabilities; 0 where target is 0), or exp(target) * (target - input) with
    log_target; reduction "mean" (over every element), "batchmean" (sum / input.size(0)),
    "sum" or "none". Shapes must match (ValueError)."""
    _unsupported("kl_div", size_average=size_average, reduce=reduce)
    batchmean = reduction == "batchmean"
    _pointwise_loss("kl_div", input, target, "sum" if batchmean else reduction)
    if log_target:
        loss = _C.exp(target) * (target - input)
    else:
        positive = target > 0
        safe = _C.where(positive, target, _C.ones_like(target))
        loss = _C.where(positive, target * _C.log(safe), _C.zeros_like(target)) - target * input
    if batchmean:
        return _C.sum(loss, None, False) / (input.shape[0] if input.dim() > 0 else 1)
    return _reduce(loss, reduction)


def one_hot(tensor, num_classes=-1):
    """int64 indices (*) → int64 (*, num_classes); -1 infers max + 1."""
    return _C.one_hot(tensor, num_classes)


def pad(input, pad, mode="constant", value=None):
    """(before, after) pairs from the last dim backwards; mode "constant" or "reflect"."""
    return _C.pad(input, list(pad), mode, value)


__all__ += ["conv_transpose2d", "dropout2d", "group_norm", "interpolate", "kl_div", "one_hot", "pad"]


# ---- activations as compositions of registry ops -------------------------------------------

def elu(input, alpha=1.0, inplace=False):
    """torch.nn.functional.elu: x where x > 0, alpha * (e^x - 1) elsewhere."""
    _unsupported("elu", inplace=inplace)
    return _C.where(input > 0, input, (_C.exp(_C.clamp(input, None, 0.0)) - 1.0) * alpha)


def softplus(input, beta=1.0, threshold=20.0):
    """torch.nn.functional.softplus: log(1 + e^(beta x)) / beta, computed without overflow
    as log(1 + e^(beta x)) for beta x <= 0 and beta x + log(1 + e^-(beta x)) above (each
    branch's exponent clamped to <= 0, so the branch not taken has a finite gradient);
    x itself where beta x > threshold."""
    bx = input * beta
    low = _C.log(_C.exp(_C.clamp(bx, None, 0.0)) + 1.0)
    high = bx + _C.log(_C.exp(-_C.clamp(bx, 0.0, None)) + 1.0)
    soft = _C.where(bx > 0, high, low) * (1.0 / beta)
    return _C.where(bx > threshold, input, soft)


def mish(input, inplace=False):
    """torch.nn.functional.mish: x * tanh(softplus(x))."""
    _unsupported("mish", inplace=inplace)
    return input * _C.tanh(softplus(input))


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    """torch.nn.functional.hardtanh: x clamped to [min_val, max_val]; the gradient is 0 at
    and beyond the bounds (PyTorch's)."""
    _unsupported("hardtanh", inplace=inplace)
    return input.masked_fill(input <= min_val, min_val).masked_fill(input >= max_val, max_val)


def relu6(input, inplace=False):
    """torch.nn.functional.relu6: x clamped to [0, 6]."""
    return hardtanh(input, 0.0, 6.0, inplace)


__all__ += ["elu", "softplus", "mish", "hardtanh", "relu6"]
