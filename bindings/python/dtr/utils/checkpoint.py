"""torch.utils.checkpoint for dtr, over the C++ checkpoint regions (eager/checkpoint.h).

A region runs its function under no_grad, keeps only its inputs, and runs it
again during backward to rebuild the graph. Unlike a region, the DTR runtime
needs no annotation (set a budget and it evicts on its own); regions are here so
that PyTorch programs that use them run unchanged.
"""
from .. import Tensor, _C

__all__ = ["checkpoint", "checkpoint_sequential"]


def checkpoint(function, *args, use_reentrant=None, preserve_rng_state=True, context_fn=None,
               determinism_check="default", debug=False, **kwargs):
    """torch.utils.checkpoint.checkpoint: function(*args, **kwargs) with its
    intermediates dropped and recomputed during backward. Returns what function
    returns: a Tensor or a tuple/list of Tensors (anything else is a TypeError).

    Tensor arguments are the region's inputs; other arguments and `kwargs` are passed
    through as they are. Outputs, losses and gradients are bitwise those of calling
    function directly, dropout included: the RNG state and grad/autocast modes of the
    forward are restored for the recomputation (so preserve_rng_state=False behaves as
    True). use_reentrant (True or False) selects nothing: dtr has one kind of region,
    which gives parameters read inside `function` their gradients even when no input
    requires grad (PyTorch's use_reentrant=False behaviour). Every tensor that requires
    grad and that function reads must be a leaf or one of `args` (ValueError otherwise).
    context_fn is NotImplementedError."""
    if context_fn is not None:
        raise NotImplementedError("checkpoint: context_fn is not supported by dtr")
    positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
    if not positions:
        return function(*args, **kwargs)
    shape = []  # what function returned: "tensor", or the container type

    def run(tensors):
        full = list(args)
        for i, t in zip(positions, tensors):
            full[i] = t
        out = function(*full, **kwargs)
        if isinstance(out, Tensor):
            kind, items = "tensor", [out]
        elif isinstance(out, (tuple, list)) and all(isinstance(o, Tensor) for o in out):
            kind, items = type(out), list(out)
        else:
            raise TypeError("checkpoint: the function must return a Tensor or a tuple or list of "
                            f"Tensors, got {type(out).__name__}")
        if not shape:
            shape.append(kind)
        return items

    outs = _C._checkpoint(run, [args[i] for i in positions])
    kind = shape[0]
    return outs[0] if kind == "tensor" else kind(outs)


def checkpoint_sequential(functions, segments, input, use_reentrant=None, preserve_rng_state=True,
                          **kwargs):
    """torch.utils.checkpoint.checkpoint_sequential: `functions` (an nn.Sequential or a
    list of modules / callables) applied in order to `input`, split into `segments`
    chunks; every chunk but the last is checkpointed, the last runs normally. As in
    PyTorch, the first segments - 1 chunks hold len // segments functions each and the
    last the rest. ValueError when segments < 1 or exceeds the number of functions."""
    if hasattr(functions, "children") and not isinstance(functions, (list, tuple)):
        functions = list(functions.children())
    functions = list(functions)
    if not 1 <= segments <= len(functions):
        raise ValueError(f"checkpoint_sequential: segments must be in [1, {len(functions)}], got "
                         f"{segments}")

    def run_chunk(chunk):
        def run(x):
            for f in chunk:
                x = f(x)
            return x
        return run

    size = len(functions) // segments
    end = 0
    for start in range(0, size * (segments - 1), size):
        end = start + size
        input = checkpoint(run_chunk(functions[start:end]), input, use_reentrant=use_reentrant,
                           preserve_rng_state=preserve_rng_state)
    return run_chunk(functions[end:])(input)
