"""torch.autograd for dtr: grad, backward, Function (custom forward/backward in
Python) and the grad-mode context managers, over the C++ engine (eager/autograd.h).

    class Square(dtr.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return 2 * x * grad

    y = Square.apply(x)

A Function's node is a custom node of the C++ graph (autograd::record_custom)
whose backward calls the Python one under the GIL. Saved tensors are
ordinary tensors: under a budget the runtime may evict them and recompute
them from their lineage when backward reads them, so gradients are bitwise
those of an unlimited run.
"""
from . import _C, Tensor, enable_grad, is_grad_enabled, no_grad, set_grad_enabled, zeros

__all__ = ["grad", "backward", "Function", "FunctionCtx", "no_grad", "enable_grad",
           "set_grad_enabled", "is_grad_enabled"]


def _tensors(x, what):
    items = [x] if isinstance(x, Tensor) else list(x)
    for i, t in enumerate(items):
        if not isinstance(t, Tensor):
            raise TypeError(f"{what}: element {i} is a {type(t).__name__}, not a Tensor")
    return items


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         only_inputs=True, allow_unused=False, is_grads_batched=False):
    """torch.autograd.grad: the gradients of `outputs` (a Tensor or a sequence of them),
    weighted by `grad_outputs` (one per output, None meaning ones for a one-element
    output), with respect to `inputs`, as a tuple with one entry per input. Nothing is
    accumulated into any .grad. retain_graph defaults to create_graph; with
    create_graph the gradients have a graph of their own (differentiate them again).
    An input the outputs do not depend on gives None with allow_unused, else
    ValueError; ValueError too for an output or input that does not require grad or a
    grad_output of another shape. is_grads_batched is NotImplementedError."""
    if is_grads_batched:
        raise NotImplementedError("grad: is_grads_batched is not supported by dtr")
    outputs = _tensors(outputs, "grad outputs")
    inputs = _tensors(inputs, "grad inputs")
    if grad_outputs is None:
        gos = [None] * len(outputs)
    else:
        gos = [grad_outputs] if isinstance(grad_outputs, Tensor) else list(grad_outputs)
    return tuple(_C._grad(outputs, inputs, gos, retain_graph, create_graph, allow_unused))


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, grad_variables=None,
             inputs=None):
    """torch.autograd.backward: accumulates into the leaves' .grad the gradients of
    `tensors` (a Tensor or a sequence), weighted by `grad_tensors` (None entries: ones,
    for one-element tensors only). retain_graph defaults to create_graph. ValueError
    for a tensor that does not require grad, an implicit gradient of a tensor with more
    than one element, or a gradient of another shape; `inputs` is NotImplementedError."""
    if inputs is not None:
        raise NotImplementedError("backward: inputs= is not supported by dtr")
    if grad_tensors is None:
        grad_tensors = grad_variables
    roots = _tensors(tensors, "backward")
    if grad_tensors is None:
        grads = [None] * len(roots)
    else:
        grads = [grad_tensors] if isinstance(grad_tensors, Tensor) else list(grad_tensors)
    if len(grads) != len(roots):
        raise ValueError(f"backward: got {len(grads)} gradients for {len(roots)} tensors")
    made = []
    for i, (t, g) in enumerate(zip(roots, grads)):
        if not t.requires_grad:
            raise ValueError(f"element {i} of tensors does not require grad and does not have a grad_fn")
        if g is None:
            if t.numel() != 1:
                raise ValueError(f"grad can be implicitly created only for scalar outputs (tensor {i} "
                                 f"has shape {list(t.shape)})")
            g = _C.ones_like(t)
        elif not isinstance(g, Tensor):
            g = _C.full_like(t, g)
        if tuple(g.shape) != tuple(t.shape):
            raise ValueError(f"Mismatch in shape: grad_output[{i}] has a shape of {list(g.shape)} and "
                             f"output[{i}] has a shape of {list(t.shape)}.")
        made.append(g if g.dtype == t.dtype else g.to(t.dtype))
    retain = create_graph if retain_graph is None else retain_graph
    _C._run_backward(roots, made, bool(retain), bool(create_graph))


class FunctionCtx:
    """The `ctx` of a Function: save_for_backward / saved_tensors, needs_input_grad,
    mark_non_differentiable, set_materialize_grads; other attributes may be set freely
    to pass non-tensor values to backward."""

    def __init__(self):
        self._saved = ()
        self._saved_versions = ()
        self._non_differentiable = set()
        self.materialize_grads = True
        self.needs_input_grad = ()

    def save_for_backward(self, *tensors):
        """Keeps tensors (or None) for backward. They are kept as detached handles on the
        same storage (no reference to the graph, so no cycle through the node); an
        in-place write to one before backward reads it is a RuntimeError there."""
        for t in tensors:
            if t is not None and not isinstance(t, Tensor):
                raise TypeError(f"save_for_backward can only save tensors, but argument was a "
                                f"{type(t).__name__}")
        self._saved = tuple(None if t is None else t.detach() for t in tensors)
        self._saved_versions = tuple(None if t is None else _version(t) for t in tensors)

    @property
    def saved_tensors(self):
        """The tensors given to save_for_backward, in order (as detached tensors)."""
        for i, (t, v) in enumerate(zip(self._saved, self._saved_versions)):
            if t is not None and v is not None and _version(t) != v:
                raise RuntimeError(f"one of the variables needed for gradient computation has been "
                                   f"modified by an inplace operation: saved tensor {i} is at "
                                   f"version {_version(t)}; expected version {v} instead.")
        return self._saved

    def mark_non_differentiable(self, *tensors):
        """Outputs that get no gradient (an argmax, a mask): they do not require grad,
        and backward receives zeros (or None without materialized grads) for them."""
        self._non_differentiable.update(id(t) for t in tensors)

    def set_materialize_grads(self, value):
        """With False, backward receives None instead of zeros for the outputs marked
        non-differentiable. (For the others it still receives zeros where no gradient
        arrived: dtr's engine fills them in before the node runs, where PyTorch would
        pass None.)"""
        self.materialize_grads = bool(value)

    def mark_dirty(self, *tensors):
        raise NotImplementedError("mark_dirty: in-place custom Functions are not supported by dtr")


def _version(t):
    """The version counter of t's storage (bumped by every in-place write)."""
    return _C._storage_version(t)


class Function:
    """torch.autograd.Function: subclass it with static forward(ctx, *args) and
    backward(ctx, *grad_outputs), and call Cls.apply(*args).

    forward runs under no_grad and returns a Tensor or a tuple (non-tensor entries
    allowed). When grad mode is on and a tensor argument requires grad, the floating
    tensor outputs get one grad_fn, "<Cls>Backward". backward receives one gradient per
    output (zeros where none arrived) and returns one value per forward argument: a
    Tensor of that argument's shape (cast to its dtype) or None. Errors: RuntimeError
    for a wrong number of gradients or a gradient of the wrong shape (raised from
    backward), and whatever the Python backward raises, unchanged."""

    def __init__(self, *args, **kwargs):
        raise RuntimeError("Function is used through its classmethod apply(); do not instantiate it")

    @staticmethod
    def forward(ctx, *args, **kwargs):
        raise NotImplementedError("You must implement the forward function for custom autograd.Function.")

    @staticmethod
    def backward(ctx, *grad_outputs):
        raise NotImplementedError("You must implement the backward function for custom autograd.Function.")

    @classmethod
    def apply(cls, *args, **kwargs):
        ctx = FunctionCtx()
        ctx.needs_input_grad = tuple(isinstance(a, Tensor) and a.requires_grad for a in args)
        record = is_grad_enabled() and any(ctx.needs_input_grad)
        with no_grad():
            out = cls.forward(ctx, *args, **kwargs)
        if not record:
            return out
        single = not isinstance(out, tuple)
        outs = [out] if single else list(out)
        arg_ids = {id(a) for a in args if isinstance(a, Tensor)}
        # An input returned as is becomes a new handle on the same storage, so that
        # its own history stays untouched.
        outs = [o.detach() if isinstance(o, Tensor) and id(o) in arg_ids else o for o in outs]
        differentiable = [i for i, o in enumerate(outs)
                          if isinstance(o, Tensor) and o.is_floating_point()
                          and id(o) not in ctx._non_differentiable]
        metas = [(tuple(o.shape), o.dtype, o.device) if isinstance(o, Tensor) else None for o in outs]
        positions = [i for i, a in enumerate(args) if isinstance(a, Tensor)]
        inputs = [args[i] for i in positions]
        in_metas = [(tuple(t.shape), t.dtype) for t in inputs]
        name, n_args, n_outs = cls.__name__, len(args), len(outs)
        needs = ctx.needs_input_grad

        # Captures no tensor (outputs hold the node: a capture would be a cycle through C++).
        def node_backward(_saved_inputs, grads):
            per_output = [None] * n_outs
            for i, g in zip(differentiable, grads):
                per_output[i] = g
            if ctx.materialize_grads:
                per_output = [zeros(*m[0], dtype=m[1], device=m[2]) if g is None and m is not None else g
                              for g, m in zip(per_output, metas)]
            result = cls.backward(ctx, *per_output)
            result = list(result) if isinstance(result, tuple) else [result]
            if len(result) > n_args and all(r is None for r in result[n_args:]):
                result = result[:n_args]
            if len(result) != n_args:
                raise RuntimeError(f"function {name}Backward returned an incorrect number of gradients "
                                   f"(expected {n_args}, got {len(result)})")
            out_grads = []
            for k, (pos, (shape, dtype)) in enumerate(zip(positions, in_metas)):
                g = result[pos]
                if g is not None:
                    if not isinstance(g, Tensor):
                        raise TypeError(f"function {name}Backward returned a {type(g).__name__} as "
                                        f"the gradient of argument {pos}; expected a Tensor or None")
                    if tuple(g.shape) != shape:
                        raise RuntimeError(f"Function {name}Backward returned an invalid gradient at "
                                           f"index {pos} - got {list(g.shape)} but expected shape "
                                           f"compatible with {list(shape)}")
                    if g.dtype != dtype:
                        g = g.to(dtype)
                    if not needs[pos]:
                        g = None
                out_grads.append(g)
            return out_grads

        _C._record_custom(name, node_backward, inputs, [outs[i] for i in differentiable])
        return outs[0] if single else tuple(outs)


_cxx_backward = Tensor.backward


def _tensor_backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
    """Tensor.backward(gradient=None, retain_graph=None, create_graph=False): accumulates
    the gradient of this tensor into the leaves' .grad (torch.Tensor.backward). With
    create_graph the gradients get a graph of their own (dtr.autograd.backward);
    retain_graph defaults to create_graph. `inputs` is NotImplementedError."""
    if create_graph or inputs is not None:
        backward(self, gradient, retain_graph, create_graph, inputs=inputs)
    else:
        _cxx_backward(self, gradient, bool(retain_graph))


_tensor_backward.__name__ = "backward"
Tensor.backward = _tensor_backward
