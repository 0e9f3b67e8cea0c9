"""torch.optim: SGD, Adam and AdamW over the C++ optimizers (eager/optim.h), whose
update runs in C++ without the GIL, and the schedulers of `lr_scheduler`.

As in PyTorch, an optimizer takes an iterable of tensors or of dicts (parameter
groups: {'params': [...], 'lr': ..., ...}, the options a group leaves out coming
from the constructor's). `optimizer.param_groups` is a list of dicts; edits to
their hyperparameters ('lr', 'weight_decay', 'betas', 'momentum', ...) take
effect at the next step(). state_dict() has PyTorch's shape:
{'state': {i: {'step': ..., 'exp_avg': ...}}, 'param_groups': [{..., 'params': [i, ...]}]},
parameters numbered over the groups in order.

`Optimizer` is also PyTorch's base for optimizers written in Python: a subclass
calls Optimizer.__init__(self, params, defaults) and writes step() over
self.param_groups and self.state."""
import copy
from collections import defaultdict
from itertools import chain

from .. import _C, arange, enable_grad, float64, int64, tensor

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "lr_scheduler"]


class _RequiredParameter:
    """The default of a hyperparameter a group must give (torch.optim.optimizer.required)."""

    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()


def _is_tensor(x):
    return isinstance(x, _C.Tensor)


class Optimizer:
    """torch.optim.Optimizer(params, defaults): `params` is an iterable of tensors
    (one group) or of dicts (groups); TypeError for a single tensor or a set,
    ValueError for an empty iterable."""

    def __init__(self, params, defaults):
        self.defaults = defaults
        self.state = defaultdict(dict)
        self.param_groups = []
        self._step_count = 0
        if _is_tensor(params) or isinstance(params, (set, frozenset)):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors or "
                            "dicts, but got " + type(params).__name__)
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for group in param_groups:
            self._add_group(group)

    def __repr__(self):
        lines = [type(self).__name__ + " ("]
        for i, group in enumerate(self.param_groups):
            lines.append("Parameter Group {}".format(i))
            lines.extend("    {}: {}".format(k, group[k]) for k in sorted(group) if k != "params")
        lines.append(")")
        return "\n".join(lines)

    def _add_group(self, param_group):
        """Checks `param_group` and fills in the defaults; returns the new dict."""
        if not isinstance(param_group, dict):
            raise TypeError("param group must be a dict, got " + type(param_group).__name__)
        group = dict(param_group)
        params = group.get("params")
        if params is None:
            raise ValueError("param group has no 'params' entry")
        if _is_tensor(params):
            params = [params]
        elif isinstance(params, (set, frozenset)):
            raise TypeError("optimizer parameters need to be organized in ordered collections, but the "
                            "ordering of tensors in sets will change between runs. Please use a list instead.")
        params = list(params)
        for p in params:
            if not _is_tensor(p):
                raise TypeError("optimizer can only optimize Tensors, but one of the params is "
                                + type(p).__name__)
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        group["params"] = params
        for name, default in self.defaults.items():
            if default is required and name not in group:
                raise ValueError("parameter group didn't specify a value of required optimization "
                                 "parameter " + name)
            group.setdefault(name, default)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in params):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(group)
        return group

    def add_param_group(self, param_group):
        """Adds a group (a dict with 'params' and any options; the others from
        the constructor's defaults). TypeError / ValueError as the constructor."""
        self._add_group(param_group)

    def zero_grad(self, set_to_none=True):
        """Sets every parameter's grad to None, or with set_to_none=False fills
        the grads with zeros in place."""
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    p.grad.detach().zero_()

    def step(self, closure=None):
        raise NotImplementedError(type(self).__name__ + ".step is not implemented")

    def _params(self):
        """Every group's parameters, in order (their numbers in state dicts)."""
        return [p for g in self.param_groups for p in g["params"]]

    def _packed_groups(self):
        """The groups with 'params' as their parameters' numbers (PyTorch's numbering)."""
        packed, start = [], 0
        for group in self.param_groups:
            entry = {k: v for k, v in group.items() if k != "params"}
            entry["params"] = list(range(start, start + len(group["params"])))
            start += len(group["params"])
            packed.append(entry)
        return packed

    def state_dict(self):
        """{'state': {number: per-parameter state}, 'param_groups': [group dicts
        with 'params' as parameter numbers]} (torch.optim.Optimizer.state_dict)."""
        number = {id(p): i for i, p in enumerate(chain.from_iterable(g["params"] for g in self.param_groups))}
        state = {(number[id(k)] if _is_tensor(k) else k): v for k, v in self.state.items()}
        return {"state": state, "param_groups": self._packed_groups()}

    def _check_saved_groups(self, state_dict):
        """The saved groups, after PyTorch's checks: a dict with 'state' and
        'param_groups', as many groups as this optimizer's, of the same sizes
        (ValueError otherwise). Returns (saved groups, {saved number: this
        optimizer's number of the parameter})."""
        if not isinstance(state_dict, dict) or "param_groups" not in state_dict or "state" not in state_dict:
            raise ValueError("load_state_dict: expected a dict with 'state' and 'param_groups' "
                             "(what state_dict() returns)")
        saved = state_dict["param_groups"]
        if len(saved) != len(self.param_groups):
            raise ValueError("loaded state dict has a different number of parameter groups ({} here, {} "
                             "loaded)".format(len(self.param_groups), len(saved)))
        for i, (g, s) in enumerate(zip(self.param_groups, saved)):
            if len(g["params"]) != len(s["params"]):
                raise ValueError("loaded state dict contains a parameter group that doesn't match the size "
                                 "of optimizer's group (group {}: {} parameters here, {} loaded)"
                                 .format(i, len(g["params"]), len(s["params"])))
        id_map = {k: i for i, k in enumerate(chain.from_iterable(s["params"] for s in saved))}
        return saved, id_map

    def _adopt_groups(self, saved):
        """Replaces each group's options by the saved group's (keeping the params)."""
        for group, s in zip(self.param_groups, saved):
            options = {k: copy.deepcopy(v) for k, v in s.items() if k != "params"}
            params = group["params"]
            group.clear()
            group.update(options)
            group["params"] = params

    def load_state_dict(self, state_dict):
        """Restores what state_dict() returned (torch.optim.Optimizer.load_state_dict)."""
        saved, id_map = self._check_saved_groups(state_dict)
        params = self._params()
        state = defaultdict(dict)
        for k, v in state_dict["state"].items():
            state[params[id_map[k]] if k in id_map else k] = copy.deepcopy(v)
        self.state = state
        self._adopt_groups(saved)


def _flag(value, name):
    if not isinstance(value, (bool, int)):
        raise TypeError("{} must be a bool, got {}".format(name, type(value).__name__))
    return 1.0 if value else 0.0


class _NativeOptimizer(Optimizer):
    """An optimizer whose state and update live in C++ (a dtr._C._Optimizer).
    Subclasses give _make(groups) and _hyperparameters(group) → [(C++ name, float)]."""

    def __init__(self, params, defaults):
        self._impl = None
        super().__init__(params, defaults)
        self._impl = self._make([g["params"] for g in self.param_groups])

    def add_param_group(self, param_group):
        group = self._add_group(param_group)
        try:
            self._impl.add_param_group(group["params"])
        except Exception:
            self.param_groups.pop()
            raise

    def _sync(self):
        """Copies every group's hyperparameters into the C++ optimizer."""
        for i, group in enumerate(self.param_groups):
            if group.get("maximize", False):
                raise NotImplementedError("{}: maximize=True is not supported by dtr (group {})"
                                          .format(type(self).__name__, i))
            self._impl.set_group_hyperparameters(i, self._hyperparameters(group))

    def step(self, closure=None):
        """One update with each group's current options; with `closure`, calls it
        first under grad mode and returns its loss. ValueError for an invalid
        hyperparameter (naming it)."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        self._sync()
        self._impl.step()
        self._step_count += 1
        return loss

    def zero_grad(self, set_to_none=True):
        self._impl.zero_grad(set_to_none)

    @property
    def state(self):
        """{parameter: {'step': ..., 'exp_avg': ...}} for the parameters with
        state (a fresh dict over the live buffers, not copies)."""
        params = self._params()
        state = defaultdict(dict)
        for i, entry in self.state_dict()["state"].items():
            state[params[i]] = entry
        return state

    @state.setter
    def state(self, value):
        if self._impl is not None or value:
            raise AttributeError("the state of a dtr optimizer is set with load_state_dict")

    def state_dict(self):
        """{'state': {i: {'step': float tensor (counting optimizers), buffers}},
        'param_groups': [the group dicts with 'params' as parameter numbers]}.
        The buffers are the live tensors, not copies."""
        state = {}
        for key, value in self._impl.state_dict().items():
            if not key.startswith("state."):
                continue
            _, i, name = key.split(".", 2)
            if name == "step":  # PyTorch keeps a float tensor
                value = tensor(float(value.item()))
            state.setdefault(int(i), {})[name] = value
        return {"state": state, "param_groups": self._packed_groups()}

    def load_state_dict(self, state_dict):
        """Restores what state_dict() returned (or PyTorch's of the same groups):
        the state is copied, each group's options replaced by the saved group's.
        ValueError for a different group count or size, a buffer of the wrong
        shape or an invalid hyperparameter; TypeError for a state value that is
        not a tensor. Nothing changes on error."""
        if isinstance(state_dict, dict) and state_dict and all(
                isinstance(k, str) and "." in k for k in state_dict):
            self._load_flat(state_dict)  # dtr's flat form (the C++ state_dict)
            return
        saved, id_map = self._check_saved_groups(state_dict)
        flat = {}
        for k, entry in state_dict["state"].items():
            if k not in id_map:
                raise ValueError("load_state_dict: state of parameter {!r}, which no saved group lists".format(k))
            i = id_map[k]
            for name, value in entry.items():
                if value is None:  # e.g. SGD's momentum_buffer without momentum
                    continue
                if name == "step":
                    value = tensor(int(float(value.item() if _is_tensor(value) else value)), dtype=int64)
                elif not _is_tensor(value):
                    raise TypeError("load_state_dict: state[{!r}][{!r}] is {}; expected a Tensor"
                                    .format(k, name, type(value).__name__))
                flat["state.{}.{}".format(i, name)] = value
        start = 0
        for g, (group, s) in enumerate(zip(self.param_groups, saved)):
            merged = dict(group)
            merged.update({k: v for k, v in s.items() if k != "params"})
            for name, value in self._hyperparameters(merged):
                flat["param_groups.{}.{}".format(g, name)] = tensor(value, dtype=float64)
            n = len(group["params"])
            flat["param_groups.{}.params".format(g)] = arange(start, start + n, dtype=int64)
            start += n
        self._impl.load_state_dict(flat)
        self._adopt_groups([{**group, **s} for group, s in zip(self.param_groups, saved)])

    def _load_flat(self, flat):
        self._impl.load_state_dict(dict(flat))
        for g, group in enumerate(self.param_groups):
            for name, value in self._impl.group_hyperparameters(g):
                self._set_option(group, name, value)

    def _set_option(self, group, name, value):
        """Sets group option `name` (a C++ name) to `value`."""
        if name in ("beta1", "beta2"):
            betas = list(group["betas"])
            betas[0 if name == "beta1" else 1] = value
            group["betas"] = tuple(betas)
        elif name in ("nesterov", "amsgrad"):
            group[name] = bool(value)
        else:
            group[name] = value


class SGD(_NativeOptimizer):
    """torch.optim.SGD(params, lr=1e-3, momentum=0, dampening=0, weight_decay=0,
    nesterov=False), per group:
        g = grad + weight_decay·p;  buf = g (first step) or momentum·buf + (1−dampening)·g
        g = g + momentum·buf (nesterov) or buf (with momentum);  p -= lr·g
    ValueError for a negative lr, momentum or weight_decay, or nesterov without
    momentum or with dampening; NotImplementedError for maximize=True."""

    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0,
                 nesterov=False, *, maximize=False, foreach=None, differentiable=False):
        _check_nonnegative(lr=lr, momentum=momentum, weight_decay=weight_decay)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        if maximize:
            raise NotImplementedError("SGD: maximize=True is not supported by dtr")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov, maximize=maximize,
                                      foreach=foreach, differentiable=differentiable))

    def _make(self, groups):
        d = self.defaults
        return _C._SGD(groups, float(d["lr"]), float(d["momentum"]), float(d["dampening"]),
                       float(d["weight_decay"]), bool(d["nesterov"]))

    @staticmethod
    def _hyperparameters(group):
        return [("lr", float(group["lr"])), ("momentum", float(group["momentum"])),
                ("dampening", float(group["dampening"])), ("weight_decay", float(group["weight_decay"])),
                ("nesterov", _flag(group["nesterov"], "nesterov"))]


def _check_nonnegative(**values):
    names = {"lr": "learning rate", "eps": "epsilon value", "momentum": "momentum value",
             "weight_decay": "weight_decay value"}
    for name, value in values.items():
        if not 0.0 <= value:
            raise ValueError("Invalid {}: {}".format(names[name], value))


class _AdamBase(_NativeOptimizer):
    _native = None

    def __init__(self, params, lr, betas, eps, weight_decay, amsgrad, maximize, extra):
        _check_nonnegative(lr=lr, eps=eps, weight_decay=weight_decay)
        betas = tuple(betas)
        for i in (0, 1):
            if not 0.0 <= betas[i] < 1.0:
                raise ValueError("Invalid beta parameter at index {}: {}".format(i, betas[i]))
        if maximize:
            raise NotImplementedError("{}: maximize=True is not supported by dtr".format(type(self).__name__))
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      amsgrad=amsgrad, maximize=maximize, **extra))

    def _make(self, groups):
        d = self.defaults
        return self._native(groups, float(d["lr"]), float(d["betas"][0]), float(d["betas"][1]),
                            float(d["eps"]), float(d["weight_decay"]), bool(d["amsgrad"]))

    @staticmethod
    def _hyperparameters(group):
        beta1, beta2 = group["betas"]
        return [("lr", float(group["lr"])), ("beta1", float(beta1)), ("beta2", float(beta2)),
                ("eps", float(group["eps"])), ("weight_decay", float(group["weight_decay"])),
                ("amsgrad", _flag(group["amsgrad"], "amsgrad"))]


class Adam(_AdamBase):
    """torch.optim.Adam(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
    amsgrad=False), per group (t counts this parameter's steps):
        g = grad + weight_decay·p   (L2: the decay is part of the gradient)
        m = β1·m + (1−β1)·g;  v = β2·v + (1−β2)·g²   (v_max = max(v_max, v) with amsgrad)
        p -= lr/(1−β1^t) · m / (sqrt(v)/sqrt(1−β2^t) + eps)
    ValueError for lr, eps or weight_decay < 0 or betas outside [0, 1);
    NotImplementedError for maximize=True. foreach/capturable/differentiable/fused
    are accepted and change nothing."""
    _native = _C._Adam

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False, fused=False):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize,
                         dict(foreach=foreach, capturable=capturable, differentiable=differentiable,
                              fused=fused))


class AdamW(_AdamBase):
    """torch.optim.AdamW(params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
    amsgrad=False): Adam with decoupled weight decay, per group:
        p *= 1 − lr·weight_decay, then Adam's update with g = grad.
    Errors as Adam's. foreach/capturable/differentiable/fused are accepted and
    change nothing (nanoGPT passes fused=True on CUDA)."""
    _native = _C._AdamW

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False, foreach=None, capturable=False,
                 differentiable=False, fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize,
                         dict(foreach=foreach, capturable=capturable))


from . import lr_scheduler  # noqa: E402  (it uses Optimizer)
