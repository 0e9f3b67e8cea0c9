"""torch.nn.functional's names over dtr's ops (eager/ops.h). Shapes, dtypes and
errors are those of the C++ functions; arguments PyTorch has and dtr lacks raise
NotImplementedError when given."""
from .. import _C
from .._C import (adaptive_avg_pool2d, gelu, log_softmax, relu, sigmoid, silu, softmax, tanh)

__all__ = ["linear", "relu", "gelu", "silu", "sigmoid", "tanh", "softmax", "log_softmax",
           "cross_entropy", "nll_loss", "mse_loss", "layer_norm", "rms_norm", "batch_norm",
           "dropout", "embedding", "conv2d", "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d",
           "scaled_dot_product_attention"]


def _unsupported(fn, **given):
    for name, value in given.items():
        if value is not None and value is not False and value != 0.0:
            raise NotImplementedError(f"{fn}: the argument {name} is not supported by dtr")


def linear(input, weight, bias=None):
    """x @ weight.T + bias; x (*, in), weight (out, in), bias (out) or None → (*, out)."""
    return _C.linear(input, weight, bias)


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    """logits (N, C) or (N, C, d...), int64 target (N) or (N, d...); reduction
    "mean" | "sum" | "none"; targets equal to ignore_index are skipped."""
    _unsupported("cross_entropy", weight=weight, size_average=size_average, reduce=reduce,
                 label_smoothing=label_smoothing)
    return _C.cross_entropy(input, target, ignore_index, reduction)


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean"):
    _unsupported("nll_loss", weight=weight, size_average=size_average, reduce=reduce)
    return _C.nll_loss(input, target, ignore_index, reduction)


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


def one_hot(tensor, num_classes=-1):
    """int64 indices (*) → int64 (*, num_classes); -1 infers max + 1."""
    return _C.one_hot(tensor, num_classes)


def pad(input, pad, mode="constant", value=None):
    """(before, after) pairs from the last dim backwards; mode "constant" or "reflect"."""
    return _C.pad(input, list(pad), mode, value)


__all__ += ["conv_transpose2d", "dropout2d", "group_norm", "interpolate", "one_hot", "pad"]
