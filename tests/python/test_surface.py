"""Completeness of the Python surface: every public C++ op (the free functions of
eager/ops.h and the registry's rows other than backward internals) must be
reachable from Python by a PyTorch name (a dtr function, a dtr.nn.functional
function or a Tensor method), or be listed below with the reason it is not.
Every registry row is also callable by its own name as dtr.ops.<row>.

Adding a public op without a Python row in dtr/_surface.py fails here."""
import os
import re

import pytest

import dtr
import dtr.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# eager/ops.h functions with no Python name of their own, and why.
OPS_H_EXCLUDED = {
    # C++ construction from host memory; Python builds tensors with dtr.tensor,
    # dtr.from_numpy and dtr.from_dlpack.
    "from_vector": "C++ template over std::vector; Python: dtr.tensor",
    "from_blob": "raw pointer + deleter; Python: dtr.from_numpy / dtr.from_dlpack",
    # Python spells it x[start:stop:step] (the indexing core calls slice).
    "slice": "Python: x[a:b:c] (eager/indexing.h)",
    # libtorch's second name for cross_entropy; Python has one.
    "cross_entropy_loss": "Python: F.cross_entropy",
}

# Registry rows whose PyTorch spelling is another name, and which one.
ROWS_EXCLUDED = {
    "to_dtype": "Tensor.to(dtype)",
    "to_device": "Tensor.to(device)",
    "slice": "x[a:b:c]",
    "max_dim": "dtr.max(x, dim)",
    "batch_norm_inference": "F.batch_norm(training=False)",
    "batch_norm_update_stats_": "F.batch_norm(training=True) updates the running statistics",
    "constant_pad_nd": "F.pad(mode='constant')",
    "reflection_pad": "F.pad(mode='reflect')",
    "upsample_nearest2d": "F.interpolate(mode='nearest')",
    "upsample_bilinear2d": "F.interpolate(mode='bilinear')",
    # The scalar forms of the binary rows are the operators with a Python number
    # (x + 2, x * 2, x / 2, x ** 2, x == 2, x += 2, ...).
    **{f"{op}_scalar": f"x {op} number" for op in ("add", "mul", "div", "pow", "eq", "ne", "lt",
                                                   "le", "gt", "ge")},
    **{f"{op}_scalar_": f"x.{op}_(number)" for op in ("add", "mul", "div")},
}


def ops_h_functions():
    src = open(os.path.join(ROOT, "eager", "ops.h")).read().split("namespace detail")[0]
    return sorted(set(re.findall(
        r"^(?:Tensor|std::tuple<Tensor, Tensor>|std::vector<Tensor>|void|RngState)\s+(\w+)\(", src, re.M)))


def public_rows():
    """Rows a user calls; *_backward and *_grad rows are autograd's internals."""
    return [r["name"] for r in dtr.ops.rows()
            if not r["name"].endswith("_backward") and not r["name"].endswith("_grad")]


def reachable(name):
    return hasattr(dtr, name) or hasattr(F, name) or hasattr(dtr.Tensor, name)


def test_every_ops_h_function_has_a_python_name():
    names = ops_h_functions()
    assert len(names) > 100  # the parse found the header's functions
    missing = [n for n in names if n not in OPS_H_EXCLUDED and not reachable(n)]
    assert not missing, f"public C++ ops without a Python function or method: {missing}"


def test_every_public_row_has_a_python_name():
    missing = [n for n in public_rows() if n not in ROWS_EXCLUDED and not reachable(n)]
    assert not missing, f"registry rows without a Python function or method: {missing}"


def test_exclusions_are_not_stale():
    names, rows = set(ops_h_functions()), {r["name"] for r in dtr.ops.rows()}
    for n in OPS_H_EXCLUDED:
        assert n in names, f"{n} is no longer in eager/ops.h: drop its exclusion"
        assert not reachable(n), f"{n} now has a Python name: drop its exclusion"
    for n in ROWS_EXCLUDED:
        assert n in rows, f"{n} is no longer a registry row: drop its exclusion"


def test_every_row_is_callable_by_name():
    rows = dtr.ops.rows()
    assert len(rows) == len(dir(dtr.ops))
    for r in rows:
        op = getattr(dtr.ops, r["name"])
        assert callable(op) and r["name"] in op.__doc__


def test_ops_call_with_declared_parameters():
    a = dtr.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert dtr.ops.add(a, a, alpha=2.0).tolist() == [[3.0, 6.0], [9.0, 12.0]]
    assert dtr.ops.sum(a, dims=[0], keepdim=True).tolist() == [[4.0, 6.0]]
    v, i = dtr.ops.max_dim(a, dim=1, keepdim=False)
    assert v.tolist() == [2.0, 4.0] and i.tolist() == [1, 1]
    assert dtr.ops.sum(a, dims=1).tolist() == [3.0, 7.0]  # an int for ints (rows take dims >= 0)
    with pytest.raises(ValueError, match="no_such_row|unknown"):
        dtr.ops._C._op_call("no_such_row", [a], {})
    with pytest.raises(ValueError, match="unexpected parameter 'dimz'"):
        dtr.ops.sum(a, dimz=[0])
    with pytest.raises(TypeError, match="'keepdim' is bool"):
        dtr.ops.sum(a, dims=[0], keepdim=3)
    with pytest.raises(AttributeError):
        dtr.ops.no_such_row


def test_surface_rows_are_installed():
    from dtr import _surface
    for name, fn, where in _surface.SURFACE:
        if "F" in where:
            assert getattr(dtr, name) is fn, name
        if "M" in where:
            assert name in vars(dtr.Tensor), name


def counts():
    names = ops_h_functions()
    rows = public_rows()
    return {"ops.h functions": len(names),
            "ops.h reachable by name": sum(reachable(n) for n in names),
            "registry rows": len(dtr.ops.rows()),
            "public rows": len(rows),
            "public rows reachable by name": sum(reachable(n) for n in rows),
            "rows reachable as dtr.ops.<row>": len(dir(dtr.ops))}


if __name__ == "__main__":
    print(counts())
