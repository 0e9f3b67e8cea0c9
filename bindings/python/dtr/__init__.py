"""dtr: eager tensors with Dynamic Tensor Rematerialization, with PyTorch's names.

    import dtr
    x = dtr.randn(2, 3, requires_grad=True)
    (x * x).sum().backward()
    dtr.memory.set_budget("64MiB")   # evict and recompute to stay under it

The C++ core is dtr._C (nanobind); Tensor is dtr::Tensor. Errors of the
library arrive as ValueError, TypeError, IndexError, NotImplementedError,
dtr.OutOfMemoryError (a MemoryError) and dtr.DeviceError (a RuntimeError).
"""
import functools as _functools
import warnings as _warnings

import numpy as _np

from . import _C
from ._C import (DeviceError, OutOfMemoryError, Tensor, device, dtype, adaptive_avg_pool2d,
                 arange as _arange, manual_seed, get_rng_state, set_rng_state, set_num_threads,
                 get_num_threads, is_grad_enabled, set_grad_enabled as _set_grad_enabled,
                 to_dlpack as _to_dlpack, save_file, load_file)
from . import _surface

__all__ = ["Tensor", "dtype", "device", "tensor", "from_numpy", "from_dlpack", "no_grad", "inference_mode",
           "enable_grad", "autocast", "manual_seed", "nn", "optim", "memory", "autograd", "cuda",
           "utils", "save", "load"]

float32 = float = dtype.float32
float64 = double = dtype.float64
float16 = half = dtype.float16
bfloat16 = dtype.bfloat16
int64 = long = dtype.int64
int32 = int = dtype.int32
bool = dtype.bool
uint8 = dtype.uint8

_builtin_bool = type(True)
_builtin_int = type(1)
_builtin_float = type(1.0)


def _size(size):
    """PyTorch's `*size`: zeros(2, 3), zeros((2, 3)) and zeros([2, 3])."""
    if len(size) == 1 and not isinstance(size[0], _builtin_int):
        return list(size[0])
    return list(size)


def _dev(d):
    """A device from a string ("cpu", "cuda:0"), a device, or None."""
    return device(d) if isinstance(d, str) else d


def _factory(fn):
    @_functools.wraps(fn)
    def make(*size, dtype=None, device=None, requires_grad=False):
        return fn(_size(size), dtype, _dev(device), requires_grad)
    return make


zeros = _factory(_C.zeros)
ones = _factory(_C.ones)
empty = _factory(_C.empty)
rand = _factory(_C.rand)
randn = _factory(_C.randn)


def full(size, fill_value, *, dtype=None, device=None, requires_grad=False):
    """torch.full; the dtype follows fill_value unless given (bool, int64, float32)."""
    return _C.full(list(size), fill_value, dtype, _dev(device), requires_grad)


def arange(start, end=None, step=1, *, dtype=None, device=None, requires_grad=False):
    """torch.arange: [start, end) by step; int64 for integer arguments, else float32."""
    return _arange(start, end, step, dtype, _dev(device), requires_grad)


def randint(low, high=None, size=None, *, dtype=None, device=None, requires_grad=False):
    """torch.randint(low=0, high, size): integers uniform in [low, high), int64."""
    if size is None:
        low, high, size = 0, low, high
    return _C.randint(low, high, list(size), dtype, _dev(device), requires_grad)


_FROM_NUMPY = {_np.dtype(_np.float32): float32, _np.dtype(_np.float64): float64,
               _np.dtype(_np.float16): float16, _np.dtype(_np.int64): int64,
               _np.dtype(_np.int32): int32, _np.dtype(_np.bool_): bool, _np.dtype(_np.uint8): uint8}


def tensor(data, *, dtype=None, device=None, requires_grad=False):
    """torch.tensor: a new tensor holding a copy of `data` (nested lists of numbers,
    a numpy array or a Tensor). Python floats give float32, ints int64, bools bool,
    unless `dtype` is given; a numpy array keeps its dtype."""
    if isinstance(data, Tensor):
        out = data.detach().clone()
        if dtype is not None:
            out = out.to(dtype)
        if device is not None:
            out = out.to(device)
        return out.requires_grad_(requires_grad) if requires_grad else out
    is_array = isinstance(data, _np.ndarray)
    arr = _np.asarray(data, order="C")  # (ascontiguousarray makes 0-d arrays 1-d)
    if arr.dtype == _np.float64 and not is_array:
        src = float64
        default = float32
    elif arr.dtype.kind in "iu" and arr.dtype != _np.uint8 and not is_array:
        arr = arr.astype(_np.int64)
        src = default = int64
    else:
        if arr.dtype not in _FROM_NUMPY:
            raise TypeError(f"tensor: can't convert data of numpy dtype {arr.dtype}; supported: "
                            "float64, float32, float16, int64, int32, uint8 and bool")
        src = default = _FROM_NUMPY[arr.dtype]
    if arr.dtype == _np.bool_:
        arr = arr.view(_np.uint8)
    return _C._from_array(arr, src, dtype if dtype is not None else default, _dev(device),
                          requires_grad)


def from_numpy(array):
    """torch.from_numpy: a tensor with `array`'s shape, strides and dtype (float64,
    float32, float16, int64, int32, uint8 or bool; TypeError otherwise) sharing its
    memory, so writes show in both; the array is kept alive while the tensor lives.

    A read-only array (`array.flags.writeable` False: np.frombuffer of a bytes object, a
    read-only memmap, np.broadcast_to) is copied instead, with a UserWarning, and the
    tensor does not share memory with it. PyTorch shares it and leaves writes through
    the tensor undefined; dtr has no read-only tensors (an in-place op would write into
    memory that may be immutable or mapped read-only), so the tensor gets its own.
    An array whose byte order is not the machine's is a ValueError, with PyTorch's
    message. TypeError for anything but a numpy.ndarray."""
    if not isinstance(array, _np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(array).__name__})")
    if not array.dtype.isnative:
        raise ValueError("given numpy array has byte order different from the native byte order. "
                         "Conversion between byte orders is currently not supported.")
    if not array.flags.writeable:
        _warnings.warn("The given NumPy array is not writable, and dtr does not support "
                       "non-writable tensors: dtr.from_numpy copied it, so the tensor does not "
                       "share the array's memory. Make the array writable before converting it "
                       "to share memory.", UserWarning, stacklevel=2)
        array = array.copy()
    return _C.from_numpy(array, array)


def from_dlpack(ext_tensor):
    """torch.from_dlpack / torch.utils.dlpack.from_dlpack: a tensor sharing the memory of
    `ext_tensor` (an object with __dlpack__, such as a torch.Tensor or a numpy array,
    or a DLPack capsule, legacy "dltensor" or DLPack 1.x "dltensor_versioned"). An object
    is asked for `__dlpack__(max_version=(1, 0))`, and again without max_version when it
    raises TypeError (PyTorch 1.x, NumPy 1.x). A capsule flagged read-only gives a tensor
    that refuses in-place writes (ValueError). The producer's deleter runs once, when the
    last dtr tensor on that memory goes away."""
    return _C.from_dlpack(ext_tensor)


def to_dlpack(tensor):
    """torch.utils.dlpack.to_dlpack: a legacy DLPack capsule sharing `tensor`'s memory
    (`tensor.__dlpack__(max_version=(1, 0))` gives a DLPack 1.x one)."""
    return _to_dlpack(tensor)


# ---- grad mode and autocast ---------------------------------------------------------

class _GradMode:
    """Base of no_grad / enable_grad: a context manager and a decorator."""
    _mode = True

    def __enter__(self):
        self._prev = is_grad_enabled()
        _set_grad_enabled(self._mode)
        return self

    def __exit__(self, *exc):
        _set_grad_enabled(self._prev)
        return False

    def __call__(self, fn):
        @_functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with type(self)():
                return fn(*args, **kwargs)
        return wrapped


class no_grad(_GradMode):
    """torch.no_grad: ops in the block record no autograd graph (thread-local)."""
    _mode = False


class inference_mode(_GradMode):
    """torch.inference_mode(mode=True): no autograd graph in the block, as no_grad
    (dtr keeps no separate inference tensors, so tensors made here may later be used
    in autograd); inference_mode(False) is enable_grad. A context manager and a
    decorator (`@dtr.inference_mode()`)."""

    def __init__(self, mode=True):
        self._mode = not _builtin_bool(mode)

    def __call__(self, fn):
        mode = self._mode

        @_functools.wraps(fn)
        def wrapped(*args, **kwargs):
            prev = is_grad_enabled()
            _set_grad_enabled(mode)
            try:
                return fn(*args, **kwargs)
            finally:
                _set_grad_enabled(prev)
        return wrapped


class enable_grad(_GradMode):
    """torch.enable_grad: ops in the block record the graph again."""
    _mode = True


class set_grad_enabled(_GradMode):
    """torch.set_grad_enabled(mode): sets grad mode now; restores it on exiting a block."""

    def __init__(self, mode):
        self._prev = is_grad_enabled()
        self._mode = _builtin_bool(mode)
        _set_grad_enabled(self._mode)

    def __enter__(self):
        return self

    def __call__(self, fn):
        mode = self._mode
        _set_grad_enabled(self._prev)

        @_functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with set_grad_enabled(mode):
                return fn(*args, **kwargs)
        return wrapped


class autocast:
    """torch.autocast(device_type, dtype=None, enabled=True): in the block, ops on tensors
    of `device_type` ("cpu", "cuda" or "privateuseone"; any other name is a RuntimeError,
    as in PyTorch) run in the precision PyTorch 2.x's autocast op lists give them on that
    device type; ops on tensors of other device types are untouched (each device type
    has its own state, as torch.is_autocast_enabled(device_type)).

    On the cpu (PyTorch's AutocastCPU lists): matmul, linear, conv2d,
    conv_transpose2d and scaled_dot_product_attention run in `dtype`; cross_entropy,
    nll_loss, mse_loss and reflection padding in float32; cat and stack in the widest
    floating input dtype; every other op (softmax, log_softmax, the norms, exp, pow, ...)
    in its input's dtype. On cuda and privateuseone (PyTorch's CUDA lists) softmax,
    log_softmax, the norms, exp, log, pow, rsqrt and reciprocal run in float32 as well.
    float64 inputs are never cast.

    `dtype` (bfloat16 or float16; ValueError on entering otherwise) defaults to the
    device type's autocast dtype (torch.get_autocast_dtype: bfloat16 on the cpu, float16
    elsewhere). `device_type` defaults to "cpu". A context manager and a decorator; the
    state is thread-local, and every op records all device types' states in its lineage,
    so a rematerialization runs under the state the op first ran under."""

    def __init__(self, device_type="cpu", dtype=None, enabled=True, cache_enabled=None):
        _, current_dtype = _C._autocast_state(device_type)  # RuntimeError for an unknown type
        self.device_type = device_type
        self.fast_dtype = current_dtype if dtype is None else dtype
        self.enabled = enabled

    def __enter__(self):
        self._prev = _C._autocast_state(self.device_type)
        _C._set_autocast_state(self.device_type, self.enabled, self.fast_dtype)
        return self

    def __exit__(self, *exc):
        _C._set_autocast_state(self.device_type, *self._prev)
        return False

    def __call__(self, fn):
        @_functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with autocast(self.device_type, self.fast_dtype, self.enabled):
                return fn(*args, **kwargs)
        return wrapped


# ---- the surface table: functions and Tensor methods (dtr/_surface.py) -------------------

def _to(self, *args, dtype=None, device=None, copy=False, non_blocking=False):
    """Tensor.to(dtype), .to(device), .to("cpu"), .to(other), .to(device, dtype)."""
    for a in args:
        if isinstance(a, _C.dtype):
            dtype = a
        elif isinstance(a, (str, _C.device)):
            device = _C.device(a) if isinstance(a, str) else a
        elif isinstance(a, Tensor):
            dtype, device = a.dtype, a.device
        else:
            raise TypeError(f"to() received an invalid argument {a!r}")
    out = self
    if device is not None:
        device = _C.device(device) if isinstance(device, str) else device
        if device != out.device:
            out = out._to_device(device)
    if dtype is not None and dtype != out.dtype:
        out = out._to_dtype(dtype)
    if copy and out is self:
        out = self.clone()
    return out


_sizes = _surface._sizes
_surface.SURFACE += [
    ("to", _to, "M"),
    ("view", lambda self, *shape: self._view(_sizes(shape)), "M"),
    ("reshape", lambda self, *shape: self._reshape(_sizes(shape)), "M"),
    ("permute", lambda self, *dims: self._permute(_sizes(dims)), "M"),
    ("expand", lambda self, *sizes: self._expand(_sizes(sizes)), "M"),
    ("float", lambda self: self.to(float32), "M"),
    ("double", lambda self: self.to(float64), "M"),
    ("half", lambda self: self.to(float16), "M"),
    ("bfloat16", lambda self: self.to(bfloat16), "M"),
    ("long", lambda self: self.to(int64), "M"),
    ("int", lambda self: self.to(int32), "M"),
    ("bool", lambda self: self.to(bool), "M"),
    ("type_as", lambda self, other: self.to(other.dtype), "M"),
    ("__array__", lambda self, dtype=None: self.numpy() if dtype is None else self.numpy().astype(dtype), "M"),
]
_surface.install(globals())
_legacy_tensor = _surface.legacy_tensor

from . import memory, nn, ops, optim  # noqa: E402  (they use the names above)
from . import autograd, cuda, utils  # noqa: E402
from .serialization import load, save  # noqa: E402
