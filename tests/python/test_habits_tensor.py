"""Tensor-level PyTorch habits, one test each, with PyTorch's value: each snippet
runs once with `torch` = PyTorch (Debian's python3-torch 1.13, the golden) and
once with `torch` = dtr, on the same input arrays, and sets `result` (tensors,
numbers, tuples). tests/python/test_habits.py holds the habits of the whole
surface (optimizers, modules, the common indexing forms); these are the tensor
ones beyond it. Indexing (read and write, negative, lists, masks, index
tensors) is checked under autograd against PyTorch's gradients and under a
memory budget bitwise against the unlimited run.

`python tests/python/test_habits_tensor.py` prints how many habits pass."""
import math
import sys
import textwrap

import numpy as np
import pytest

import dtr
from test_habits import _arrays, assert_same, to_numpy

HABITS = {
    # ---- operators and numbers --------------------------------------------------------
    "x // 2 (float)": "result = T(A(6) * 10 - 5) // 2",
    "x // -1.5 and x % -1.5": "x = T(A(6) * 10 - 5); result = (x // -1.5, x % -1.5)",
    "int tensor // int": "result = (torch.arange(-7, 8) // 3, torch.arange(-7, 8) // -3)",
    "int tensor % int": "result = (torch.arange(-7, 8) % 3, torch.arange(-7, 8) % -3)",
    "number // tensor, number % tensor": "x = torch.arange(1, 6); result = (17 // x, -17 % x)",
    "x //= 2, x %= 3": "x = torch.arange(-5, 6); x //= 2; y = torch.arange(-5, 6); y %= 3; result = (x, y)",
    "torch.floor_divide / remainder": """
        a, b = T(A(5) * 10 - 5), T(A(5) + 0.5)
        result = (torch.floor_divide(a, b), torch.remainder(a, b))""",
    "torch.div(rounding_mode)": """
        a, b = torch.arange(-7, 8), 2
        result = (torch.div(a, b, rounding_mode='floor'), torch.div(a, b, rounding_mode='trunc'))""",
    "mask & mask, mask | mask, ~mask": """
        x = T(A(8) - 0.5)
        result = ((x > 0) & (x < 0.3), (x > 0.3) | (x < -0.3), ~(x > 0))""",
    "scalar / tensor, 2 - x, 2 ** x": "x = T(A(4) + 0.5); result = (1 / x, 2 - x, 2 ** x)",
    "where(c, 1., x)": "x = T(A(5) - 0.5); result = torch.where(x > 0, 1., x)",
    "where(c, 1, 0) (ints)": "x = T(A(5) - 0.5); result = torch.where(x > 0, 1, 0)",
    "torch.clamp(x, min=tensor)": "x = T(A(5)); result = (torch.clamp(x, min=T(A(5) * 0.5)), x.clamp(T(A(5) * 0.3), T(A(5) + 0.1)))",
    # ---- reductions -------------------------------------------------------------------
    "x.min(), torch.min(x)": "x = T(A(3, 4)); result = (x.min(), torch.min(x))",
    "x.min(dim) namedtuple": "r = T(A(3, 4)).min(dim=1); result = (r.values, r.indices)",
    "torch.max(x, dim, keepdim)": "v, i = torch.max(T(A(3, 4)), -1, keepdim=True); result = (v, i)",
    "torch.min(a, b), torch.max(a, b)": "a, b = T(A(4)), T(A(4) + 0.1); result = (torch.min(a, b), torch.max(a, b))",
    "amax / amin over dims": "x = T(A(2, 3, 4)); result = (x.amax((0, 2)), torch.amin(x, -1, keepdim=True))",
    "argmax / argmin": "x = T(A(3, 4)); result = (x.argmax(), x.argmin(dim=0), torch.argmin(x, 1, keepdim=True))",
    "x.std(), x.std(dim, unbiased=False)": "x = T(A(3, 4)); result = (x.std(), x.std(dim=0, unbiased=False))",
    "x.var(dim, keepdim), var(unbiased=False)": "x = T(A(3, 4)); result = (x.var(1, keepdim=True), torch.var(x, unbiased=False))",
    "x.norm(), p=1, p=inf, dim": """
        x = T(A(3, 4) - 0.5)
        result = (x.norm(), x.norm(p=1), x.norm(p=float('inf')), x.norm(dim=1), torch.norm(x, 2, -1, keepdim=True))""",
    "x.all(), x.any(dim)": "x = T(A(3, 4)) > 0.3; result = (x.all(), (x == x).all(), x.any(dim=1), x.all(1))",
    "x.sum(dtype=)": "result = torch.arange(5).sum(dtype=torch.float32)",
    "x.cumsum(-1)": "result = T(A(3, 4)).cumsum(-1)",
    "x.logsumexp(dim)": "result = T(A(3, 4)).logsumexp(1)",
    "x.softmax(-1), x.log_softmax(dim=0)": "x = T(A(3, 4)); result = (x.softmax(-1), x.log_softmax(dim=0))",
    # ---- math methods -----------------------------------------------------------------
    "x.sin(), x.cos(), x.erf()": "x = T(A(5)); result = (x.sin(), x.cos(), x.erf(), torch.erf(x))",
    "x.exp(), x.sqrt(), x.rsqrt(), x.reciprocal()": "x = T(A(5) + 0.5); result = (x.exp(), x.sqrt(), x.rsqrt(), x.reciprocal())",
    "x.abs(), x.neg(), x.sigmoid(), x.tanh()": "x = T(A(5) - 0.5); result = (x.abs(), x.neg(), x.sigmoid(), x.tanh())",
    "x.pow(2), x.add(2, alpha=3), x.sub(1)": "x = T(A(5)); result = (x.pow(2), x.add(2, alpha=3), x.sub(1), x.mul(3), x.div(2))",
    "x.clamp(min=0)": "result = T(A(5) - 0.5).clamp(min=0)",
    # ---- sorting, sampling, linear algebra --------------------------------------------
    "torch.topk, x.topk(largest=False)": """
        x = T(A(3, 6))
        v, i = torch.topk(x, 2)
        w, j = x.topk(3, dim=0, largest=False)
        result = (v, i, w, j)""",
    "torch.sort(descending), x.argsort()": """
        x = T(A(6))
        v, i = torch.sort(x, descending=True)
        result = (v, i, x.argsort(), x.sort().values)""",
    "torch.multinomial (one-hot rows)": """
        probs = T(np.eye(4, dtype=np.float32)[[2, 0, 3]])
        result = (torch.multinomial(probs, 1), probs.multinomial(1))""",
    "torch.einsum": """
        a, b = T(A(2, 3)), T(A(3, 4))
        result = (torch.einsum('ij,jk->ik', a, b), torch.einsum('ij->ji', [a]), torch.einsum('ii->', T(A(3, 3))))""",
    "torch.bmm, torch.mm, x.bmm": """
        a, b = T(A(2, 3, 4)), T(A(2, 4, 5))
        result = (torch.bmm(a, b), a.bmm(b), torch.mm(a[0], b[0]))""",
    "F.pad": "x = T(A(2, 3)); result = (F.pad(x, (1, 2)), F.pad(x, (1, 1, 2, 0), value=-1.0))",
    "x.flip(0, 1), x.roll(1, 0), x.repeat(2, 1)": "x = T(A(2, 3)); result = (x.flip(0, 1), x.roll(1, 0), x.repeat(2, 1), x.repeat_interleave(2, dim=0))",
    "F.kl_div": """
        logp, t = F.log_softmax(T(A(3, 4)), dim=1), F.softmax(T(A(3, 4) * 2), dim=1)
        t = t * (T(A(3, 4)) > 0.2)
        result = (F.kl_div(logp, t, reduction='batchmean'), F.kl_div(logp, t, reduction='none'),
                  F.kl_div(logp, t.log_softmax(1), reduction='sum', log_target=True))""",
    "x.split([1, 2]), x.chunk(2)": "x = T(A(3, 2)); result = (x.split([1, 2]), x.chunk(2), torch.split(x, 2))",
    # ---- creation ---------------------------------------------------------------------
    "torch.Tensor([1, 2]), torch.Tensor(2, 3).shape": "result = (torch.Tensor([1, 2]), list(torch.Tensor(2, 3).shape), torch.Tensor([[1, 2]]).dtype == torch.float32)",
    "torch.eye": "result = (torch.eye(3), torch.eye(2, 3), torch.eye(2, dtype=torch.int64))",
    "torch.linspace": "result = (torch.linspace(0, 1, 5), torch.linspace(-1, 2, 7), torch.linspace(3, 3, 1))",
    "torch.full_like / zeros_like(dtype=)": """
        x = T(A(2, 2))
        result = (torch.full_like(x, 7), torch.zeros_like(x, dtype=torch.int64), torch.ones_like(x))""",
    "x.new_zeros / new_full": "x = T(A(2)); result = (x.new_zeros(3), x.new_full((2,), 4.0), x.new_ones(1, 2))",
    "torch.nonzero": "x = T(A(3, 4)) > 0.5; result = (torch.nonzero(x), torch.where(x)[1])",
    # ---- x.data -----------------------------------------------------------------------
    "x.data = y": """
        w = T(A(3), grad=True)
        w.data = T(A(3) * 3)
        (w * w).sum().backward()
        result = (w, w.grad)""",
    # ---- indexing: read ---------------------------------------------------------------
    "x[-1], x[-2:, ::2]": "x = T(A(3, 4)); result = (x[-1], x[-2:, ::2], x[1, -1])",
    "x[..., 0], x[None, :, 1]": "x = T(A(2, 3, 4)); result = (x[..., 0], x[None, :, 1], x[..., None].shape)",
    "x[[0, 2]], x[[-1, 0, -1]]": "x = T(A(3, 4)); result = (x[[0, 2]], x[[-1, 0, -1]])",
    "x[mask_rows] (mask on leading dims)": "x = T(A(3, 4, 2)); result = x[T(A(3, 4)) > 0.5]",
    "x[:, [True, False, True, False]]": "result = T(A(3, 4))[:, [True, False, True, False]]",
    "x[idx_tensor], x[2-d idx]": "x = T(A(5, 2)); result = (x[I([4, 0, -1])], x[I([[0, 1], [4, 3]])])",
    "x[rows, cols]": "result = T(A(3, 4))[I([0, 2]), I([1, -1])]",
    "x[rows[:, None], cols] (broadcast)": "result = T(A(3, 4))[I([0, 2])[:, None], I([1, 3, 0])]",
    "x[idx, :, idx] (separated: dims first)": "result = T(A(3, 4, 5))[I([0, 2]), :, I([1, 4])]",
    "x[:, idx, idx] (adjacent: in place)": "result = T(A(2, 3, 4))[:, I([0, 2]), I([1, 3])]",
    "x[1:, [0, 2]]": "result = T(A(3, 4))[1:, [0, 2]]",
    "x[..., idx]": "result = T(A(2, 3, 4))[..., I([3, 0])]",
    "x[0-d int tensor]": "x = T(A(3, 4)); result = x[I(1)]",
    # ---- indexing: write --------------------------------------------------------------
    "x[mask] = row (broadcast)": "x = T(A(3, 4)); x[T(A(3)) > 0.5] = T(A(4) * 10); result = x",
    "x[mask] = values": "x = T(A(6)); m = x > 0.5; x[m] = torch.arange(int(m.sum().item())).float(); result = x",
    "x[[-1, 0]] = 7": "x = T(A(3, 2)); x[[-1, 0]] = 7; result = x",
    "x[rows, cols] = v": "x = T(A(3, 4)); x[I([0, 2]), I([1, 3])] = T(np.array([5., 6.], np.float32)); result = x",
    "x[:, [0, 2]] = tensor": "x = T(A(3, 4)); x[:, [0, 2]] = T(A(3, 2) + 10); result = x",
    "x[idx] += 1": "x = T(A(4)); x[I([0, 2])] += 1; result = x",
    # ---- indexing under autograd ------------------------------------------------------
    "grad through x[idx], x[mask], x[:, [-1]]": """
        x = T(A(4, 3), grad=True)
        y = x[I([0, 2, 2])].sum() + (x[x > 0.5] * 2).sum() + x[:, [-1]].sum() + x[I([1, 3]), I([0, -1])].sum()
        y.backward()
        result = x.grad""",
    "grad through y[mask] = 0, y[:, idx] = f(x)": """
        x = T(A(3, 4) - 0.5, grad=True)
        y = x * 1
        y[y > 0] = 0
        y[:, [0, 2]] = x[:, [1, 3]] * 2
        (y * T(A(3, 4))).sum().backward()
        result = (y, x.grad)""",
    "grad of the value written: y[idx] = v": """
        x = T(A(4, 3), grad=True)
        v = T(A(2, 3), grad=True)
        y = x * 1
        y[I([3, 1])] = v * 3
        (y * T(A(4, 3))).sum().backward()
        result = (y, x.grad, v.grad)""",
}


def run(name, torch):
    """Runs HABITS[name] with `torch` bound to the given module; returns `result`
    (A: the same random float32 arrays for both runs; T: a tensor of one; I: int64)."""
    A = _arrays()
    env = {"torch": torch, "F": torch.nn.functional, "np": np, "math": math, "A": A,
           "T": lambda a, grad=False: torch.from_numpy(np.ascontiguousarray(a)).requires_grad_(grad),
           "I": lambda v: torch.from_numpy(np.asarray(v, dtype=np.int64))}
    exec(textwrap.dedent(HABITS[name]), env)
    return to_numpy(env["result"])


@pytest.mark.parametrize("name", list(HABITS))
def test_habit(name, torch):
    assert_same(run(name, dtr), run(name, torch))


# ---- errors name what was wrong --------------------------------------------------------

def test_index_errors_name_dim_size_and_index():
    x = dtr.zeros(2, 3)
    with pytest.raises(IndexError, match="index 3 is out of bounds for dimension 1 with size 3"):
        x[:, 3]
    with pytest.raises(IndexError, match="index -4 is out of bounds for dimension 1 with size 3"):
        x[:, [0, -4]]
    with pytest.raises(IndexError, match="index 5 is out of bounds for dimension 0 with size 2"):
        x[dtr.tensor([5])] = 1.0
    with pytest.raises(IndexError, match="too many indices for tensor of dimension 2"):
        x[0, 0, 0]
    with pytest.raises(IndexError, match=r"shape of the mask \[3\] at index 0 does not match"):
        x[dtr.tensor([True, False, True])]
    with pytest.raises(IndexError, match="could not be broadcast together"):
        x[dtr.tensor([0, 1]), dtr.tensor([0, 1, 2])]
    with pytest.raises(IndexError, match="must be long, int, byte or bool"):
        x[dtr.tensor([0.0])]
    with pytest.raises(ValueError, match="cannot be broadcast"):
        x[dtr.tensor([0, 1])] = dtr.zeros(4)


def test_basic_indices_are_views_and_advanced_are_copies():
    x = dtr.zeros(3, 4)
    x[1:, ::2].fill_(1.0)        # a view: writes into x
    x[[0]].fill_(5.0)            # a copy: x unchanged
    assert x.tolist() == [[0, 0, 0, 0], [1, 0, 1, 0], [1, 0, 1, 0]]


# ---- under a budget, bitwise ------------------------------------------------------------

def _indexing_workload(budget):
    dtr.manual_seed(3)
    w = dtr.randn(256, 256, requires_grad=True)
    dtr.memory.set_budget(budget)
    dtr.memory.reset_stats()
    h = w
    for i in range(6):
        h = (h @ w).tanh()
        h = h[:, dtr.arange(255, -1, -1)]          # index tensor read (a permutation)
        h = h * 1
        h[h > 0.5] = 0.5                           # mask write
        h[:, [0, -1]] = h[:, [1, -2]] * 0.5        # list write from a list read
    loss = (h * h).sum()
    loss.backward()
    out = (np.array(loss.detach().numpy()), np.array(w.grad.numpy()))
    stats = dtr.memory.stats()
    dtr.memory.set_budget(None)
    return out, stats


def test_indexing_under_a_budget_is_bitwise_equal():
    free, free_stats = _indexing_workload(None)
    assert free_stats["evictions"] == 0
    budget = int(free_stats["peak_bytes"] * 0.6)
    tight, tight_stats = _indexing_workload(budget)
    assert tight_stats["evictions"] > 0
    assert tight_stats["peak_bytes"] <= budget
    assert free[0].tobytes() == tight[0].tobytes()
    assert free[1].tobytes() == tight[1].tobytes()


if __name__ == "__main__":
    import torch as reference
    failed = []
    for habit in HABITS:
        try:
            assert_same(run(habit, dtr), run(habit, reference))
        except Exception as e:  # noqa: BLE001 (a report, not a test)
            failed.append((habit, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"))
    print(f"{len(HABITS) - len(failed)} of {len(HABITS)} tensor habits match PyTorch {reference.__version__}")
    for habit, why in failed:
        print(f"  FAIL {habit}: {why[:200]}")
    sys.exit(1 if failed else 0)
