"""torch.nn.utils.clip_grad_norm_."""
from .. import _C, no_grad


def clip_grad_norm_(parameters, max_norm, norm_type=2.0):
    """Scales every gradient by max_norm / (total_norm + 1e-6) when the global L2 norm
    of the gradients exceeds max_norm; returns the norm before clipping (a float).
    The norm is sqrt(sum over grads of sum(g * g)), the op sequence of the C++
    examples (PyTorch takes the norm of the per-tensor norms: equal up to rounding)."""
    if norm_type != 2.0:
        raise NotImplementedError("clip_grad_norm_: only norm_type=2 is supported by dtr")
    with no_grad():
        grads = [p.grad for p in parameters if p.grad is not None]
        if not grads:
            return 0.0
        total = _C.sqrt(_C.sum(_C.stack([_C.sum(g * g) for g in grads])))
        norm = total.item()
        if max_norm > 0 and norm > max_norm:
            coef = max_norm / (total + 1e-6)
            for g in grads:
                g.mul_(coef)
    return norm
