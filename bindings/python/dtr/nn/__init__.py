"""torch.nn for dtr: Module (subclass it as in PyTorch), Parameter, and the layers
of the C++ library (eager/nn/), initialized from dtr's generator with the same
draws in the same order as the C++ layers, so a model built here after
dtr.manual_seed(s) has the weights of the same model built in C++."""
import collections
import math

from .. import Tensor, _C, no_grad
from . import functional, init, utils
from . import functional as F

__all__ = ["Parameter", "Module", "Sequential", "ModuleList", "ModuleDict", "Linear", "Conv2d",
           "LayerNorm", "Embedding", "Dropout", "ReLU", "GELU", "Identity",
           "CausalSelfAttention", "functional", "init", "utils"]


class Parameter(Tensor):
    """A leaf tensor that requires grad and that a Module registers when assigned to an
    attribute (torch.nn.Parameter). It shares `data`'s storage, which becomes a constant
    of the remat runtime (never evicted)."""

    def __init__(self, data=None, requires_grad=True):
        if data is None:
            data = _C.empty([0], None, None, False)
        super().__init__(data.detach())
        if requires_grad:
            self.requires_grad_(True)

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()


_FLOATING = (_C.dtype.float32, _C.dtype.float64, _C.dtype.float16, _C.dtype.bfloat16)


def _as_tensor(value):
    from .. import tensor
    return tensor(value)


class _HookHandle:
    """What register_forward_hook returns: remove() unregisters the hook."""
    _next_id = 0

    def __init__(self, hooks, hook):
        self._hooks, self.id = hooks, _HookHandle._next_id
        _HookHandle._next_id += 1
        hooks[self.id] = hook

    def remove(self):
        self._hooks.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


_IncompatibleKeys = collections.namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


class Module:
    """Base of every layer (torch.nn.Module): parameters, buffers and child modules are
    registered by assigning them to attributes; forward() is what calling the module
    runs."""

    training: bool

    def __init__(self):
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", collections.OrderedDict())
        object.__setattr__(self, "_buffers", collections.OrderedDict())
        object.__setattr__(self, "_modules", collections.OrderedDict())
        object.__setattr__(self, "_non_persistent_buffers", set())
        object.__setattr__(self, "_forward_pre_hooks", collections.OrderedDict())
        object.__setattr__(self, "_forward_hooks", collections.OrderedDict())

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    def __call__(self, *args, **kwargs):
        for hook in list(self._forward_pre_hooks.values()):
            r = hook(self, args)
            if r is not None:
                args = r if isinstance(r, tuple) else (r,)
        out = self.forward(*args, **kwargs)
        for hook in list(self._forward_hooks.values()):
            r = hook(self, args, out)
            if r is not None:
                out = r
        return out

    def register_forward_pre_hook(self, hook):
        """hook(module, args) runs before forward; a non-None result replaces args (a
        single value is wrapped in a tuple). Returns a handle whose remove() drops it."""
        return _HookHandle(self._forward_pre_hooks, hook)

    def register_forward_hook(self, hook):
        """hook(module, args, output) runs after forward; a non-None result replaces the
        output. Returns a handle whose remove() drops it."""
        return _HookHandle(self._forward_hooks, hook)

    # ---- registration
    def __setattr__(self, name, value):
        d = self.__dict__
        if "_parameters" not in d:
            raise AttributeError("cannot assign before Module.__init__() call")
        params, buffers, modules = d["_parameters"], d["_buffers"], d["_modules"]
        if isinstance(value, Parameter):
            buffers.pop(name, None)
            modules.pop(name, None)
            d.pop(name, None)
            params[name] = value
        elif isinstance(value, Module):
            params.pop(name, None)
            buffers.pop(name, None)
            d.pop(name, None)
            modules[name] = value
        elif name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                                "(dtr.nn.Parameter or None expected)")
            params[name] = None
        elif name in buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                                "(dtr.Tensor or None expected)")
            buffers[name] = value
        elif name in modules:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as child module '{name}' "
                                "(dtr.nn.Module or None expected)")
            modules[name] = None
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name):
        d = self.__dict__
        for key in ("_parameters", "_buffers", "_modules"):
            if key in d and name in d[key]:
                return d[key][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        for key in ("_parameters", "_buffers", "_modules"):
            if name in self.__dict__[key]:
                del self.__dict__[key][name]
                self._non_persistent_buffers.discard(name)
                return
        object.__delattr__(self, name)

    def _check_name(self, name):
        if not isinstance(name, str):
            raise TypeError(f"name should be a string, got {type(name).__name__}")
        if name == "" or "." in name:
            raise KeyError(f'name can\'t be empty or contain ".", got "{name}"')
        if hasattr(type(self), name) or (name in self.__dict__):
            raise KeyError(f"attribute '{name}' already exists")

    def register_parameter(self, name, param):
        """Registers `param` (a Parameter, or None) under `name`."""
        if name not in self._parameters:
            self._check_name(name)
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter '{name}' "
                            "(dtr.nn.Parameter or None required)")
        self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        """Registers a buffer (a Tensor or None, never trained): part of the state_dict
        unless persistent=False, moved by to() either way. TypeError for anything but a
        Tensor or None, KeyError for a bad or taken name."""
        if name not in self._buffers:
            self._check_name(name)
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' "
                            "(dtr.Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers.discard(name)
        else:
            self._non_persistent_buffers.add(name)

    def add_module(self, name, module):
        if name not in self._modules:
            self._check_name(name)
        self._modules[name] = module

    register_module = add_module

    # ---- traversal
    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        """(dotted name, module) for this module ("" or `prefix`) and every descendant,
        depth first in registration order; a module reachable twice is listed once
        unless remove_duplicate=False."""
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is not None:
                yield from m.named_modules(memo, prefix + ("." if prefix else "") + name,
                                           remove_duplicate)

    def get_submodule(self, target):
        """The descendant at dotted path `target` ("" is self); AttributeError naming
        the missing part otherwise."""
        m = self
        for part in target.split(".") if target else []:
            if not isinstance(m, Module) or part not in m._modules:
                raise AttributeError(f"{type(m).__name__} has no attribute `{part}`")
            m = m._modules[part]
        return m

    def _get_registered(self, target, registry, kind):
        path, _, name = target.rpartition(".")
        m = self.get_submodule(path)
        if name not in getattr(m, registry):
            raise AttributeError(f"{type(m).__name__} has no {kind} `{name}`")
        return getattr(m, registry)[name]

    def get_parameter(self, target):
        """The parameter at dotted path `target`; AttributeError when there is none."""
        return self._get_registered(target, "_parameters", "parameter")

    def get_buffer(self, target):
        """The buffer at dotted path `target`; AttributeError when there is none."""
        return self._get_registered(target, "_buffers", "buffer")

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        for name, m in self._modules.items():
            if m is not None:
                yield name, m

    def children(self):
        for _, m in self.named_children():
            yield m

    def _named(self, attr, prefix, recurse):
        seen = set()
        mods = self.named_modules(prefix=prefix) if recurse else [(prefix, self)]
        for mprefix, m in mods:
            for name, t in getattr(m, attr).items():
                if t is None or id(t) in seen:
                    continue
                seen.add(id(t))
                yield mprefix + ("." if mprefix else "") + name, t

    def named_parameters(self, prefix="", recurse=True):
        """(dotted name, parameter): each module's own first, then its children's."""
        return self._named("_parameters", prefix, recurse)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True):
        return self._named("_buffers", prefix, recurse)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def apply(self, fn):
        """Calls fn(m) on every child (recursively, children first) and then on self;
        returns self (torch.nn.Module.apply)."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # ---- devices and dtypes
    def _apply(self, fn):
        """Replaces every parameter and buffer t of the tree by fn(t) where that is a new
        tensor; a parameter becomes a new Parameter (same requires_grad, its grad
        converted too)."""
        for m in self.modules():
            for name, p in m._parameters.items():
                if p is None:
                    continue
                new = fn(p)
                if new is p:
                    continue
                q = Parameter(new, p.requires_grad)
                if p.grad is not None:
                    q.grad = fn(p.grad)
                m._parameters[name] = q
            for name, b in m._buffers.items():
                if b is not None:
                    m._buffers[name] = fn(b)
        return self

    def to(self, *args, **kwargs):
        """module.to(device), .to(dtype), .to(device, dtype), .to(tensor), with
        device=/dtype= keywords (torch.nn.Module.to): floating parameters and buffers
        take `dtype`, all take `device`. Returns self. Tensors already there are kept
        (parameter identity unchanged); moved or cast parameters are new Parameter
        objects, so build optimizers after moving a model (PyTorch's advice too).
        TypeError for a non-floating dtype or an argument of another kind."""
        device, dtype = kwargs.pop("device", None), kwargs.pop("dtype", None)
        kwargs.pop("non_blocking", None)
        if kwargs:
            raise TypeError(f"to() got unexpected keyword arguments {sorted(kwargs)}")
        for a in args:
            if isinstance(a, _C.dtype):
                dtype = a
            elif isinstance(a, (str, _C.device)):
                device = a
            elif isinstance(a, Tensor):
                device, dtype = a.device, a.dtype
            elif isinstance(a, bool):
                continue  # non_blocking given positionally
            else:
                raise TypeError(f"to() received an invalid argument of type {type(a).__name__}")
        if isinstance(device, str):
            device = _C.device(device)
        if dtype is not None and dtype not in _FLOATING:
            raise TypeError(f"nn.Module.to only accepts floating point dtypes, but got desired "
                            f"dtype={dtype}")

        def convert(t):
            return t.to(device=device, dtype=dtype if t.is_floating_point() else None)
        return self._apply(convert)

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None):
        """Moves the module to cuda:`device` (default 0); dtr.DeviceError without one."""
        index = 0 if device is None else (device if isinstance(device, int) else _C.device(device).index)
        return self.to(f"cuda:{index}")

    def float(self):
        return self.to(dtype=_C.dtype.float32)

    def double(self):
        return self.to(dtype=_C.dtype.float64)

    def half(self):
        return self.to(dtype=_C.dtype.float16)

    def bfloat16(self):
        return self.to(dtype=_C.dtype.bfloat16)

    # ---- modes
    def train(self, mode=True):
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        for p in self.parameters():
            if p.grad is not None:
                if set_to_none:
                    p.grad = None
                else:
                    with no_grad():
                        p.grad.zero_()

    # ---- state
    def state_dict(self, destination=None, prefix="", keep_vars=False):
        """Parameters and buffers by dotted name in PyTorch's order (per module: its
        parameters, its buffers, then its children); detached tensors sharing storage."""
        out = collections.OrderedDict() if destination is None else destination
        for name, p in self._parameters.items():
            if p is not None:
                out[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers:
                out[prefix + name] = b if keep_vars else b.detach()
        for name, m in self._modules.items():
            if m is not None:
                m.state_dict(out, prefix + name + ".", keep_vars)
        return out

    def load_state_dict(self, state_dict, strict=True):
        """Copies `state_dict` into the parameters and buffers in place (casting dtypes).
        With `strict`, missing or unexpected keys raise RuntimeError naming them, as in
        PyTorch; a shape mismatch always raises. Nothing is written unless every check
        passes. Values may be Tensors or anything dtr.tensor takes (numpy arrays, e.g. a
        PyTorch state dict's tensors as .numpy()). Returns (missing_keys, unexpected_keys)."""
        own = self.state_dict(keep_vars=True)
        state_dict = {k: v if isinstance(v, Tensor) else _as_tensor(v) for k, v in state_dict.items()}
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        errors = []
        if strict and unexpected:
            errors.append("Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected) + ".")
        if strict and missing:
            errors.append("Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ".")
        for k, t in own.items():
            if k in state_dict and tuple(state_dict[k].shape) != tuple(t.shape):
                errors.append(f"size mismatch for {k}: copying a param with shape "
                              f"{tuple(state_dict[k].shape)} from checkpoint, the shape in current "
                              f"model is {tuple(t.shape)}.")
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t"
                               + "\n\t".join(errors))
        with no_grad():
            for k, t in own.items():
                if k in state_dict:
                    t.copy_(state_dict[k])
        return _IncompatibleKeys(missing, unexpected)

    def extra_repr(self):
        return ""

    def __repr__(self):
        lines = [f"({name}): " + repr(m).replace("\n", "\n  ") for name, m in self._modules.items()]
        head = f"{type(self).__name__}({self.extra_repr()}"
        if not lines:
            return head + ")"
        return head + "\n  " + "\n  ".join(lines) + "\n)"


class _IndexedModules(Module):
    """Children named "0", "1", ... in order: what Sequential and ModuleList share."""

    def append(self, module):
        self.add_module(str(len(self._modules)), module)
        return self

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __getitem__(self, i):
        mods = list(self._modules.values())
        if isinstance(i, slice):
            return type(self)(*mods[i]) if isinstance(self, Sequential) else type(self)(mods[i])
        if not -len(mods) <= i < len(mods):
            raise IndexError(f"index {i} is out of range")
        return mods[i]


class Sequential(_IndexedModules):
    """Applies its modules in order (torch.nn.Sequential); they are named "0", "1", ..."""

    def __init__(self, *modules):
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], collections.OrderedDict):
            for name, m in modules[0].items():
                self.add_module(name, m)
        else:
            self.extend(modules)

    def forward(self, x):
        for m in self._modules.values():
            x = m(x)
        return x


class ModuleList(_IndexedModules):
    """A list of modules, registered as "0", "1", ... (torch.nn.ModuleList)."""

    def __init__(self, modules=None):
        super().__init__()
        self.extend(modules or [])


class ModuleDict(Module):
    def __init__(self, modules=None):
        super().__init__()
        for k, m in (modules or {}).items():
            self.add_module(k, m)

    def __getitem__(self, k):
        return self._modules[k]

    def __setitem__(self, k, m):
        self.add_module(k, m)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def keys(self):
        return self._modules.keys()

    def values(self):
        return self._modules.values()

    def items(self):
        return self._modules.items()


def _opts(dtype, device):
    return dict(dtype=dtype, device=device)


class Linear(Module):
    """y = x W^T + b. weight (out, in) kaiming_uniform(a=sqrt(5)), bias (out) uniform in
    ±1/sqrt(in), drawn in that order (torch.nn.Linear)."""

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        if in_features < 0 or out_features < 0:
            raise ValueError("Linear: in_features and out_features must be non-negative, got "
                             f"{in_features} and {out_features}")
        self.in_features, self.out_features = in_features, out_features
        self.weight = Parameter(init._kaiming_uniform((out_features, in_features), math.sqrt(5.0),
                                                      dtype, device))
        if bias:
            bound = 1.0 / math.sqrt(in_features) if in_features > 0 else 0.0
            self.bias = Parameter(init._uniform((out_features,), -bound, bound, dtype, device))
        else:
            self.register_parameter("bias", None)

    def forward(self, x):
        return _C.linear(x, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


class _ConvNd(Module):
    """What Conv1d and Conv2d share: the checks, and weight (out, in/groups, *kernel)
    kaiming_uniform(a=sqrt(5)) then bias uniform in ±1/sqrt(fan_in), drawn in that order."""

    def _make_params(self, in_channels, out_channels, kernel_size, groups, bias, padding_mode,
                     device, dtype):
        name = type(self).__name__
        if padding_mode != "zeros":
            raise NotImplementedError(f"{name}: only padding_mode='zeros' is supported by dtr")
        if groups <= 0:
            raise ValueError(f"{name}: groups must be a positive integer, got {groups}")
        if in_channels % groups:
            raise ValueError(f"{name}: in_channels ({in_channels}) must be divisible by groups ({groups})")
        if out_channels % groups:
            raise ValueError(f"{name}: out_channels ({out_channels}) must be divisible by groups ({groups})")
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.padding_mode = padding_mode
        wshape = (out_channels, in_channels // groups) + tuple(kernel_size)
        self.weight = Parameter(init._kaiming_uniform(wshape, math.sqrt(5.0), dtype, device))
        if bias:
            fan = _C._fan_in(list(wshape))
            bound = 1.0 / math.sqrt(fan) if fan > 0 else 0.0
            self.bias = Parameter(init._uniform((out_channels,), -bound, bound, dtype, device))
        else:
            self.register_parameter("bias", None)


class Conv2d(_ConvNd):
    """torch.nn.Conv2d (padding_mode="zeros") on (N, C_in, H, W): weight (out, in/groups,
    kH, kW) kaiming_uniform(a=sqrt(5)), bias uniform in ±1/sqrt(fan_in)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        self.kernel_size, self.stride = _pair(kernel_size), _pair(stride)
        self.padding, self.dilation = _pair(padding), _pair(dilation)
        self._make_params(in_channels, out_channels, self.kernel_size, groups, bias, padding_mode,
                          device, dtype)

    def forward(self, x):
        return _C.conv2d(x, self.weight, self.bias, self.stride, self.padding, self.dilation,
                         self.groups)


class LayerNorm(Module):
    """Normalizes over the trailing `normalized_shape` dims; weight ones, bias zeros."""

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True,
                 device=None, dtype=None):
        super().__init__()
        self.normalized_shape = ((normalized_shape,) if isinstance(normalized_shape, int)
                                 else tuple(normalized_shape))
        self.eps = eps
        if elementwise_affine:
            self.weight = Parameter(init._constant(self.normalized_shape, 1.0, dtype, device))
            if bias:
                self.bias = Parameter(init._constant(self.normalized_shape, 0.0, dtype, device))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, x):
        return _C.layer_norm(x, list(self.normalized_shape), self.weight, self.bias, self.eps)


class Embedding(Module):
    """A lookup table: weight (num_embeddings, embedding_dim) from N(0, 1)."""

    def __init__(self, num_embeddings, embedding_dim, device=None, dtype=None):
        super().__init__()
        if num_embeddings < 0 or embedding_dim < 0:
            raise ValueError("Embedding: num_embeddings and embedding_dim must be non-negative, "
                             f"got {num_embeddings} and {embedding_dim}")
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.weight = Parameter(init._normal((num_embeddings, embedding_dim), 0.0, 1.0, dtype, device))

    def forward(self, indices):
        return _C.embedding(indices, self.weight)


class Dropout(Module):
    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: dropout probability has to be between 0 and 1, but got {p}")
        if inplace:
            raise NotImplementedError("Dropout: inplace=True is not supported by dtr")
        self.p = p

    def forward(self, x):
        return _C.dropout(x, self.p, self.training)


class ReLU(Module):
    def forward(self, x):
        return _C.relu(x)


class GELU(Module):
    def __init__(self, approximate="none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got '{approximate}'")
        self.approximate = approximate

    def forward(self, x):
        return _C.gelu(x, self.approximate)


class Identity(Module):
    def forward(self, x):
        return x


class CausalSelfAttention(Module):
    """GPT-2 / nanoGPT causal self-attention (eager/nn/attention.h): x (B, T, C) →
    (B, T, C). Children c_attn = Linear(C, 3C), c_proj = Linear(C, C), resid_dropout."""

    def __init__(self, n_embd, n_head, dropout=0.0, bias=True, device=None, dtype=None):
        super().__init__()
        if n_head <= 0 or n_embd % n_head:
            raise ValueError(f"CausalSelfAttention: n_embd ({n_embd}) must be divisible by "
                             f"n_head ({n_head})")
        self.n_embd, self.n_head, self.dropout = n_embd, n_head, dropout
        self.c_attn = Linear(n_embd, 3 * n_embd, bias, device, dtype)
        self.c_proj = Linear(n_embd, n_embd, bias, device, dtype)
        self.resid_dropout = Dropout(dropout)

    def forward(self, x):
        if x.dim() != 3 or x.shape[2] != self.n_embd:
            raise ValueError(f"CausalSelfAttention: expected input of shape (B, T, {self.n_embd}), "
                             f"got {list(x.shape)}")
        B, T, C = x.shape
        nh = self.n_head
        hs = C // nh
        qkv = self.c_attn(x)
        q, k, v = (qkv.narrow(2, i * C, C).reshape(B, T, nh, hs).transpose(1, 2) for i in range(3))
        y = _C.scaled_dot_product_attention(q, k, v, None, self.dropout if self.training else 0.0,
                                            True, None)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


from .layers import *  # noqa: E402,F401,F403  (they subclass Module above)
from .loss import *  # noqa: E402,F401,F403
from .rnn import *  # noqa: E402,F401,F403
from .transformer import *  # noqa: E402,F401,F403
from . import layers as _layers, loss as _loss, rnn as _rnn, transformer as _transformer  # noqa: E402

__all__ += _layers.__all__ + _loss.__all__ + _rnn.__all__ + _transformer.__all__
