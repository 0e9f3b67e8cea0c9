"""The one table of dtr's PyTorch-shaped Python surface.

Every public op is one row of SURFACE: its PyTorch name, the Python callable
(PyTorch's argument names, defaults and scalar handling; dims may be negative,
an int or a tuple; keepdim where PyTorch has it), and where it appears:
F = a function `dtr.<name>`, M = a Tensor method (the callable with self as
input). dtr/__init__.py installs the rows; tests/python/test_surface.py
checks that every public C++ op (eager/ops.h, the registry's rows) has a row
here, in dtr.nn.functional, or in its commented exclusion list. Anything the
table lacks is still reachable as dtr.ops.<row> (dtr/ops.py).

The callables are thin: argument conventions here, semantics in C++
(dtr._C, eager/ops.h). Composites (std, norm, all, any, floor_divide, eye,
linspace, ...) are built from registry ops, so they differentiate and
rematerialize like any op.
"""
import builtins as _b
import collections as _collections
import math as _math

from . import _C
from ._C import Tensor

F, M, FM = "F", "M", "FM"

_int, _float, _bool = int, float, bool


def _t(x, like):
    """A Python number as a 0-d tensor on like's device, for ops that take tensors
    (PyTorch's wrapped numbers: they do not widen a tensor's dtype within a category)."""
    if isinstance(x, Tensor):
        return x
    return _C.full([], x, None, like.device, False)


def _dims(dim):
    return None if dim is None else (list(dim) if isinstance(dim, (list, tuple)) else dim)


def _sizes(args):
    """PyTorch's `*sizes`: f(2, 3), f((2, 3)) and f([2, 3])."""
    if len(args) == 1 and not isinstance(args[0], _int):
        return list(args[0])
    return list(args)


_VI = {n: _collections.namedtuple(n, ["values", "indices"]) for n in ("max", "min", "sort", "topk")}

# ---- unary ------------------------------------------------------------------------------


def _unary(op):
    def fn(input):
        return op(input)
    fn.__name__ = op.__name__
    fn.__doc__ = f"torch.{op.__name__}: elementwise; any shape (eager/ops.h {op.__name__})."
    return fn


def clamp(input, min=None, max=None):
    """torch.clamp: min(max(input, min), max); min and max are numbers or tensors
    (broadcasting). ValueError when both are None."""
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        if min is None and max is None:
            raise ValueError("clamp: at least one of 'min' or 'max' must not be None")
        out = input
        if min is not None:
            out = _C.maximum(out, _t(min, input))
        if max is not None:
            out = _C.minimum(out, _t(max, input))
        return out
    return _C.clamp(input, min, max)


# ---- binary -----------------------------------------------------------------------------


def add(input, other, *, alpha=1):
    """torch.add: input + alpha * other; other a tensor or a number."""
    if isinstance(other, Tensor):
        return _C.add(input, other, alpha)
    return input + other * alpha


def sub(input, other, *, alpha=1):
    """torch.sub: input - alpha * other; other a tensor or a number."""
    if isinstance(other, Tensor):
        return _C.sub(input, other, alpha)
    return input - other * alpha


def mul(input, other):
    """torch.mul: input * other (broadcasting; other a tensor or a number)."""
    return input * other


def div(input, other, *, rounding_mode=None):
    """torch.div: true division; rounding_mode "floor" is floor_divide, "trunc"
    rounds toward zero (integer inputs stay integer then)."""
    if rounding_mode is None:
        return input / other
    if rounding_mode == "floor":
        return floor_divide(input, other)
    if rounding_mode == "trunc":
        q = floor_divide(input, other)
        r = input - q * other
        # floor and trunc differ where the quotient is negative and inexact.
        adjust = (r != 0) & ((input < 0) != (_t(other, input) < 0))
        return _C.where(adjust, q + 1, q)
    raise ValueError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but "
                     f"found '{rounding_mode}'")


def _is_int(x):
    return x.dtype in (_C.dtype.int64, _C.dtype.int32, _C.dtype.uint8, _C.dtype.bool) \
        if isinstance(x, Tensor) else isinstance(x, _int)


def _floor(q):
    """floor of a floating tensor from registry ops: truncation (to int64 and back)
    corrected where it rounded up; |q| >= 2**63, inf and NaN pass through."""
    t = q.to(_C.dtype.int64).to(q.dtype)
    t = t - (t > q).to(q.dtype)
    big = (q.abs() >= 2.0 ** 52) | (q != q)
    return _C.where(big, q, t)


def floor_divide(input, other):
    """torch.floor_divide / a // b: floor(a / b) (PyTorch >= 1.13 rounds down).
    Integer tensors and numbers give integers (exact while |a| < 2**53); floating give
    floating. ZeroDivisionError-free: an integer division by zero is a ValueError."""
    return _floor_divide(input, other, "floor_divide")


def _floor_divide(input, other, op):
    if not isinstance(input, Tensor):
        input = _t(input, other)
    if _is_int(input) and _is_int(other):
        if (other == 0).any().item() if isinstance(other, Tensor) else other == 0:
            raise ValueError(f"{op}: ZeroDivisionError (integer division by zero)")
        out_dtype = (input + other).dtype  # PyTorch's result type of the operands
        q = input.to(_C.dtype.float64) / (other.to(_C.dtype.float64) if isinstance(other, Tensor) else other)
        return _floor(q).to(out_dtype)
    q = input / other
    return _floor(q)


def remainder(input, other):
    """torch.remainder / a % b: a - floor(a / b) * b, with the sign of b (Python's %)."""
    if not isinstance(input, Tensor):
        input = _t(input, other)
    return input - _floor_divide(input, other, "remainder") * other


def where(condition, input=None, other=None):
    """torch.where(condition, input, other): input where condition else other,
    broadcasting; input and other may be numbers. where(condition) is
    nonzero(condition, as_tuple=True)."""
    if input is None and other is None:
        return nonzero(condition, as_tuple=True)
    like = input if isinstance(input, Tensor) else other if isinstance(other, Tensor) else condition
    if not isinstance(input, Tensor) and not isinstance(other, Tensor):
        # two numbers: the dtype of the pair (float32 for a float, int64 for ints)
        kind = _C.full([], input, None, like.device, False) + _C.full([], other, None, like.device, False)
        input = _C.full([], input, kind.dtype, like.device, False)
        other = _C.full([], other, kind.dtype, like.device, False)
    elif not isinstance(input, Tensor):
        input = _C.full([], input, _wrapped_dtype(input, other), like.device, False)
    elif not isinstance(other, Tensor):
        other = _C.full([], other, _wrapped_dtype(other, input), like.device, False)
    return _C.where(condition, input, other)


def _wrapped_dtype(number, tensor):
    """The dtype a number takes beside `tensor` (PyTorch: the tensor's within its
    category, else the default for the number's kind)."""
    if isinstance(number, _float) and not tensor.dtype.is_floating_point:
        return _C.dtype.float32
    if isinstance(number, _bool) or tensor.dtype != _C.dtype.bool:
        return tensor.dtype
    return _C.dtype.int64


def nonzero(input, *, as_tuple=False):
    """torch.nonzero: int64 (n, input.dim()) positions of the nonzero elements in
    row-major order; as_tuple gives one 1-d tensor per dim. Reads input on the host."""
    mask = (input != 0).to(_C.dtype.bool)
    ix = [[] for _ in range(input.dim())]
    flat = mask.reshape(-1).tolist()
    shape = list(input.shape)
    for e, v in enumerate(flat):
        if v:
            rem = e
            for d in range(len(shape) - 1, -1, -1):
                ix[d].append(rem % shape[d])
                rem //= shape[d]
    cols = [_C._from_array(__import__("numpy").asarray(c, dtype="int64"), _C.dtype.int64,
                           _C.dtype.int64, input.device, False) for c in ix]
    if as_tuple:
        return tuple(cols)
    if not cols:
        return _C.zeros([len(flat) and int(flat[0]), 0], _C.dtype.int64, input.device, False)
    return _C.stack(cols, 1)


def _as_bool(x, like, op):
    if isinstance(x, Tensor):
        if x.dtype != _C.dtype.bool:
            raise TypeError(f"{op}: dtr has this operator for bool tensors only (got {x.dtype}); "
                            f"use dtr.logical_{op.strip('_')}")
        return x
    if not isinstance(x, _bool):
        raise TypeError(f"{op}: dtr has this operator for bool tensors and Python bools only")
    return _C.full([], x, _C.dtype.bool, like.device, False)


def logical_and(input, other):
    """torch.logical_and: bool, both nonzero (broadcasting)."""
    return _C.where(input != 0, other != 0, _t(False, input))


def logical_or(input, other):
    """torch.logical_or: bool, either nonzero (broadcasting)."""
    return _C.where(input != 0, _t(True, input), other != 0)


def logical_xor(input, other):
    """torch.logical_xor: bool, exactly one nonzero (broadcasting)."""
    return (input != 0) != (other != 0)


def logical_not(input):
    """torch.logical_not: bool, input == 0."""
    return input == 0


def _bool_dunder(logical, name):
    def method(self, other):
        if not isinstance(other, (Tensor, _bool)):
            return NotImplemented
        return logical(_as_bool(self, self, name), _as_bool(other, self, name))
    return method


def _invert(self):
    """~x for a bool tensor (logical not); TypeError for other dtypes (no bitwise ops)."""
    return logical_not(_as_bool(self, self, "__invert__"))


# ---- reductions -------------------------------------------------------------------------


def sum(input, dim=None, keepdim=False, *, dtype=None):
    """torch.sum over dim (int, tuple, None = all); dtype casts first."""
    x = input if dtype is None else input.to(dtype)
    return _C.sum(x, _dims(dim), keepdim)


def mean(input, dim=None, keepdim=False, *, dtype=None):
    """torch.mean over dim (int, tuple, None = all); dtype casts first."""
    x = input if dtype is None else input.to(dtype)
    return _C.mean(x, _dims(dim), keepdim)


def _correction(dim, unbiased, correction):
    if isinstance(dim, _bool):  # var(x, False): the 1.x positional unbiased
        dim, unbiased = None, dim
    if correction is None:
        correction = 1 if unbiased is None else _int(unbiased)
    return dim, correction


def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """torch.var: variance over dim with Bessel's correction (1 = unbiased, the
    default; unbiased=False or correction=0 = biased)."""
    dim, c = _correction(dim, unbiased, correction)
    return _C.var(input, _dims(dim), c, keepdim)


def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """torch.std: sqrt(var(...)) with var's arguments."""
    dim, c = _correction(dim, unbiased, correction)
    return _C.sqrt(_C.var(input, _dims(dim), c, keepdim))


def max(input, dim=None, keepdim=False, *, out=None):
    """torch.max(input) (0-d), torch.max(input, dim, keepdim) → (values, indices),
    torch.max(input, other) = maximum."""
    if isinstance(dim, Tensor):
        return _C.maximum(input, dim)
    if dim is None:
        return _C.max(input, None, False)
    return _VI["max"](*_C.max(input, dim, keepdim))


def min(input, dim=None, keepdim=False):
    """torch.min(input) (0-d), torch.min(input, dim, keepdim) → (values, indices)
    (the first smallest on ties), torch.min(input, other) = minimum."""
    if isinstance(dim, Tensor):
        return _C.minimum(input, dim)
    if dim is None:
        return _C.amin(input, None, False)
    i = _C.argmin(input, dim, True)
    v = _C.gather(input, dim, i)
    if not keepdim:
        v, i = v.squeeze(dim), i.squeeze(dim)
    return _VI["min"](v, i)


def amax(input, dim=(), keepdim=False):
    """torch.amax over dim (int or tuple; () = all)."""
    return _C.amax(input, _dims(dim) or None, keepdim)


def amin(input, dim=(), keepdim=False):
    """torch.amin over dim (int or tuple; () = all)."""
    return _C.amin(input, _dims(dim) or None, keepdim)


def argmax(input, dim=None, keepdim=False):
    """torch.argmax: int64 position of the largest (flattened when dim is None)."""
    return _C.argmax(input, dim, keepdim)


def argmin(input, dim=None, keepdim=False):
    """torch.argmin: int64 position of the smallest (flattened when dim is None)."""
    return _C.argmin(input, dim, keepdim)


def logsumexp(input, dim, keepdim=False):
    """torch.logsumexp over dim (int or tuple), computed stably."""
    return _C.logsumexp(input, _dims(dim), keepdim)


def cumsum(input, dim, *, dtype=None):
    """torch.cumsum along dim; integer and bool inputs give int64."""
    x = input if dtype is None else input.to(dtype)
    return _C.cumsum(x, dim)


def norm(input, p="fro", dim=None, keepdim=False, dtype=None):
    """torch.norm: the p-norm over dim (None = all): p "fro" or 2 = sqrt(sum(x^2)),
    1 = sum(|x|), inf = max(|x|), -inf = min(|x|), 0 = count of nonzeros, any other
    number = sum(|x|^p)^(1/p). ValueError for "nuc" (not supported)."""
    x = input if dtype is None else input.to(dtype)
    d = _dims(dim)
    if p == "fro" or p == 2:
        return _C.sqrt(_C.sum(x * x, d, keepdim))
    if p == "nuc":
        raise ValueError("norm: the nuclear norm (p='nuc') is not supported by dtr")
    if p == _math.inf:
        return _C.amax(x.abs(), d, keepdim)
    if p == -_math.inf:
        return _C.amin(x.abs(), d, keepdim)
    if p == 0:
        return _C.sum((x != 0).to(x.dtype), d, keepdim)
    if p == 1:
        return _C.sum(x.abs(), d, keepdim)
    return _C.sum(x.abs() ** p, d, keepdim) ** (1.0 / p)


def all(input, dim=None, keepdim=False):
    """torch.all: bool, whether every element (along dim) is nonzero."""
    return _C.sum((input == 0).to(_C.dtype.int64), _dims(dim), keepdim) == 0


def any(input, dim=None, keepdim=False):
    """torch.any: bool, whether some element (along dim) is nonzero."""
    return _C.sum((input != 0).to(_C.dtype.int64), _dims(dim), keepdim) > 0


def softmax(input, dim, dtype=None):
    """torch.softmax along dim (dtype casts first)."""
    return _C.softmax(input if dtype is None else input.to(dtype), dim)


def log_softmax(input, dim, dtype=None):
    """torch.log_softmax along dim (dtype casts first)."""
    return _C.log_softmax(input if dtype is None else input.to(dtype), dim)


# ---- sorting, sampling ------------------------------------------------------------------


def sort(input, dim=-1, descending=False, stable=False):
    """torch.sort → (values, indices); always stable (equal values keep their order)."""
    return _VI["sort"](*_C.sort(input, dim, descending))


def argsort(input, dim=-1, descending=False, stable=False):
    """torch.argsort: the indices of sort."""
    return _C.sort(input, dim, descending)[1]


def topk(input, k, dim=-1, largest=True, sorted=True):
    """torch.topk → (values, indices) of the k largest (smallest) along dim."""
    return _VI["topk"](*_C.topk(input, k, dim, largest, sorted))


def multinomial(input, num_samples, replacement=False, *, generator=None):
    """torch.multinomial: int64 samples from the rows of input (C) or (R, C)."""
    if generator is not None:
        raise NotImplementedError("multinomial: generator= is not supported by dtr")
    return _C.multinomial(input, num_samples, replacement)


# ---- linear algebra ---------------------------------------------------------------------


def matmul(input, other):
    """torch.matmul: 1-D/2-D/batched with broadcasting of batch dims."""
    return _C.matmul(input, other)


def mm(input, mat2):
    """torch.mm: (n, m) @ (m, p); ValueError unless both are 2-D."""
    if input.dim() != 2 or mat2.dim() != 2:
        raise ValueError(f"mm: expected 2-D tensors, got {tuple(input.shape)} and {tuple(mat2.shape)}")
    return _C.matmul(input, mat2)


def bmm(input, mat2):
    """torch.bmm: (b, n, m) @ (b, m, p); ValueError unless both are 3-D with equal b."""
    if input.dim() != 3 or mat2.dim() != 3 or input.shape[0] != mat2.shape[0]:
        raise ValueError(f"bmm: expected 3-D tensors with the same batch size, got "
                         f"{tuple(input.shape)} and {tuple(mat2.shape)}")
    return _C.matmul(input, mat2)


def einsum(equation, *operands):
    """torch.einsum(equation, *operands) (or one list of operands)."""
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = operands[0]
    return _C.einsum(equation, list(operands))


# ---- views, joining, reordering ---------------------------------------------------------


def split(tensor, split_size_or_sections, dim=0):
    """torch.split: pieces of split_size along dim (the last smaller), or of the
    given sizes (a list summing to the dim's size; ValueError otherwise)."""
    if isinstance(split_size_or_sections, _int):
        return tuple(_C.split(tensor, split_size_or_sections, dim))
    sizes = list(split_size_or_sections)
    n = tensor.shape[dim]
    if _b.sum(sizes) != n:
        raise ValueError(f"split_with_sizes expects split_sizes to sum exactly to {n} (input tensor's "
                         f"size at dimension {dim}), but got split_sizes={sizes}")
    out, start = [], 0
    for s in sizes:
        out.append(_C.narrow(tensor, dim, start, s))
        start += s
    return tuple(out)


def chunk(input, chunks, dim=0):
    """torch.chunk: at most `chunks` pieces along dim."""
    return tuple(_C.chunk(input, chunks, dim))


def flip(input, dims):
    """torch.flip along dims (int or tuple)."""
    return _C.flip(input, _dims(dims) if not isinstance(dims, _int) else [dims])


def _flip_method(self, *dims):
    return flip(self, _sizes(dims))


def _repeat_method(self, *sizes):
    return _C.repeat(self, _sizes(sizes))


def repeat_interleave(input, repeats, dim=None, *, output_size=None):
    """torch.repeat_interleave: each element repeated `repeats` times (an int or a
    tensor of per-element counts) along dim (flattened when None)."""
    return _C.repeat_interleave(input, repeats, dim)


def roll(input, shifts, dims=None):
    """torch.roll: shifted by shifts along dims, wrapping around."""
    return _C.roll(input, shifts, dims)


def narrow(input, dim, start, length):
    """torch.narrow: a view of `length` elements of dim from `start`."""
    return _C.narrow(input, dim, start, length)


def _view_fn(method):
    def fn(input, *args):
        return getattr(input, method)(*args)
    fn.__name__ = method
    fn.__doc__ = f"torch.{method}(input, ...) = input.{method}(...)."
    return fn


# ---- creation ---------------------------------------------------------------------------


def _dev(d):
    return _C.device(d) if isinstance(d, str) else d


def eye(n, m=None, *, dtype=None, device=None, requires_grad=False):
    """torch.eye: (n, m) (m = n by default) with ones on the diagonal; float32 by default."""
    m = n if m is None else m
    d = _dev(device)
    rows = _C.arange(0, n, 1, _C.dtype.int64, d, False).reshape(n, 1)
    cols = _C.arange(0, m, 1, _C.dtype.int64, d, False).reshape(1, m)
    out = (rows == cols).to(dtype if dtype is not None else _C.dtype.float32)
    return out.requires_grad_() if requires_grad else out


def linspace(start, end, steps, *, dtype=None, device=None, requires_grad=False):
    """torch.linspace: `steps` values from start to end inclusive, evenly spaced
    (the first half counted from start, the second from end, as PyTorch); float32
    by default. ValueError for negative steps."""
    if steps < 0:
        raise ValueError("linspace: number of steps must be non-negative")
    dt = dtype if dtype is not None else _C.dtype.float32
    d = _dev(device)
    work = _C.dtype.float64 if dt == _C.dtype.float64 else _C.dtype.float32
    if steps == 1:
        out = _C.full([1], start, work, d, False)
    else:
        step = (end - start) / (steps - 1) if steps > 1 else 0.0
        i = _C.arange(0, steps, 1, work, d, False)
        step_t = _C.full([], step, work, d, False)
        front = step_t * i + start
        back = end - step_t * ((steps - 1) - i)
        out = _C.where(i < steps // 2, front, back)
    out = out.to(dt)
    return out.requires_grad_() if requires_grad else out


def _like(factory):
    def fn(input, *, dtype=None, device=None, requires_grad=False, memory_format=None):
        return factory(list(input.shape), dtype if dtype is not None else input.dtype,
                       _dev(device) if device is not None else input.device, requires_grad)
    fn.__name__ = factory.__name__ + "_like"
    fn.__doc__ = f"torch.{fn.__name__}: input's shape, dtype and device unless given."
    return fn


def full_like(input, fill_value, *, dtype=None, device=None, requires_grad=False, memory_format=None):
    """torch.full_like: input's shape, dtype and device (unless given) filled with fill_value."""
    return _C.full(list(input.shape), fill_value, dtype if dtype is not None else input.dtype,
                   _dev(device) if device is not None else input.device, requires_grad)


# ---- Tensor-only habits -----------------------------------------------------------------


def _data_get(self):
    """x.data: a detached alias sharing x's storage (requires_grad False)."""
    return self.detach()


def _data_set(self, value):
    """x.data = y: copies y into x's storage outside autograd (same shape and dtype;
    ValueError otherwise). PyTorch re-points x at y's storage; dtr keeps x's storage
    so every handle on x (an optimizer's parameter list) sees the new values."""
    if tuple(value.shape) != tuple(self.shape) or value.dtype != self.dtype:
        raise ValueError(f"x.data = y: dtr copies y into x, so y must have x's shape {tuple(self.shape)} "
                         f"and dtype {self.dtype}; got {tuple(value.shape)} and {value.dtype}")
    prev = _C.is_grad_enabled()
    _C.set_grad_enabled(False)
    try:
        self.copy_(value)
    finally:
        _C.set_grad_enabled(prev)


def _inplace(op):
    def method(self, other):
        return self.copy_(op(self, other))
    return method


def _reflected(op):
    def method(self, other):
        if not isinstance(other, (Tensor, _int, _float)):
            return NotImplemented
        return op(_t(other, self) if not isinstance(other, Tensor) else other, self)
    return method


def _binary_dunder(op):
    def method(self, other):
        if not isinstance(other, (Tensor, _int, _float)):
            return NotImplemented
        return op(self, other)
    return method


def _new(factory):
    def method(self, *size, dtype=None, device=None, requires_grad=False):
        return factory(_sizes(size), dtype if dtype is not None else self.dtype,
                       _dev(device) if device is not None else self.device, requires_grad)
    return method


def _new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False):
    return _C.full(list(size), fill_value, dtype if dtype is not None else self.dtype,
                   _dev(device) if device is not None else self.device, requires_grad)


def _softmax_method(self, dim, dtype=None):
    return softmax(self, dim, dtype)


# The table: (PyTorch name, callable, F/M/FM). Methods take the tensor as the
# callable's first argument.
SURFACE = [
    # unary
    *[(op.__name__, _unary(op), FM) for op in (
        _C.neg, _C.abs, _C.exp, _C.log, _C.sqrt, _C.rsqrt, _C.tanh, _C.sigmoid, _C.relu,
        _C.reciprocal, _C.sin, _C.cos, _C.erf)],
    ("negative", _unary(_C.neg), FM),
    ("silu", _unary(_C.silu), F),
    ("gelu", lambda input, approximate="none": _C.gelu(input, approximate), F),
    ("clamp", clamp, FM),
    ("clip", clamp, FM),
    # binary
    ("add", add, FM), ("sub", sub, FM), ("subtract", sub, FM), ("mul", mul, FM),
    ("multiply", mul, FM), ("div", div, FM), ("divide", div, FM), ("true_divide", div, FM),
    ("floor_divide", floor_divide, FM), ("remainder", remainder, FM),
    ("pow", lambda input, exponent: input ** exponent if isinstance(input, Tensor) else exponent.__rpow__(input), FM),
    ("maximum", _C.maximum, FM), ("minimum", _C.minimum, FM),
    *[(n, (lambda n: lambda input, other: getattr(input, f"__{n}__")(other))(n), F)
      for n in ("eq", "ne", "lt", "le", "gt", "ge")],
    ("where", where, F),
    ("nonzero", nonzero, FM),
    ("logical_and", logical_and, FM), ("logical_or", logical_or, FM),
    ("logical_xor", logical_xor, FM), ("logical_not", logical_not, FM),
    ("__and__", _bool_dunder(logical_and, "__and__"), M), ("__rand__", _bool_dunder(logical_and, "__and__"), M),
    ("__or__", _bool_dunder(logical_or, "__or__"), M), ("__ror__", _bool_dunder(logical_or, "__or__"), M),
    ("__xor__", _bool_dunder(logical_xor, "__xor__"), M), ("__rxor__", _bool_dunder(logical_xor, "__xor__"), M),
    ("__invert__", _invert, M), ("bitwise_not", _invert, FM),
    # reductions
    ("sum", sum, FM), ("mean", mean, FM), ("var", var, FM), ("std", std, FM),
    ("max", max, FM), ("min", min, FM), ("amax", amax, FM), ("amin", amin, FM),
    ("argmax", argmax, FM), ("argmin", argmin, FM), ("logsumexp", logsumexp, FM),
    ("cumsum", cumsum, FM), ("norm", norm, FM), ("all", all, FM), ("any", any, FM),
    ("softmax", softmax, FM), ("log_softmax", log_softmax, FM),
    # sorting, sampling
    ("sort", sort, FM), ("argsort", argsort, FM), ("topk", topk, FM),
    ("multinomial", multinomial, FM),
    # linear algebra
    ("matmul", matmul, FM), ("mm", mm, FM), ("bmm", bmm, FM), ("einsum", einsum, F),
    # views, joining, indexing, reordering
    ("cat", _C.cat, F), ("concat", _C.cat, F), ("stack", _C.stack, F),
    ("split", split, FM), ("chunk", chunk, FM), ("narrow", narrow, FM),
    *[(n, _view_fn(n), F) for n in ("reshape", "permute", "transpose", "t", "squeeze",
                                    "unsqueeze", "flatten", "select", "contiguous")],
    ("index_select", lambda input, dim, index: _C.index_select(input, dim, index), FM),
    ("gather", lambda input, dim, index: _C.gather(input, dim, index), FM),
    ("masked_fill", lambda input, mask, value: _C.masked_fill(input, mask, value), FM),
    ("tril", lambda input, diagonal=0: _C.tril(input, diagonal), FM),
    ("triu", lambda input, diagonal=0: _C.triu(input, diagonal), FM),
    ("flip", flip, F), ("flip", _flip_method, M),
    ("roll", roll, FM), ("repeat", _repeat_method, M),
    ("repeat_interleave", repeat_interleave, FM),
    ("scatter_add", lambda input, dim, index, src: _C.scatter_add(input, dim, index, src), FM),
    ("index_add", lambda input, dim, index, source, *, alpha=1:
        _C.index_add(input, dim, index, source, alpha), FM),
    ("scatter_add_", _C.scatter_add_, M), ("index_add_", _C.index_add_, M),
    # creation
    ("eye", eye, F), ("linspace", linspace, F), ("full_like", full_like, F),
    ("zeros_like", _like(_C.zeros), F), ("ones_like", _like(_C.ones), F),
    ("empty_like", _like(_C.empty), F), ("rand_like", _like(_C.rand), F),
    ("randn_like", _like(_C.randn), F),
    ("new_zeros", _new(_C.zeros), M), ("new_ones", _new(_C.ones), M),
    ("new_empty", _new(_C.empty), M), ("new_full", _new_full, M),
    # operators and Tensor-only habits
    ("__floordiv__", _binary_dunder(floor_divide), M),
    ("__rfloordiv__", _reflected(floor_divide), M),
    ("__ifloordiv__", _inplace(floor_divide), M), ("floor_divide_", _inplace(floor_divide), M),
    ("__mod__", _binary_dunder(remainder), M), ("__rmod__", _reflected(remainder), M),
    ("__imod__", _inplace(remainder), M), ("remainder_", _inplace(remainder), M),
    ("__ipow__", _inplace(lambda a, b: a ** b), M), ("pow_", _inplace(lambda a, b: a ** b), M),
    ("data", property(_data_get, _data_set), M),
]


def install(namespace):
    """Puts the table's functions into `namespace` (the dtr module's globals) and
    its methods on Tensor."""
    for name, fn, where_ in SURFACE:
        if "F" in where_:
            namespace[name] = fn
        if "M" in where_:
            setattr(Tensor, name, fn)


def legacy_tensor(*args):
    """torch.Tensor(...): Tensor(data) copies data as float32, Tensor(*sizes) is a
    float32 tensor of those sizes (zeros: dtr's empty is zero-filled), Tensor() is
    empty; Tensor(t) shares t."""
    from . import tensor, zeros
    if not args:
        return zeros(0)
    if len(args) == 1 and isinstance(args[0], Tensor):
        return args[0]
    if _b.all(isinstance(a, _int) and not isinstance(a, _bool) for a in args):
        return zeros(*args)
    if len(args) == 1:
        return tensor(args[0], dtype=_C.dtype.float32)
    raise TypeError(f"Tensor(): expected data (a sequence) or sizes (ints), got {args!r}")
