"""torch.nn's activation, reshaping, 1-d convolution and batch-norm modules over
dtr.nn.functional (every one a registry op or a composition of them, so their
outputs rematerialize like any other)."""
from .. import _C, no_grad
from . import Module, Parameter, _ConvNd, init
from . import functional as F

__all__ = ["Tanh", "Sigmoid", "SiLU", "LeakyReLU", "Softmax", "LogSoftmax", "Flatten", "Unflatten",
           "Conv1d", "BatchNorm1d", "BatchNorm2d"]


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
        if affine:
            self.weight = Parameter(init._constant((num_features,), 1.0, dtype, device))
            self.bias = Parameter(init._constant((num_features,), 0.0, dtype, device))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
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
