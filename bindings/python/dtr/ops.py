"""dtr.ops: every registry row by name, as torch.ops.aten.

    dtr.ops.add(a, b, alpha=2.0)          # the "add" row: inputs positional, attributes by name
    dtr.ops.sum(x, dims=(0,), keepdim=True)
    dtr.ops.rows()                        # the rows, with their declared parameters

A row is called with its tensors positionally and its declared parameters as
keywords (int, float, bool, ints = an int or a sequence of ints, dtype);
defaults are the row's. ValueError for an unknown row, an unknown or missing
parameter, or a wrong number of inputs; TypeError for a value of the wrong type.
A row with one output returns a Tensor, one with several a tuple. These are
the registry's own calling conventions (dtr's names for parameters, no
broadcasting of Python numbers into tensors): the functions and methods of
`dtr` are the PyTorch-shaped surface over them.
"""
from . import _C

_ROWS = None


def rows():
    """The registry's rows as dicts: name, params [(name, type, required, default)],
    min_inputs, max_inputs, inplace, view, differentiable."""
    global _ROWS
    if _ROWS is None:
        _ROWS = {r["name"]: r for r in _C._op_rows()}
    return list(_ROWS.values())


class OpOverload:
    """One registry row as a callable: op(*tensors, **attrs)."""

    def __init__(self, row):
        self._row = row
        self.__name__ = row["name"]
        params = ", ".join(f"{n}: {t}" + ("" if d is None else f" = {d!r}") + ("" if req else " (optional)")
                           for n, t, req, d in row["params"])
        self.__doc__ = f"The registry row '{row['name']}' ({params or 'no parameters'})."

    def __call__(self, *tensors, **attrs):
        return _C._op_call(self._row["name"], list(tensors), attrs)

    def __repr__(self):
        return f"dtr.ops.{self.__name__}"


def __getattr__(name):
    rows()
    row = _ROWS.get(name)
    if row is None:
        raise AttributeError(f"dtr.ops has no row '{name}'")
    return OpOverload(row)


def __dir__():
    return sorted(r["name"] for r in rows())
