#!/usr/bin/python3
"""Generates tests/golden/golden.txt, the PyTorch reference values of the op
conformance harness (tests/eager/conformance_test.cpp).

Run with Debian's PyTorch (1.13, CPU):

    /usr/bin/python3 tests/golden/gen_golden.py            # rewrites golden.txt
    /usr/bin/python3 tests/golden/gen_golden.py --check    # fails if it would change

Every case builds its inputs from a closed formula (no RNG) so the C++ side can
rebuild them exactly, runs the op in float64, and records the outputs and the
gradients of  L = sum_k sum(out_k * w_k)  with respect to every input that
requires grad, where  w_k[i] = 0.5 + 0.37 * ((i * 7919) % 13) / 13  (only
floating outputs that require grad enter L).

Input formulas (i = row-major element index, double arithmetic):
  f  float  shift + scale * sin(0.37 * i + phase)
  q  float  floor(2 * sin(0.37 * i + phase) + 0.5) / 2     (multiples of 0.5: exact ties)
  i  int64  values written in the file
  b  bool   values written in the file (0/1)

File format, one record per line, tokens separated by single spaces:
  case NAME
  input f|q PHASE SCALE SHIFT REQUIRES_GRAD NDIM DIMS... CHECKSUM   (checksum: left-to-right sum)
  input i|b NDIM DIMS... VALUES...
  output f|i|b NDIM DIMS... VALUES...      (f: the run's floating dtype; i: int64; b: bool)
  grad INPUT_INDEX VALUES... | grad INPUT_INDEX none
  end
Floats are printed with %.17g, so they round-trip exactly.

Ops PyTorch 1.13 lacks (rms_norm, scaled_dot_product_attention) are computed
from their defining formula (PyTorch 2.x documentation) in float64.
"""

import argparse
import math
import os
import sys

import torch
import torch.nn.functional as F

torch.set_grad_enabled(True)
DT = torch.float64


# ----------------------------------------------------------------------------- inputs


class In:
    """One input: a formula (f, q) or explicit values (i, b)."""

    def __init__(self, kind, shape, phase=0.0, scale=1.0, shift=0.0, grad=False, values=None):
        self.kind, self.shape = kind, list(shape)
        self.phase, self.scale, self.shift, self.grad = float(phase), float(scale), float(shift), grad
        self.values = values

    def numel(self):
        return math.prod(self.shape)

    def host_values(self):
        n = self.numel()
        if self.kind == "f":
            return [self.shift + self.scale * math.sin(0.37 * i + self.phase) for i in range(n)]
        if self.kind == "q":
            return [math.floor(2.0 * math.sin(0.37 * i + self.phase) + 0.5) / 2.0 for i in range(n)]
        assert len(self.values) == n, (self.values, self.shape)
        return list(self.values)

    def tensor(self):
        v = self.host_values()
        if self.kind in ("f", "q"):
            t = torch.tensor(v, dtype=DT).reshape(self.shape)
            return t.requires_grad_(self.grad)
        if self.kind == "i":
            return torch.tensor(v, dtype=torch.int64).reshape(self.shape)
        return torch.tensor([bool(x) for x in v], dtype=torch.bool).reshape(self.shape)

    def line(self):
        dims = [str(len(self.shape))] + [str(d) for d in self.shape]
        if self.kind in ("f", "q"):
            checksum = 0.0
            for x in self.host_values():
                checksum += x
            return " ".join(["input", self.kind, g(self.phase), g(self.scale), g(self.shift),
                             "1" if self.grad else "0"] + dims + [g(checksum)])
        return " ".join(["input", self.kind] + dims + [str(int(x)) for x in self.host_values()])


def f(shape, phase, scale=1.0, shift=0.0, grad=True):
    return In("f", shape, phase, scale, shift, grad)


def pos(shape, phase, grad=True):
    """Positive floats in [0.5, 2]."""
    return In("f", shape, phase, 0.75, 1.25, grad)


def q(shape, phase):
    return In("q", shape, phase)


def ints(shape, values):
    return In("i", shape, values=values)


def mask(shape, values):
    return In("b", shape, values=values)


def g(x):
    return "%.17g" % x


def weights(n):
    return [0.5 + 0.37 * ((i * 7919) % 13) / 13.0 for i in range(n)]


# ----------------------------------------------------------------------------- references torch 1.13 lacks


def rms_norm_ref(x, normalized_shape, weight=None, eps=None):
    if eps is None:
        eps = torch.finfo(x.dtype).eps
    dims = tuple(range(-len(normalized_shape), 0))
    y = x * torch.rsqrt(x.pow(2).mean(dims, keepdim=True) + eps)
    return y * weight if weight is not None else y


def sdpa_ref(q_, k, v, attn_mask=None, is_causal=False, scale=None):
    s = scale if scale is not None else 1.0 / math.sqrt(q_.shape[-1])
    a = (q_ @ k.transpose(-2, -1)) * s
    L, S = a.shape[-2], a.shape[-1]
    if is_causal:
        keep = torch.ones(L, S, dtype=torch.bool).tril(0)
        a = a.masked_fill(~keep, float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            a = a.masked_fill(~attn_mask, float("-inf"))
        else:
            a = a + attn_mask
    return torch.softmax(a, dim=-1) @ v


# ----------------------------------------------------------------------------- the cases
# Each case: (name, [inputs], fn(inputs) -> tensor or tuple of tensors).
# The C++ table in tests/eager/conformance_test.cpp mirrors these lambdas.

CASES = []


def case(name, inputs, fn):
    CASES.append((name, inputs, fn))


def add_cases():
    S = [3, 4]
    # ---- creation (deterministic arguments only)
    case("zeros", [], lambda: torch.zeros(2, 3, dtype=DT))
    case("ones", [], lambda: torch.ones(2, 3, dtype=DT))
    case("full", [], lambda: torch.full((2, 2), 2.5, dtype=DT))
    case("arange_end", [], lambda: torch.arange(5))
    case("arange_start_step", [], lambda: torch.arange(1.0, 2.0, 0.25, dtype=DT))
    case("arange_negative_step", [], lambda: torch.arange(5, -3, -2))
    # dtypes inferred from the fill value (no dtype given)
    case("full_int_value", [], lambda: torch.full((2, 2), 3))
    case("full_bool_value", [], lambda: torch.full((3,), True))
    case("zeros_like", [f(S, 1.0, grad=False)], lambda x: torch.zeros_like(x))
    case("ones_like", [f(S, 1.0, grad=False)], lambda x: torch.ones_like(x))
    case("full_like", [f(S, 1.0, grad=False)], lambda x: torch.full_like(x, -1.5))

    # ---- unary
    case("neg", [f(S, 0.3)], lambda x: torch.neg(x))
    case("abs", [f(S, 0.3)], lambda x: torch.abs(x))
    case("exp", [f(S, 0.4, scale=2.0)], lambda x: torch.exp(x))
    case("log", [pos(S, 0.5)], lambda x: torch.log(x))
    case("sqrt", [pos(S, 0.6)], lambda x: torch.sqrt(x))
    case("rsqrt", [pos(S, 0.7)], lambda x: torch.rsqrt(x))
    case("tanh", [f(S, 0.8, scale=2.0)], lambda x: torch.tanh(x))
    case("sigmoid", [f(S, 0.9, scale=3.0)], lambda x: torch.sigmoid(x))
    case("relu", [f(S, 1.1)], lambda x: torch.relu(x))
    case("reciprocal", [pos(S, 1.2)], lambda x: torch.reciprocal(x))
    case("gelu", [f(S, 1.3, scale=3.0)], lambda x: F.gelu(x))
    case("gelu_tanh", [f(S, 1.4, scale=3.0)], lambda x: F.gelu(x, approximate="tanh"))
    case("silu", [f(S, 1.5, scale=3.0)], lambda x: F.silu(x))
    case("clamp", [f(S, 1.6)], lambda x: torch.clamp(x, -0.5, 0.5))
    case("clamp_min", [f(S, 1.7)], lambda x: torch.clamp(x, min=-0.25))
    case("clamp_max", [f(S, 1.8)], lambda x: torch.clamp(x, max=0.25))
    case("sin", [f(S, 1.91, scale=4.0)], lambda x: torch.sin(x))
    case("cos", [f(S, 1.92, scale=4.0)], lambda x: torch.cos(x))
    case("erf", [f(S, 1.93, scale=2.5)], lambda x: torch.erf(x))
    case("sin_method", [f(S, 1.94, scale=4.0)], lambda x: x.sin())

    # ---- binary (tensor, broadcasting, scalar)
    case("add", [f(S, 2.0), f(S, 2.1)], lambda a, b: torch.add(a, b))
    case("add_alpha", [f(S, 2.0), f(S, 2.1)], lambda a, b: torch.add(a, b, alpha=2.5))
    case("add_broadcast", [f([2, 3, 4], 2.2), f([3, 1], 2.3)], lambda a, b: torch.add(a, b))
    case("add_scalar", [f(S, 2.4)], lambda a: torch.add(a, 1.5))
    case("add_int64", [ints([2, 3], [1, -2, 3, 4, 5, -6]), ints([3], [10, 20, 30])],
         lambda a, b: torch.add(a, b))
    case("sub", [f(S, 2.5), f(S, 2.6)], lambda a, b: torch.sub(a, b))
    case("sub_alpha", [f(S, 2.5), f([4], 2.6)], lambda a, b: torch.sub(a, b, alpha=0.5))
    case("sub_broadcast", [f([4], 2.7), f([2, 3, 1], 2.8)], lambda a, b: torch.sub(a, b))
    case("sub_scalar", [f(S, 2.9)], lambda a: torch.sub(a, 0.75))
    case("rsub_scalar", [f(S, 3.0)], lambda a: 2.0 - a)
    case("mul", [f(S, 3.1), f(S, 3.2)], lambda a, b: torch.mul(a, b))
    case("mul_broadcast", [f([2, 1, 4], 3.3), f([3, 1], 3.4)], lambda a, b: torch.mul(a, b))
    case("mul_scalar", [f(S, 3.5)], lambda a: torch.mul(a, -3.0))
    case("mul_int64", [ints([2, 3], [1, -2, 3, 4, 5, -6]), ints([2, 1], [3, -4])],
         lambda a, b: torch.mul(a, b))
    case("div", [f(S, 3.6), pos(S, 3.7)], lambda a, b: torch.div(a, b))
    case("div_broadcast", [f([2, 3], 3.8), pos([3], 3.9)], lambda a, b: torch.div(a, b))
    case("div_scalar", [f(S, 4.0)], lambda a: torch.div(a, 4.0))
    case("rdiv_scalar", [pos(S, 4.1)], lambda a: 3.0 / a)
    case("pow", [pos(S, 4.2), f(S, 4.3)], lambda a, b: torch.pow(a, b))
    case("pow_broadcast", [pos([2, 3], 4.4), f([3], 4.5)], lambda a, b: torch.pow(a, b))
    case("pow_scalar_2", [f(S, 4.6)], lambda a: torch.pow(a, 2.0))
    case("pow_scalar_3", [f(S, 4.7)], lambda a: torch.pow(a, 3))
    case("pow_scalar_half", [pos(S, 4.8)], lambda a: torch.pow(a, 0.5))
    case("pow_scalar_neg", [pos(S, 4.9)], lambda a: torch.pow(a, -1.5))
    case("maximum", [f(S, 5.0), f(S, 5.1)], lambda a, b: torch.maximum(a, b))
    case("maximum_broadcast", [f(S, 5.2), f([4], 5.3)], lambda a, b: torch.maximum(a, b))
    case("minimum", [f(S, 5.4), f(S, 5.5)], lambda a, b: torch.minimum(a, b))
    case("minimum_broadcast", [f([3, 1], 5.6), f(S, 5.7)], lambda a, b: torch.minimum(a, b))

    # ---- comparisons (q inputs give exact ties)
    for op in ["eq", "ne", "lt", "le", "gt", "ge"]:
        fn = getattr(torch, op)
        case(op, [q(S, 6.0), q(S, 6.1)], lambda a, b, fn=fn: fn(a, b))
        case(op + "_broadcast", [q(S, 6.2), q([4], 6.3)], lambda a, b, fn=fn: fn(a, b))
        case(op + "_scalar", [q(S, 6.4)], lambda a, fn=fn: fn(a, 0.5))

    # ---- where
    cond = mask(S, [1, 0, 0, 1, 1, 1, 0, 0, 1, 0, 1, 0])
    case("where", [cond, f(S, 7.0), f(S, 7.1)], lambda c, a, b: torch.where(c, a, b))
    case("where_broadcast", [mask([3, 1], [1, 0, 1]), f([4], 7.2), f(S, 7.3)],
         lambda c, a, b: torch.where(c, a, b))

    # ---- reductions
    X = [2, 3, 4]
    case("sum_all", [f(X, 8.0)], lambda x: torch.sum(x))
    case("sum_dim", [f(X, 8.1)], lambda x: torch.sum(x, [1]))
    case("sum_dims_keepdim", [f(X, 8.2)], lambda x: torch.sum(x, [0, 2], keepdim=True))
    case("sum_negative_dim", [f(X, 8.3)], lambda x: torch.sum(x, [-1]))
    case("sum_int64", [ints([2, 3], [1, -2, 3, 4, 5, -6])], lambda x: torch.sum(x, [1]))
    case("mean_all", [f(X, 8.4)], lambda x: torch.mean(x))
    case("mean_dim", [f(X, 8.5)], lambda x: torch.mean(x, [-1]))
    case("mean_dims_keepdim", [f(X, 8.6)], lambda x: torch.mean(x, [0, 1], keepdim=True))
    case("max_all", [f(X, 8.7)], lambda x: torch.max(x))
    case("max_dim", [f(X, 8.8)], lambda x: tuple(torch.max(x, 1)))
    case("max_dim_keepdim", [f(X, 8.9)], lambda x: tuple(torch.max(x, -1, keepdim=True)))
    case("argmax", [f(X, 9.0)], lambda x: torch.argmax(x, 2))
    case("argmax_keepdim", [f(X, 9.1)], lambda x: torch.argmax(x, 0, keepdim=True))
    case("var_all", [f(X, 9.2)], lambda x: torch.var(x, [0, 1, 2], correction=1))
    case("var_dim", [f(X, 9.3)], lambda x: torch.var(x, [1], correction=1))
    case("var_correction0_keepdim", [f(X, 9.4)],
         lambda x: torch.var(x, [0, 2], correction=0, keepdim=True))
    case("argmin", [f(X, 9.51)], lambda x: torch.argmin(x, 1))
    case("argmin_keepdim", [f(X, 9.52)], lambda x: torch.argmin(x, -1, keepdim=True))
    case("argmin_method", [f(X, 9.53)], lambda x: x.argmin(0))
    case("amax_all", [f(X, 9.54)], lambda x: torch.amax(x, [0, 1, 2]))
    case("amax_dims", [f(X, 9.55)], lambda x: torch.amax(x, [0, 2]))
    case("amax_keepdim", [f(X, 9.56)], lambda x: torch.amax(x, -1, keepdim=True))
    case("amax_int64", [ints([2, 3], [1, -2, 3, 4, 5, -6])], lambda x: torch.amax(x, [1]))
    case("amin_all", [f(X, 9.57)], lambda x: torch.amin(x, [0, 1, 2]))
    case("amin_dim", [f(X, 9.58)], lambda x: torch.amin(x, [1]))
    case("amin_method_keepdim", [f(X, 9.59)], lambda x: x.amin([0, 1], keepdim=True))
    case("logsumexp", [f(X, 9.61, scale=3.0)], lambda x: torch.logsumexp(x, [1]))
    case("logsumexp_keepdim", [f(X, 9.62, scale=3.0)], lambda x: torch.logsumexp(x, [0, 2], keepdim=True))
    case("logsumexp_all", [f(X, 9.63, scale=3.0)], lambda x: torch.logsumexp(x, [0, 1, 2]))
    case("logsumexp_large", [f(X, 9.64, scale=2.0, shift=100.0)], lambda x: torch.logsumexp(x, [-1]))
    case("logsumexp_method", [f(X, 9.65)], lambda x: x.logsumexp([0]))
    case("cumsum", [f(X, 9.71)], lambda x: torch.cumsum(x, 1))
    case("cumsum_dim0", [f(X, 9.72)], lambda x: torch.cumsum(x, 0))
    case("cumsum_method_negative_dim", [f(X, 9.73)], lambda x: x.cumsum(-1))
    case("cumsum_int64", [ints([2, 3], [1, -2, 3, 4, 5, -6])], lambda x: torch.cumsum(x, 1))

    # ---- sorting (inputs without ties; the tie order is tested in sort_test.cpp)
    case("sort", [f(X, 9.81)], lambda x: tuple(torch.sort(x, stable=True)))
    case("sort_descending_dim0", [f(X, 9.82)], lambda x: tuple(torch.sort(x, stable=True, dim=0, descending=True)))
    case("sort_method", [f(X, 9.83)], lambda x: tuple(x.sort(1, True)))
    case("topk", [f(X, 9.84)], lambda x: tuple(torch.topk(x, 2)))
    case("topk_smallest_dim1", [f(X, 9.85)], lambda x: tuple(torch.topk(x, 2, dim=1, largest=False)))
    case("topk_method", [f(X, 9.86)], lambda x: tuple(x.topk(1, 0)))
    case("topk_int64", [ints([2, 3], [1, -2, 3, 4, 5, -6])], lambda x: tuple(torch.topk(x, 2)))

    # ---- matmul / linear
    case("matmul_2d", [f([3, 4], 10.0), f([4, 5], 10.1)], lambda a, b: torch.matmul(a, b))
    case("matmul_dot", [f([5], 10.2), f([5], 10.3)], lambda a, b: torch.matmul(a, b))
    case("matmul_1d_2d", [f([4], 10.4), f([4, 3], 10.5)], lambda a, b: torch.matmul(a, b))
    case("matmul_2d_1d", [f([3, 4], 10.6), f([4], 10.7)], lambda a, b: torch.matmul(a, b))
    case("matmul_batched", [f([2, 3, 4], 10.8), f([2, 4, 5], 10.9)], lambda a, b: torch.matmul(a, b))
    case("matmul_batched_2d", [f([2, 3, 4], 11.0), f([4, 2], 11.1)], lambda a, b: torch.matmul(a, b))
    case("matmul_broadcast", [f([2, 1, 3, 4], 11.2), f([3, 4, 2], 11.3)],
         lambda a, b: torch.matmul(a, b))
    case("matmul_1d_batched", [f([4], 11.4), f([2, 4, 3], 11.5)], lambda a, b: torch.matmul(a, b))
    case("linear", [f([2, 3, 4], 12.0), f([5, 4], 12.1), f([5], 12.2)],
         lambda x, w, b: F.linear(x, w, b))
    case("linear_no_bias", [f([3, 4], 12.3), f([2, 4], 12.4)], lambda x, w: F.linear(x, w))
    case("linear_1d", [f([4], 12.5), f([3, 4], 12.6), f([3], 12.7)], lambda x, w, b: F.linear(x, w, b))

    # ---- softmax family and losses
    case("softmax", [f(X, 13.0, scale=3.0)], lambda x: torch.softmax(x, -1))
    case("softmax_dim0", [f(X, 13.1, scale=3.0)], lambda x: torch.softmax(x, 0))
    case("log_softmax", [f(X, 13.2, scale=3.0)], lambda x: torch.log_softmax(x, 1))
    case("log_softmax_last", [f(X, 13.3, scale=3.0)], lambda x: torch.log_softmax(x, -1))
    tgt = ints([5], [1, 0, 3, -100, 2])
    case("cross_entropy", [f([5, 4], 14.0, scale=2.0), tgt], lambda x, t: F.cross_entropy(x, t))
    case("cross_entropy_sum", [f([5, 4], 14.1, scale=2.0), tgt],
         lambda x, t: F.cross_entropy(x, t, reduction="sum"))
    case("cross_entropy_none", [f([5, 4], 14.2, scale=2.0), tgt],
         lambda x, t: F.cross_entropy(x, t, reduction="none"))
    case("cross_entropy_ignore_index", [f([5, 4], 14.3, scale=2.0), ints([5], [1, 2, 3, 2, 0])],
         lambda x, t: F.cross_entropy(x, t, ignore_index=2))
    case("cross_entropy_spatial", [f([2, 3, 4], 14.4, scale=2.0),
                                   ints([2, 4], [0, 1, 2, -100, 2, 2, 1, 0])],
         lambda x, t: F.cross_entropy(x, t))
    case("nll_loss", [f([5, 4], 15.0), tgt], lambda x, t: F.nll_loss(x, t))
    case("nll_loss_sum", [f([5, 4], 15.1), tgt], lambda x, t: F.nll_loss(x, t, reduction="sum"))
    case("nll_loss_none", [f([5, 4], 15.2), ints([5], [1, 2, 3, 2, 0])],
         lambda x, t: F.nll_loss(x, t, ignore_index=2, reduction="none"))
    case("mse_loss", [f(S, 16.0), f(S, 16.1)], lambda a, b: F.mse_loss(a, b))
    case("mse_loss_sum", [f(S, 16.2), f(S, 16.3)], lambda a, b: F.mse_loss(a, b, reduction="sum"))
    case("mse_loss_none", [f(S, 16.4), f(S, 16.5)], lambda a, b: F.mse_loss(a, b, reduction="none"))

    # ---- normalization
    case("layer_norm", [f(X, 17.0, scale=2.0, shift=0.3), f([4], 17.1, shift=1.0), f([4], 17.2)],
         lambda x, w, b: F.layer_norm(x, [4], w, b))
    case("layer_norm_2d_no_affine", [f(X, 17.3, scale=2.0)], lambda x: F.layer_norm(x, [3, 4]))
    case("layer_norm_eps", [f(X, 17.4), f([4], 17.5, shift=1.0), f([4], 17.6)],
         lambda x, w, b: F.layer_norm(x, [4], w, b, eps=0.1))
    case("rms_norm", [f(X, 18.0, scale=2.0), f([4], 18.1, shift=1.0)],
         lambda x, w: rms_norm_ref(x, [4], w, eps=1e-5))
    case("rms_norm_default_eps", [f(X, 18.2, scale=2.0)], lambda x: rms_norm_ref(x, [3, 4]))
    BN = [3, 2, 2, 2]

    def bn(x, rm, rv, w, b, training):
        out = F.batch_norm(x, rm, rv, w, b, training=training, momentum=0.1, eps=1e-5)
        return out, rm.clone(), rv.clone()

    case("batch_norm_train", [f(BN, 19.0, scale=2.0, shift=0.5), f([2], 19.1, grad=False),
                              pos([2], 19.2, grad=False), f([2], 19.3, shift=1.0), f([2], 19.4)],
         lambda x, rm, rv, w, b: bn(x, rm, rv, w, b, True))
    case("batch_norm_eval", [f(BN, 19.5, scale=2.0), f([2], 19.6, grad=False),
                             pos([2], 19.7, grad=False), f([2], 19.8, shift=1.0), f([2], 19.9)],
         lambda x, rm, rv, w, b: bn(x, rm, rv, w, b, False))
    case("batch_norm_train_2d_no_affine", [f([4, 3], 20.0, scale=2.0), f([3], 20.1, grad=False),
                                           pos([3], 20.2, grad=False)],
         lambda x, rm, rv: bn(x, rm, rv, None, None, True))

    # ---- embedding, dropout in its deterministic settings
    case("embedding", [f([6, 3], 21.0), ints([2, 3], [1, 5, 1, 0, 3, 1])],
         lambda w, i: F.embedding(i, w))
    case("dropout_eval", [f(S, 21.1)], lambda x: F.dropout(x, 0.5, training=False))
    case("dropout_p0", [f(S, 21.2)], lambda x: F.dropout(x, 0.0, training=True))
    case("one_hot", [ints([2, 3], [0, 2, 1, 3, 0, 1])], lambda x: F.one_hot(x))
    case("one_hot_num_classes", [ints([4], [4, 0, 2, 2])], lambda x: F.one_hot(x, 6))

    # ---- convolution and pooling
    case("conv2d", [f([1, 2, 5, 5], 22.0), f([3, 2, 3, 3], 22.1), f([3], 22.2)],
         lambda x, w, b: F.conv2d(x, w, b))
    case("conv2d_stride_padding", [f([2, 2, 5, 5], 22.3), f([3, 2, 3, 3], 22.4), f([3], 22.5)],
         lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1))
    case("conv2d_dilation", [f([1, 2, 6, 6], 22.6), f([2, 2, 3, 3], 22.7)],
         lambda x, w: F.conv2d(x, w, None, dilation=2))
    case("conv2d_groups", [f([1, 4, 4, 4], 22.8), f([4, 2, 3, 3], 22.9), f([4], 23.0)],
         lambda x, w, b: F.conv2d(x, w, b, padding=1, groups=2))
    case("conv2d_rect", [f([2, 3, 5, 4], 23.1), f([2, 3, 2, 3], 23.2), f([2], 23.3)],
         lambda x, w, b: F.conv2d(x, w, b, stride=(2, 1), padding=(0, 1)))
    case("conv2d_depthwise", [f([1, 3, 4, 4], 23.4), f([3, 1, 2, 2], 23.5)],
         lambda x, w: F.conv2d(x, w, None, groups=3))
    P = [2, 2, 5, 5]
    case("max_pool2d", [f(P, 24.0)], lambda x: F.max_pool2d(x, 2))
    case("max_pool2d_stride_padding", [f(P, 24.1)], lambda x: F.max_pool2d(x, 3, 2, 1))
    case("max_pool2d_rect", [f(P, 24.2)], lambda x: F.max_pool2d(x, (2, 3), (1, 2)))
    case("avg_pool2d", [f(P, 24.3)], lambda x: F.avg_pool2d(x, 2))
    case("avg_pool2d_stride_padding", [f(P, 24.4)], lambda x: F.avg_pool2d(x, 3, 2, 1))
    case("adaptive_avg_pool2d", [f(P, 24.5)], lambda x: F.adaptive_avg_pool2d(x, (2, 3)))
    case("adaptive_avg_pool2d_global", [f(P, 24.6)], lambda x: F.adaptive_avg_pool2d(x, (1, 1)))

    # ---- vision: transposed convolution, group norm, padding, resampling, dropout2d
    case("conv_transpose2d", [f([1, 2, 3, 3], 60.0), f([2, 3, 3, 3], 60.1), f([3], 60.2)],
         lambda x, w, b: F.conv_transpose2d(x, w, b))
    case("conv_transpose2d_stride_padding", [f([2, 2, 3, 3], 60.3), f([2, 2, 3, 3], 60.4), f([2], 60.5)],
         lambda x, w, b: F.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1))
    case("conv_transpose2d_groups_dilation", [f([1, 4, 3, 3], 60.6), f([4, 1, 2, 2], 60.7)],
         lambda x, w: F.conv_transpose2d(x, w, None, groups=2, dilation=2))
    case("conv_transpose2d_rect", [f([1, 3, 3, 4], 60.8), f([3, 2, 2, 3], 60.9), f([2], 61.0)],
         lambda x, w, b: F.conv_transpose2d(x, w, b, stride=(2, 1), padding=(0, 1), output_padding=(1, 0)))
    case("conv_transpose2d_output_padding_dilation", [f([1, 2, 3, 3], 61.1), f([2, 2, 2, 2], 61.2)],
         lambda x, w: F.conv_transpose2d(x, w, None, output_padding=1, dilation=2))
    case("group_norm", [f([2, 4, 2, 3], 61.3, scale=2.0), f([4], 61.4, shift=1.0), f([4], 61.5)],
         lambda x, w, b: F.group_norm(x, 2, w, b))
    case("group_norm_3d_no_affine", [f([2, 6, 5], 61.6, scale=2.0)], lambda x: F.group_norm(x, 3))
    case("group_norm_one_group_eps", [f([1, 3, 2, 2], 61.7), f([3], 61.8, shift=1.0), f([3], 61.9)],
         lambda x, w, b: F.group_norm(x, 1, w, b, eps=0.1))
    case("group_norm_per_channel", [f([2, 3, 4], 62.0, scale=2.0), f([3], 62.1, shift=1.0)],
         lambda x, w: F.group_norm(x, 3, w))
    case("pad_constant", [f([2, 3, 4], 62.2)], lambda x: F.pad(x, (1, 2)))
    case("pad_constant_value_2d", [f([2, 3, 4], 62.3)], lambda x: F.pad(x, (1, 0, 2, 1), value=1.5))
    case("pad_constant_negative", [f([2, 3, 4], 62.4)], lambda x: F.pad(x, (-1, 1, 0, -1)))
    case("pad_constant_3dims", [f([2, 3, 4], 62.5)], lambda x: F.pad(x, (1, 1, 1, 1, 1, 0)))
    case("pad_reflect_1d", [f([2, 3, 4], 62.6)], lambda x: F.pad(x, (2, 3), mode="reflect"))
    case("pad_reflect_2d", [f([1, 2, 3, 4], 62.7)], lambda x: F.pad(x, (1, 2, 2, 1), mode="reflect"))
    case("pad_reflect_2d_unbatched", [f([2, 3, 4], 62.8)], lambda x: F.pad(x, (3, 0, 0, 2), mode="reflect"))
    case("interpolate_nearest_size", [f([1, 2, 3, 4], 63.0)], lambda x: F.interpolate(x, size=(5, 7)))
    case("interpolate_nearest_scale", [f([1, 2, 2, 3], 63.1)],
         lambda x: F.interpolate(x, scale_factor=2.0))
    case("interpolate_nearest_scale_fraction", [f([1, 1, 4, 6], 63.2)],
         lambda x: F.interpolate(x, scale_factor=(1.5, 0.5)))
    case("interpolate_nearest_down", [f([1, 2, 5, 7], 63.3)], lambda x: F.interpolate(x, size=(2, 3)))
    case("interpolate_bilinear", [f([1, 2, 3, 4], 63.4)],
         lambda x: F.interpolate(x, size=(5, 7), mode="bilinear", align_corners=False))
    case("interpolate_bilinear_align_corners", [f([1, 2, 3, 4], 63.5)],
         lambda x: F.interpolate(x, size=(5, 7), mode="bilinear", align_corners=True))
    case("interpolate_bilinear_scale", [f([2, 1, 3, 3], 63.6)],
         lambda x: F.interpolate(x, scale_factor=1.7, mode="bilinear"))
    case("interpolate_bilinear_down", [f([1, 2, 4, 5], 63.7)],
         lambda x: F.interpolate(x, size=(2, 3), mode="bilinear"))
    case("dropout2d_eval", [f([2, 3, 2, 2], 63.8)], lambda x: F.dropout2d(x, 0.5, training=False))
    case("dropout2d_p0", [f([2, 3, 2, 2], 63.9)], lambda x: F.dropout2d(x, 0.0, training=True))

    # ---- views
    V = [2, 3, 4]
    case("view", [f(V, 25.0)], lambda x: x.view(6, 4))
    case("view_infer", [f(V, 25.1)], lambda x: x.view(4, -1))
    case("reshape_noncontiguous", [f(V, 25.2)], lambda x: x.transpose(0, 2).reshape(-1, 6))
    case("transpose", [f(V, 25.3)], lambda x: x.transpose(0, 2))
    case("permute", [f(V, 25.4)], lambda x: x.permute(2, 0, 1))
    case("slice", [f(V, 25.5)], lambda x: x[:, 1:3])
    case("slice_step", [f(V, 25.6)], lambda x: x[:, :, 1::2])
    case("slice_negative_start", [f(V, 25.7)], lambda x: x[:, -2:])
    case("slice_end_past_size", [f(V, 25.8)], lambda x: x[:, :, 1:100])
    case("narrow", [f(V, 25.9)], lambda x: torch.narrow(x, 2, 1, 2))
    case("select", [f(V, 26.0)], lambda x: torch.select(x, 1, 1))
    case("select_negative", [f(V, 26.1)], lambda x: torch.select(x, 2, -1))
    case("unsqueeze", [f(V, 26.2)], lambda x: x.unsqueeze(1))
    case("unsqueeze_last", [f(V, 26.3)], lambda x: x.unsqueeze(-1))
    case("squeeze", [f([2, 1, 3, 1], 26.4)], lambda x: x.squeeze())
    case("squeeze_dim", [f([2, 1, 3, 1], 26.5)], lambda x: x.squeeze(1))
    case("expand", [f([3, 1], 26.6)], lambda x: x.expand(2, 3, 4))
    case("flatten", [f(V, 26.7)], lambda x: torch.flatten(x, 1))
    case("flatten_all", [f(V, 26.8)], lambda x: torch.flatten(x))
    case("contiguous", [f(V, 26.9)], lambda x: x.transpose(1, 2).contiguous())
    case("view_chain", [f(V, 27.0)], lambda x: x.permute(1, 0, 2)[1:, :, ::3].unsqueeze(0) * 2.0)

    # ---- joining and indexing
    case("cat", [f([2, 3], 28.0), f([1, 3], 28.1), f([3, 3], 28.2)], lambda a, b, c: torch.cat([a, b, c], 0))
    case("cat_dim1", [f([2, 2], 28.3), f([2, 3], 28.4)], lambda a, b: torch.cat([a, b], 1))
    case("cat_negative_dim", [f([2, 3, 1], 28.5), f([2, 3, 2], 28.6)], lambda a, b: torch.cat([a, b], -1))
    case("stack", [f(S, 28.7), f(S, 28.8)], lambda a, b: torch.stack([a, b], 0))
    case("stack_dim1", [f(S, 28.9), f(S, 29.0), f(S, 29.1)], lambda a, b, c: torch.stack([a, b, c], 1))
    case("split", [f([5, 3], 29.2)], lambda x: tuple(torch.split(x, 2, 0)))
    case("split_dim1", [f([2, 7], 29.3)], lambda x: tuple(torch.split(x, 3, 1)))
    case("chunk", [f([2, 7], 29.4)], lambda x: tuple(torch.chunk(x, 3, 1)))
    case("chunk_even", [f([6, 2], 29.5)], lambda x: tuple(torch.chunk(x, 3, 0)))
    case("index_select", [f([5, 3], 30.0), ints([4], [4, 0, 2, 0])],
         lambda x, i: torch.index_select(x, 0, i))
    case("index_select_dim1", [f([2, 5], 30.1), ints([3], [1, 1, 4])],
         lambda x, i: torch.index_select(x, 1, i))
    case("gather", [f([3, 4], 30.2), ints([3, 2], [0, 3, 1, 1, 2, 0])],
         lambda x, i: torch.gather(x, 1, i))
    case("gather_dim0", [f([3, 4], 30.3), ints([2, 4], [0, 1, 2, 0, 2, 2, 1, 0])],
         lambda x, i: torch.gather(x, 0, i))
    case("masked_fill", [f(S, 31.0), mask(S, [1, 0, 0, 1, 0, 1, 1, 0, 0, 0, 1, 0])],
         lambda x, m: x.masked_fill(m, -2.0))
    case("masked_fill_broadcast", [f(S, 31.1), mask([4], [0, 1, 1, 0])],
         lambda x, m: x.masked_fill(m, 3.5))
    case("tril", [f([4, 5], 32.0)], lambda x: torch.tril(x))
    case("tril_diagonal", [f([4, 5], 32.1)], lambda x: torch.tril(x, -1))
    case("triu", [f([4, 5], 32.2)], lambda x: torch.triu(x))
    case("triu_diagonal", [f([4, 5], 32.3)], lambda x: torch.triu(x, 2))
    case("tril_batched", [f([2, 3, 3], 32.4)], lambda x: torch.tril(x))

    # ---- reordering, tiling, accumulating scatters
    case("flip", [f([2, 3, 4], 50.0)], lambda x: torch.flip(x, [0, 2]))
    case("flip_negative_dim", [f([3, 4], 50.1)], lambda x: x.flip([-1]))
    case("roll", [f([2, 3, 4], 50.2)], lambda x: torch.roll(x, [1, -2], [0, 2]))
    case("roll_flattened", [f([3, 4], 50.3)], lambda x: x.roll(5))
    case("roll_past_size", [f([2, 3], 50.4)], lambda x: torch.roll(x, 7, 1))
    case("repeat", [f([3, 2], 50.5)], lambda x: x.repeat(2, 1, 3))
    case("repeat_ones", [f([2, 3], 50.6)], lambda x: x.repeat(1, 1))
    case("repeat_interleave", [f([2, 3], 50.7)], lambda x: torch.repeat_interleave(x, 2, 1))
    case("repeat_interleave_flat", [f([2, 2], 50.8)], lambda x: x.repeat_interleave(3))
    case("repeat_interleave_tensor", [f([3, 2], 50.9), ints([3], [2, 0, 3])],
         lambda x, r: torch.repeat_interleave(x, r, 0))
    # grouped-query attention: 2 key/value heads shared by 4 query heads
    case("repeat_interleave_gqa", [f([1, 2, 3, 2], 51.0)], lambda x: torch.repeat_interleave(x, 2, 1))
    case("scatter_add", [f([3, 4], 51.1), ints([2, 4], [0, 1, 2, 0, 2, 2, 1, 0]), f([2, 5], 51.2, grad=False)],
         lambda x, i, s: torch.scatter_add(x, 0, i, s))  # PyTorch's src gradient fails when src is larger
    case("scatter_add_dim1", [f([2, 3], 51.3), ints([2, 4], [0, 2, 2, 1, 1, 1, 0, 2]), f([2, 4], 51.4)],
         lambda x, i, s: x.scatter_add(1, i, s))
    case("scatter_add_", [f([2, 3], 51.5), ints([2, 2], [2, 2, 0, 1]), f([2, 2], 51.6)],
         lambda x, i, s: x.clone().scatter_add_(1, i, s))
    case("index_add", [f([4, 3], 51.7), ints([5], [3, 0, 3, 1, 3]), f([5, 3], 51.8)],
         lambda x, i, s: torch.index_add(x, 0, i, s))
    case("index_add_alpha_dim1", [f([2, 4], 51.9), ints([3], [1, 1, 0]), f([2, 3], 52.0)],
         lambda x, i, s: x.index_add(1, i, s, alpha=-1.5))
    case("index_add_", [f([3, 2], 52.1), ints([2], [2, 2]), f([2, 2], 52.2)],
         lambda x, i, s: x.clone().index_add_(0, i, s, alpha=2.0))

    # ---- einsum
    case("einsum_matmul", [f([2, 3], 53.0), f([3, 4], 53.1)], lambda a, b: torch.einsum("ij,jk->ik", a, b))
    case("einsum_bmm", [f([2, 2, 3], 53.2), f([2, 3, 2], 53.3)],
         lambda a, b: torch.einsum("bij,bjk->bik", a, b))
    case("einsum_attention_scores", [f([1, 2, 3, 4], 53.4), f([1, 2, 2, 4], 53.5)],
         lambda a, b: torch.einsum("bhqd,bhkd->bhqk", a, b))
    case("einsum_attention_values", [f([1, 2, 3, 2], 53.6), f([1, 2, 2, 4], 53.7)],
         lambda a, b: torch.einsum("bhqk,bhkd->bhqd", a, b))
    case("einsum_dot", [f([5], 53.8), f([5], 53.9)], lambda a, b: torch.einsum("i,i->", a, b))
    case("einsum_transpose", [f([2, 3], 54.0)], lambda a: torch.einsum("ij->ji", a))
    case("einsum_diagonal", [f([3, 3], 54.1)], lambda a: torch.einsum("ii->i", a))
    case("einsum_sum_all", [f([2, 3], 54.2)], lambda a: torch.einsum("ij->", a))
    case("einsum_implicit", [f([3, 2], 54.3), f([4, 3], 54.4)], lambda a, b: torch.einsum("ji,kj", a, b))
    case("einsum_outer", [f([3], 54.5), f([2], 54.6)], lambda a, b: torch.einsum("i,j->ij", a, b))
    case("einsum_ellipsis", [f([2, 1, 2, 3], 54.7), f([3, 3, 2], 54.8)],
         lambda a, b: torch.einsum("...ij,...jk->...ik", a, b))
    case("einsum_broadcast_batch", [f([1, 2, 3], 54.9), f([2, 3, 2], 55.0)],
         lambda a, b: torch.einsum("bij,bjk->bik", a, b))
    case("einsum_trace", [f([3, 3], 55.1)], lambda a: torch.einsum("ii", a))

    # ---- attention
    Q, K, Vv = [2, 3, 4], [2, 3, 4], [2, 3, 5]
    case("sdpa", [f(Q, 33.0), f(K, 33.1), f(Vv, 33.2)], lambda a, b, c: sdpa_ref(a, b, c))
    case("sdpa_causal", [f(Q, 33.3), f(K, 33.4), f(Vv, 33.5)],
         lambda a, b, c: sdpa_ref(a, b, c, is_causal=True))
    case("sdpa_causal_heads", [f([1, 2, 4, 4], 33.6), f([1, 2, 4, 4], 33.7), f([1, 2, 4, 3], 33.8)],
         lambda a, b, c: sdpa_ref(a, b, c, is_causal=True))
    case("sdpa_scale", [f(Q, 33.9), f(K, 34.0), f(Vv, 34.1)],
         lambda a, b, c: sdpa_ref(a, b, c, scale=0.3))
    case("sdpa_cross_length", [f([2, 2, 4], 34.2), f([2, 5, 4], 34.3), f([2, 5, 3], 34.4)],
         lambda a, b, c: sdpa_ref(a, b, c))
    case("sdpa_bool_mask", [f(Q, 34.5), f(K, 34.6), f(Vv, 34.7), mask([3, 3], [1, 0, 1, 1, 1, 0, 0, 1, 1])],
         lambda a, b, c, m: sdpa_ref(a, b, c, attn_mask=m))
    case("sdpa_float_mask", [f(Q, 34.8), f(K, 34.9), f(Vv, 35.0), f([3, 3], 35.1, grad=False)],
         lambda a, b, c, m: sdpa_ref(a, b, c, attn_mask=m))

    # ---- rows long enough for the vectorized float32 paths (393 elements:
    # whole vector blocks plus a remainder)
    L = [3, 131]
    case("exp_long", [f(L, 36.0, scale=2.0)], lambda x: torch.exp(x))
    case("tanh_long", [f(L, 36.1, scale=3.0)], lambda x: torch.tanh(x))
    case("gelu_long", [f(L, 36.2, scale=4.0)], lambda x: F.gelu(x))
    case("sigmoid_long", [f(L, 36.3, scale=4.0)], lambda x: torch.sigmoid(x))
    case("mul_broadcast_long", [f(L, 36.4), f([131], 36.5)], lambda a, b: torch.mul(a, b))
    case("sum_long", [f(L, 36.6)], lambda x: torch.sum(x, [1]))
    case("softmax_long", [f(L, 36.7, scale=4.0)], lambda x: torch.softmax(x, -1))
    case("log_softmax_long", [f(L, 36.8, scale=4.0)], lambda x: torch.log_softmax(x, -1))
    case("layer_norm_long", [f(L, 36.9, scale=2.0, shift=0.5), f([131], 37.0, shift=1.0), f([131], 37.1)],
         lambda x, w, b: F.layer_norm(x, [131], w, b))

    # ---- in-place forms (on a clone, so the leaf keeps its gradient) and copies
    case("neg_", [f(S, 38.0)], lambda x: x.clone().neg_())
    case("exp_", [f(S, 38.1)], lambda x: x.clone().exp_())
    case("sqrt_", [pos(S, 38.2)], lambda x: x.clone().sqrt_())
    case("tanh_", [f(S, 38.3, scale=2.0)], lambda x: x.clone().tanh_())
    case("sigmoid_", [f(S, 38.4, scale=2.0)], lambda x: x.clone().sigmoid_())
    case("relu_", [f(S, 38.5)], lambda x: x.clone().relu_())
    case("clamp_", [f(S, 38.6)], lambda x: x.clone().clamp_(-0.5, 0.5))
    case("add_", [f(S, 38.7), f(S, 38.8)], lambda a, b: a.clone().add_(b, alpha=2))
    case("sub_", [f(S, 38.9), f([4], 39.0)], lambda a, b: a.clone().sub_(b, alpha=0.5))
    case("mul_", [f(S, 39.1), f(S, 39.2)], lambda a, b: a.clone().mul_(b))
    case("div_", [f(S, 39.3), pos([4], 39.4)], lambda a, b: a.clone().div_(b))
    case("add_scalar_", [f(S, 39.5)], lambda x: x.clone().add_(1.5))
    case("mul_scalar_", [f(S, 39.6)], lambda x: x.clone().mul_(-2.0))
    case("div_scalar_", [f(S, 39.7)], lambda x: x.clone().div_(4.0))
    case("masked_fill_", [f(S, 39.8), mask([4], [1, 0, 0, 1])], lambda x, m: x.clone().masked_fill_(m, -1.0))
    case("copy_", [f(S, 39.9)], lambda x: torch.zeros(3, 4, dtype=DT).copy_(x))
    case("fill_", [f(S, 40.0)], lambda x: x.clone().fill_(2.5))
    case("to_int64", [f(S, 40.1, scale=3.0, grad=False)], lambda x: x.to(torch.int64))


# ----------------------------------------------------------------------------- writing


def kind_of(t):
    if t.dtype.is_floating_point:
        return "f"
    if t.dtype == torch.bool:
        return "b"
    assert t.dtype == torch.int64, t.dtype
    return "i"


def values_str(t):
    t = t.detach().reshape(-1)
    if t.dtype.is_floating_point:
        return [g(x) for x in t.tolist()]
    return [str(int(x)) for x in t.tolist()]


def run_case(name, inputs, fn):
    tensors = [i.tensor() for i in inputs]
    out = fn(*tensors)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    lines = ["case " + name] + [i.line() for i in inputs]
    for o in outs:
        lines.append(" ".join(["output", kind_of(o), str(o.dim())] + [str(d) for d in o.shape]
                              + values_str(o)))
    diff = [o for o in outs if o.dtype.is_floating_point and o.requires_grad]
    grad_inputs = [k for k, t in enumerate(tensors) if t.dtype.is_floating_point and t.requires_grad]
    if diff and grad_inputs:
        loss = sum((o * torch.tensor(weights(o.numel()), dtype=DT).reshape(o.shape)).sum() for o in diff)
        grads = torch.autograd.grad(loss, [tensors[k] for k in grad_inputs], allow_unused=True)
        for k, gr in zip(grad_inputs, grads):
            lines.append("grad %d " % k + ("none" if gr is None else " ".join(values_str(gr))))
    lines.append("end")
    return lines


def first_difference(old, new):
    """None when the two files hold the same cases with the same numbers, up
    to a relative 1e-12: PyTorch's float64 reductions round differently on
    CPUs with and without AVX-512, in the last bit or two. Else where they
    first differ."""
    a, b = old.splitlines(), new.splitlines()
    if len(a) != len(b):
        return "%d lines, regenerated %d" % (len(a), len(b))
    case = "?"
    for la, lb in zip(a[1:], b[1:]):
        ta, tb = la.split(), lb.split()
        if ta[:1] == ["case"]:
            case = " ".join(ta[1:])
        if len(ta) != len(tb):
            return "case %s: %r, regenerated %r" % (case, la[:80], lb[:80])
        for x, y in zip(ta, tb):
            if x == y:
                continue
            try:
                fx, fy = float(x), float(y)
            except ValueError:
                return "case %s: %r, regenerated %r" % (case, x, y)
            if not math.isclose(fx, fy, rel_tol=1e-12, abs_tol=1e-300):
                return "case %s: %s, regenerated %s" % (case, x, y)
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden.txt"))
    ap.add_argument("--check", action="store_true", help="exit 1 if the file would change")
    args = ap.parse_args()
    torch.set_num_threads(1)
    add_cases()
    names = [c[0] for c in CASES]
    assert len(names) == len(set(names)), "duplicate case names"
    lines = ["# dtr op conformance: PyTorch %s reference values, written by tests/golden/gen_golden.py"
             % torch.__version__.split("a")[0]]
    for name, inputs, fn in CASES:
        lines += run_case(name, inputs, fn)
    text = "\n".join(lines) + "\n"
    if args.check:
        with open(args.out) as fh:
            diff = first_difference(fh.read(), text)
        print("golden.txt is up to date" if diff is None else "golden.txt is STALE: " + diff)
        return 0 if diff is None else 1
    with open(args.out, "w") as fh:
        fh.write(text)
    print("wrote %d cases, %d bytes to %s" % (len(CASES), len(text), args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
