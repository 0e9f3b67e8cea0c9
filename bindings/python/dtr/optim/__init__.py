"""torch.optim's SGD and AdamW over the C++ optimizers (eager/optim.h): the update
runs in C++ without the GIL. param_groups[0]["lr"] may be changed between steps
(a schedule); state_dict() is dtr's flat form ("state.<i>.<buffer>",
"param_groups.0.<hp>" → tensors), which load_state_dict() restores bitwise."""
from .. import _C

__all__ = ["Optimizer", "SGD", "AdamW"]


class Optimizer:
    """One parameter group over `params` (leaves that require grad)."""

    def __init__(self, impl, params, defaults):
        self._impl = impl
        self.defaults = dict(defaults)
        self.param_groups = [dict(params=params, **defaults)]

    def step(self, closure=None):
        loss = closure() if closure is not None else None
        self._impl.lr = float(self.param_groups[0]["lr"])
        self._impl.step()
        return loss

    def zero_grad(self, set_to_none=True):
        if set_to_none:
            self._impl.zero_grad()
        else:
            for p in self.param_groups[0]["params"]:
                if p.grad is not None:
                    p.grad.zero_()

    def state_dict(self):
        self._impl.lr = float(self.param_groups[0]["lr"])
        return self._impl.state_dict()

    def load_state_dict(self, state_dict):
        self._impl.load_state_dict(dict(state_dict))
        lr = state_dict.get("param_groups.0.lr")
        if lr is not None:
            self.param_groups[0]["lr"] = lr.item()


def _params(params):
    params = list(params)
    if params and isinstance(params[0], dict):
        if len(params) > 1:
            raise NotImplementedError("dtr optimizers take one parameter group")
        params = list(params[0]["params"])
    return params


class SGD(Optimizer):
    """torch.optim.SGD(params, lr=1e-3, momentum=0, dampening=0, weight_decay=0,
    nesterov=False). ValueError for invalid hyperparameters or an empty list."""

    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0,
                 nesterov=False, *, maximize=False, foreach=None, differentiable=False):
        if maximize:
            raise NotImplementedError("SGD: maximize=True is not supported by dtr")
        params = _params(params)
        impl = _C._SGD(params, lr, momentum, dampening, weight_decay, nesterov)
        super().__init__(impl, params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                            weight_decay=weight_decay, nesterov=nesterov))


class AdamW(Optimizer):
    """torch.optim.AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
    weight_decay=1e-2, amsgrad=False). ValueError for invalid hyperparameters."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False, foreach=None, capturable=False,
                 differentiable=False, fused=None):
        if maximize:
            raise NotImplementedError("AdamW: maximize=True is not supported by dtr")
        params = _params(params)
        impl = _C._AdamW(params, lr, betas[0], betas[1], eps, weight_decay, amsgrad)
        super().__init__(impl, params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                            weight_decay=weight_decay, amsgrad=amsgrad))
