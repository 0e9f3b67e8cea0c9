"""torch.nn's activation, reshaping, 1-d convolution and batch-norm modules over
dtr.nn.functional (every one a registry op or a composition of them, so their
outputs rematerialize like any other)."""
from .. import _C, no_grad
from . import Module, Parameter, _ConvNd, _pair, init
from . import functional as F

__all__ = ["Tanh", "Sigmoid", "SiLU", "LeakyReLU", "ELU", "Softplus", "Mish", "Hardtanh", "ReLU6",
           "Softmax", "LogSoftmax", "Flatten", "Unflatten", "Conv1d", "ConvTranspose2d",
           "BatchNorm1d", "BatchNorm2d", "GroupNorm", "MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d",
           "Dropout2d"]


class Tanh(Module):
    """torch.nn.Tanh: elementwise tanh, any shape."""

    def forward(self, x):
        return _C.tanh(x)


class Sigmoid(Module):
    """torch.nn.Sigmoid: elementwise 1 / (1 + e^-x), any shape."""

    def forward(self, x):
        return _C.sigmoid(x)


class SiLU(Module):
    """torch.nn.SiLU: x * sigmoid(x), any shape (inplace=True is NotImplementedError)."""

    def __init__(self, inplace=False):
        super().__init__()
        if inplace:
            raise NotImplementedError("SiLU: inplace=True is not supported by dtr")

    def forward(self, x):
        return _C.silu(x)


class LeakyReLU(Module):
    """torch.nn.LeakyReLU(negative_slope=0.01): x where x > 0, negative_slope * x else."""

    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__()
        if inplace:
            raise NotImplementedError("LeakyReLU: inplace=True is not supported by dtr")
        self.negative_slope = negative_slope

    def forward(self, x):
        return F.leaky_relu(x, self.negative_slope)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}"


class ELU(Module):
    """torch.nn.ELU(alpha=1.0): x where x > 0, alpha * (e^x - 1) elsewhere."""

    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        F._unsupported("ELU", inplace=inplace)
        self.alpha = alpha

    def forward(self, x):
        return F.elu(x, self.alpha)


class Softplus(Module):
    """torch.nn.Softplus(beta=1.0, threshold=20.0): log(1 + e^(beta x)) / beta."""

    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, x):
        return F.softplus(x, self.beta, self.threshold)


class Mish(Module):
    """torch.nn.Mish: x * tanh(softplus(x))."""

    def __init__(self, inplace=False):
        super().__init__()
        F._unsupported("Mish", inplace=inplace)

    def forward(self, x):
        return F.mish(x)


class Hardtanh(Module):
    """torch.nn.Hardtanh(min_val=-1.0, max_val=1.0): x clamped to [min_val, max_val]."""

    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False):
        super().__init__()
        F._unsupported(type(self).__name__, inplace=inplace)
        if max_val <= min_val:
            raise ValueError(f"{type(self).__name__}: max_val ({max_val}) must exceed min_val ({min_val})")
        self.min_val, self.max_val = min_val, max_val

    def forward(self, x):
        return F.hardtanh(x, self.min_val, self.max_val)


class ReLU6(Hardtanh):
    """torch.nn.ReLU6: x clamped to [0, 6]."""

    def __init__(self, inplace=False):
        super().__init__(0.0, 6.0, inplace)


def _implicit_dim(ndim):
    """PyTorch's legacy choice of dim when Softmax is built without one."""
    return 0 if ndim in (0, 1, 3) else 1


class Softmax(Module):
    """torch.nn.Softmax(dim): exp(x) / sum(exp(x)) along `dim` (None: PyTorch's legacy
    choice, 0 for 0-, 1- and 3-d inputs, else 1)."""

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return _C.softmax(x, _implicit_dim(x.dim()) if self.dim is None else self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    """torch.nn.LogSoftmax(dim): log(softmax(x)) along `dim`, computed stably."""

    def forward(self, x):
        return _C.log_softmax(x, _implicit_dim(x.dim()) if self.dim is None else self.dim)


class Flatten(Module):
    """torch.nn.Flatten(start_dim=1, end_dim=-1): dims start_dim..end_dim merged into one
    (a view where the layout allows, else a copy)."""

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x):
        return x.flatten(self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """torch.nn.Unflatten(dim, unflattened_size): dim `dim` split into
    `unflattened_size` (a tuple or list of ints, one of them may be -1). ValueError when
    the sizes do not multiply to the dim's size."""

    def __init__(self, dim, unflattened_size):
        super().__init__()
        if not isinstance(dim, int):
            raise TypeError(f"Unflatten: dim must be an int, got {type(dim).__name__}")
        if not isinstance(unflattened_size, (tuple, list)) or not all(
                isinstance(v, int) for v in unflattened_size):
            raise TypeError("Unflatten: unflattened_size must be a tuple or list of ints, got "
                            f"{unflattened_size!r}")
        self.dim, self.unflattened_size = dim, tuple(unflattened_size)

    def forward(self, x):
        shape = list(x.shape)
        d = self.dim + len(shape) if self.dim < 0 else self.dim
        if not 0 <= d < len(shape):
            raise IndexError(f"Unflatten: dim {self.dim} out of range for a {len(shape)}-d input")
        return x.reshape(*(shape[:d] + list(self.unflattened_size) + shape[d + 1:]))

    def extra_repr(self):
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"


class Conv1d(_ConvNd):
    """torch.nn.Conv1d (padding_mode="zeros") on (N, C_in, L) or (C_in, L): weight
    (out, in/groups, k) kaiming_uniform(a=sqrt(5)), bias uniform in ±1/sqrt(fan_in), as
    PyTorch; runs as conv2d over a height-1 image (F.conv1d). padding an int, "valid" or
    "same"."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        self.kernel_size, self.stride = (F._single(kernel_size),), (F._single(stride),)
        self.dilation = (F._single(dilation),)
        self.padding = padding if isinstance(padding, str) else (F._single(padding),)
        self._make_params(in_channels, out_channels, self.kernel_size, groups, bias, padding_mode,
                          device, dtype)

    def forward(self, x):
        padding = self.padding if isinstance(self.padding, str) else self.padding[0]
        return F.conv1d(x, self.weight, self.bias, self.stride[0], padding, self.dilation[0],
                        self.groups)


class ConvTranspose2d(_ConvNd):
    """torch.nn.ConvTranspose2d (padding_mode="zeros") on (N, C_in, H, W): weight (in,
    out/groups, kH, kW) kaiming_uniform(a=sqrt(5)), bias uniform in ±1/sqrt(fan_in) with
    PyTorch's fan_in (out/groups * kH * kW); dtr's conv_transpose2d row."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0,
                 output_padding=0, groups=1, bias=True, dilation=1, padding_mode="zeros",
                 device=None, dtype=None):
        super().__init__()
        self.kernel_size, self.stride = _pair(kernel_size), _pair(stride)
        self.padding, self.dilation = _pair(padding), _pair(dilation)
        self.output_padding = _pair(output_padding)
        self._make_params(in_channels, out_channels, self.kernel_size, groups, bias, padding_mode,
                          device, dtype, transposed=True)

    def forward(self, x):
        return F.conv_transpose2d(x, self.weight, self.bias, self.stride, self.padding,
                                  self.output_padding, self.groups, self.dilation)


def _affine_parameters(module, n, affine, dtype, device):
    """A norm layer's weight (ones) and bias (zeros) of n channels, or None for both."""
    if affine:
        module.weight = Parameter(init._constant((n,), 1.0, dtype, device))
        module.bias = Parameter(init._constant((n,), 0.0, dtype, device))
    else:
        module.register_parameter("weight", None)
        module.register_parameter("bias", None)


class _BatchNorm(Module):
    """What BatchNorm1d and BatchNorm2d share: weight ones and bias zeros (affine),
    running_mean zeros, running_var ones and num_batches_tracked (int64) as buffers
    (track_running_stats); batch statistics when training (updating the running ones
    with `momentum`, or a cumulative average when momentum is None), running ones in
    eval mode. The normalization is dtr's batch_norm row over (N, C, *)."""

    _dims = ()

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True,
                 track_running_stats=True, device=None, dtype=None):
        super().__init__()
        name = type(self).__name__
        if num_features <= 0:
            raise ValueError(f"{name}: num_features must be positive, got {num_features}")
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        _affine_parameters(self, num_features, affine, dtype, device)
        if track_running_stats:
            self.register_buffer("running_mean", init._constant((num_features,), 0.0, dtype, device))
            self.register_buffer("running_var", init._constant((num_features,), 1.0, dtype, device))
            self.register_buffer("num_batches_tracked", init._constant((), 0.0, _C.dtype.int64, device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)

    def forward(self, x):
        name = type(self).__name__
        if x.dim() not in self._dims:
            raise ValueError(f"{name}: expected {' or '.join(f'{d}D' for d in self._dims)} input "
                             f"(got {x.dim()}D input of shape {list(x.shape)})")
        if x.shape[1] != self.num_features:
            raise ValueError(f"{name}: expected input with {self.num_features} channels, got "
                             f"shape {list(x.shape)}")
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            with no_grad():
                self.num_batches_tracked.add_(1)
            if self.momentum is None:
                factor = 1.0 / self.num_batches_tracked.item()
        use_batch_stats = self.training or not self.track_running_stats
        return _C.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                             use_batch_stats, factor, self.eps)

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """torch.nn.BatchNorm1d over (N, C) or (N, C, L), statistics per channel C."""
    _dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """torch.nn.BatchNorm2d over (N, C, H, W), statistics per channel C."""
    _dims = (4,)


class GroupNorm(Module):
    """torch.nn.GroupNorm(num_groups, num_channels, eps=1e-5, affine=True) on (N, C, *):
    weight ones, bias zeros; ValueError when num_groups does not divide num_channels."""

    def __init__(self, num_groups, num_channels, eps=1e-5, affine=True, device=None, dtype=None):
        super().__init__()
        if num_groups <= 0 or num_channels % num_groups:
            raise ValueError(f"GroupNorm: num_channels ({num_channels}) must be divisible by "
                             f"num_groups ({num_groups})")
        self.num_groups, self.num_channels, self.eps, self.affine = num_groups, num_channels, eps, affine
        _affine_parameters(self, num_channels, affine, dtype, device)

    def forward(self, x):
        return F.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)


class MaxPool2d(Module):
    """torch.nn.MaxPool2d(kernel_size, stride=None (= kernel_size), padding=0) on
    (N, C, H, W); dilation, ceil_mode and return_indices are NotImplementedError."""

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
                 ceil_mode=False):
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.dilation, self.return_indices, self.ceil_mode = dilation, return_indices, ceil_mode

    def forward(self, x):
        return F.max_pool2d(x, self.kernel_size, self.stride, self.padding, self.dilation,
                            self.ceil_mode, self.return_indices)


class AvgPool2d(Module):
    """torch.nn.AvgPool2d(kernel_size, stride=None (= kernel_size), padding=0) on
    (N, C, H, W), padding counted in the average (count_include_pad=True)."""

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
                 divisor_override=None):
        super().__init__()
        self.kernel_size, self.stride, self.padding = kernel_size, stride, padding
        self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad
        self.divisor_override = divisor_override

    def forward(self, x):
        return F.avg_pool2d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad, self.divisor_override)


class AdaptiveAvgPool2d(Module):
    """torch.nn.AdaptiveAvgPool2d(output_size): (N, C, H, W) averaged to output_size (an
    int or an (h, w) pair)."""

    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, x):
        return F.adaptive_avg_pool2d(x, self.output_size)


class Dropout2d(Module):
    """torch.nn.Dropout2d(p=0.5): zeroes whole channels with probability p in training
    mode (scaling the rest by 1/(1-p)); the identity in eval mode."""

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout2d: dropout probability has to be between 0 and 1, but got {p}")
        F._unsupported("Dropout2d", inplace=inplace)
        self.p = p

    def forward(self, x):
        return F.dropout2d(x, self.p, self.training)
