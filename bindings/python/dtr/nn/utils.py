"""torch.nn.utils.clip_grad_norm_."""
from .. import _C, no_grad


def clip_grad_norm_(parameters, max_norm, norm_type=2.0):
    """Scales every gradient by max_norm / (total_norm + 1e-6) when the global L2 norm
    of the gradients exceeds max_norm; returns the norm before clipping as a 0-d float32
    tensor, as torch.nn.utils.clip_grad_norm_ does (0 when no parameter has a gradient).
    `parameters` is a tensor or an iterable of tensors. The norm is sqrt(sum over grads of
    sum(g * g)), the op sequence of the C++ examples (PyTorch takes the norm of the
    per-tensor norms: equal up to rounding). NotImplementedError for norm_type other than 2."""
    if norm_type != 2.0:
        raise NotImplementedError("clip_grad_norm_: only norm_type=2 is supported by dtr")
    if isinstance(parameters, _C.Tensor):
        parameters = [parameters]
    with no_grad():
        grads = [p.grad for p in parameters if p.grad is not None]
        if not grads:
            return _C.full([], 0.0, None, None, False)
        total = _C.sqrt(_C.sum(_C.stack([_C.sum(g * g) for g in grads])))
        if max_norm > 0 and total.item() > max_norm:
            coef = max_norm / (total + 1e-6)
            for g in grads:
                g.mul_(coef)
    return total
