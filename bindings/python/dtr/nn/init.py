"""torch.nn.init's initializers, drawn from dtr's generator exactly as the C++
layers draw them (eager/nn/init.h), and filling `tensor` in place."""
import math

from .. import _C, no_grad


def _fill(tensor, values):
    with no_grad():
        tensor.copy_(values)
    return tensor


def constant_(tensor, val):
    return _fill(tensor, _C._init_constant(list(tensor.shape), val, tensor.dtype, tensor.device))


def zeros_(tensor):
    return constant_(tensor, 0.0)


def ones_(tensor):
    return constant_(tensor, 1.0)


def uniform_(tensor, a=0.0, b=1.0):
    return _fill(tensor, _C._init_uniform(list(tensor.shape), a, b, tensor.dtype, tensor.device))


def normal_(tensor, mean=0.0, std=1.0):
    return _fill(tensor, _C._init_normal(list(tensor.shape), mean, std, tensor.dtype, tensor.device))


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu"):
    if mode != "fan_in" or nonlinearity != "leaky_relu":
        raise NotImplementedError("kaiming_uniform_: only mode='fan_in', nonlinearity='leaky_relu'")
    return _fill(tensor, _C._init_kaiming_uniform(list(tensor.shape), float(a), tensor.dtype,
                                                  tensor.device))


def _fans(tensor):
    if tensor.dim() < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    receptive = 1
    for n in tensor.shape[2:]:
        receptive *= n
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def xavier_uniform_(tensor, gain=1.0):
    """torch.nn.init.xavier_uniform_: uniform in ±gain * sqrt(6 / (fan_in + fan_out)),
    from dtr's generator. ValueError for a tensor of fewer than 2 dims."""
    fan_in, fan_out = _fans(tensor)
    bound = gain * math.sqrt(6.0 / (fan_in + fan_out))
    return uniform_(tensor, -bound, bound)


def xavier_normal_(tensor, gain=1.0):
    """torch.nn.init.xavier_normal_: normal with std gain * sqrt(2 / (fan_in + fan_out))."""
    fan_in, fan_out = _fans(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / (fan_in + fan_out)))


# Fresh tensors, as the C++ layers make their parameters.
def _constant(shape, value, dtype=None, device=None):
    return _C._init_constant(list(shape), value, dtype, device)


def _uniform(shape, low, high, dtype=None, device=None):
    return _C._init_uniform(list(shape), low, high, dtype, device)


def _normal(shape, mean, std, dtype=None, device=None):
    return _C._init_normal(list(shape), mean, std, dtype, device)


def _kaiming_uniform(shape, a=math.sqrt(5.0), dtype=None, device=None):
    return _C._init_kaiming_uniform(list(shape), a, dtype, device)
