"""torch.nn.LSTM, GRU, LSTMCell and GRUCell as compositions of registry ops.

Each time step is linear, sigmoid, tanh, mul and add (the input projection of a
whole layer is one linear over every step), so every intermediate is an
ordinary tensor with lineage: under a budget the runtime evicts the steps'
activations and recomputes them during backward like any other op's.

Parameters have PyTorch's names, shapes and order (weight_ih_l{k}, weight_hh_l{k},
bias_ih_l{k}, bias_hh_l{k}, then the "_reverse" ones for a bidirectional layer)
and gate order (LSTM: input, forget, cell, output; GRU: reset, update, new);
each is drawn uniform in ±1/sqrt(hidden_size) from dtr's generator, in that order.
"""
import math

from .. import _C, stack, zeros
from . import Module, Parameter, init
from . import functional as F

__all__ = ["LSTM", "GRU", "LSTMCell", "GRUCell"]


def _lstm_step(gi, h, c, w_hh, b_hh):
    """One LSTM step from the input projection gi (N, 4H): returns (h', c')."""
    gates = gi + _C.linear(h, w_hh, b_hh)
    i, f, g, o = gates.chunk(4, 1)
    c = _C.sigmoid(f) * c + _C.sigmoid(i) * _C.tanh(g)
    return _C.sigmoid(o) * _C.tanh(c), c


def _gru_step(gi, h, w_hh, b_hh):
    """One GRU step from the input projection gi (N, 3H): returns h'."""
    gh = _C.linear(h, w_hh, b_hh)
    i_r, i_z, i_n = gi.chunk(3, 1)
    h_r, h_z, h_n = gh.chunk(3, 1)
    r = _C.sigmoid(i_r + h_r)
    z = _C.sigmoid(i_z + h_z)
    n = _C.tanh(i_n + r * h_n)
    return n + z * (h - n)


class _RNNBase(Module):
    _gates = 0
    _mode = ""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__()
        name = self._mode
        if proj_size:
            raise NotImplementedError(f"{name}: proj_size is not supported by dtr")
        if not isinstance(hidden_size, int) or hidden_size <= 0:
            raise ValueError(f"{name}: hidden_size must be a positive int, got {hidden_size!r}")
        if not isinstance(num_layers, int) or num_layers <= 0:
            raise ValueError(f"{name}: num_layers must be a positive int, got {num_layers!r}")
        if not 0.0 <= dropout <= 1.0 or isinstance(dropout, bool):
            raise ValueError(f"{name}: dropout should be a number in range [0, 1] representing the "
                             f"probability of an element being zeroed, got {dropout!r}")
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = bias, batch_first, float(dropout)
        self.bidirectional, self.proj_size = bidirectional, 0
        k = 1.0 / math.sqrt(hidden_size)
        G = self._gates * hidden_size
        directions = 2 if bidirectional else 1
        for layer in range(num_layers):
            layer_in = input_size if layer == 0 else hidden_size * directions
            for suffix in ("", "_reverse")[:directions]:
                shapes = [("weight_ih", (G, layer_in)), ("weight_hh", (G, hidden_size))]
                if bias:
                    shapes += [("bias_ih", (G,)), ("bias_hh", (G,))]
                for pname, shape in shapes:
                    self.register_parameter(f"{pname}_l{layer}{suffix}",
                                            Parameter(init._uniform(shape, -k, k, dtype, device)))

    def _weights(self, layer, suffix):
        get = lambda n: self._parameters.get(f"{n}_l{layer}{suffix}")  # noqa: E731
        return get("weight_ih"), get("weight_hh"), get("bias_ih"), get("bias_hh")

    def _run(self, x, state):
        """x (L, N, H_in); state: tuple of (num_layers * D, N, H) tensors. Returns
        (output (L, N, D * H), tuple of final states)."""
        directions = 2 if self.bidirectional else 1
        finals = [[] for _ in state]
        for layer in range(self.num_layers):
            outs = []
            for d, suffix in enumerate(("", "_reverse")[:directions]):
                w_ih, w_hh, b_ih, b_hh = self._weights(layer, suffix)
                idx = layer * directions + d
                s = [t.select(0, idx) for t in state]
                gi = _C.linear(x, w_ih, b_ih)  # every step's input projection at once
                steps = range(x.shape[0] - 1, -1, -1) if d else range(x.shape[0])
                hs = [None] * x.shape[0]
                for t in steps:
                    s = self._cell(gi.select(0, t), s, w_hh, b_hh)
                    hs[t] = s[0]
                outs.append(stack(hs, 0) if hs else x.new_zeros(0, x.shape[1], self.hidden_size))
                for f, v in zip(finals, s):
                    f.append(v)
            x = outs[0] if directions == 1 else _C.cat(outs, 2)
            if self.dropout > 0 and self.training and layer + 1 < self.num_layers:
                x = F.dropout(x, self.dropout, True)
        return x, tuple(stack(f, 0) for f in finals)

    def _forward(self, input, hx):
        name = self._mode
        if input.dim() not in (2, 3):
            raise ValueError(f"{name}: Expected input to be 2D or 3D, got {input.dim()}D instead")
        batched = input.dim() == 3
        x = input if batched else input.unsqueeze(1)
        if batched and self.batch_first:
            x = x.transpose(0, 1)
        if x.shape[2] != self.input_size:
            raise ValueError(f"{name}: input.size(-1) must be equal to input_size. Expected "
                             f"{self.input_size}, got {x.shape[2]}")
        directions = 2 if self.bidirectional else 1
        shape = (self.num_layers * directions, x.shape[1], self.hidden_size)
        n_states = 2 if self._mode == "LSTM" else 1
        if hx is None:
            state = tuple(zeros(*shape, dtype=x.dtype, device=x.device) for _ in range(n_states))
        else:
            state = tuple(hx) if n_states == 2 else (hx,)
            if len(state) != n_states:
                raise ValueError(f"{name}: expected hx as {'a tuple (h_0, c_0)' if n_states == 2 else 'one tensor'}")
            if not batched:
                state = tuple(t.unsqueeze(1) for t in state)
            for t in state:
                if tuple(t.shape) != shape:
                    raise ValueError(f"{name}: Expected hidden size {shape}, got {tuple(t.shape)}")
        out, finals = self._run(x, state)
        if batched and self.batch_first:
            out = out.transpose(0, 1)
        if not batched:
            out = out.squeeze(1)
            finals = tuple(f.squeeze(1) for f in finals)
        return out, finals

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.batch_first:
            s += ", batch_first=True"
        if self.dropout:
            s += f", dropout={self.dropout}"
        if self.bidirectional:
            s += ", bidirectional=True"
        return s


class LSTM(_RNNBase):
    """torch.nn.LSTM(input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
    dropout=0.0, bidirectional=False): input (L, N, H_in), (N, L, H_in) with batch_first,
    or unbatched (L, H_in); hx an optional (h_0, c_0), each (D * num_layers, N, H)
    (zeros when None). Returns (output (L, N, D * H), (h_n, c_n)). dropout applies to
    every layer's output but the last, in training mode. ValueError for a wrong input
    rank, feature size or state shape; proj_size is NotImplementedError."""
    _gates = 4
    _mode = "LSTM"

    def _cell(self, gi, s, w_hh, b_hh):
        return _lstm_step(gi, s[0], s[1], w_hh, b_hh)

    def forward(self, input, hx=None):
        return self._forward(input, hx)


class GRU(_RNNBase):
    """torch.nn.GRU(input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
    dropout=0.0, bidirectional=False): as LSTM with one state h_0 (D * num_layers, N, H);
    returns (output, h_n). Gates r, z, n: n = tanh(W_in x + b_in + r * (W_hn h + b_hn)),
    h' = (1 - z) * n + z * h."""
    _gates = 3
    _mode = "GRU"

    def _cell(self, gi, s, w_hh, b_hh):
        return (_gru_step(gi, s[0], w_hh, b_hh),)

    def forward(self, input, hx=None):
        out, (h,) = self._forward(input, hx)
        return out, h


class _CellBase(Module):
    _gates = 0

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        k = 1.0 / math.sqrt(hidden_size)
        G = self._gates * hidden_size
        shapes = [("weight_ih", (G, input_size)), ("weight_hh", (G, hidden_size))]
        if bias:
            shapes += [("bias_ih", (G,)), ("bias_hh", (G,))]
        for pname, shape in shapes:
            self.register_parameter(pname, Parameter(init._uniform(shape, -k, k, dtype, device)))
        if not bias:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)

    def _prepare(self, input, hx, n_states):
        name = type(self).__name__
        if input.dim() not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.dim()}D instead")
        batched = input.dim() == 2
        x = input if batched else input.unsqueeze(0)
        if hx is None:
            z = zeros(x.shape[0], self.hidden_size, dtype=x.dtype, device=x.device)
            state = (z,) * n_states
        else:
            state = tuple(hx) if n_states == 2 else (hx,)
            if not batched:
                state = tuple(t.unsqueeze(0) for t in state)
        return x, state, batched

    def extra_repr(self):
        return f"{self.input_size}, {self.hidden_size}, bias={self.bias}"


class LSTMCell(_CellBase):
    """torch.nn.LSTMCell(input_size, hidden_size, bias=True): input (N, H_in) or (H_in),
    hx an optional (h, c) each (N, H); returns (h', c')."""
    _gates = 4

    def forward(self, input, hx=None):
        x, (h, c), batched = self._prepare(input, hx, 2)
        h, c = _lstm_step(_C.linear(x, self.weight_ih, self.bias_ih), h, c, self.weight_hh, self.bias_hh)
        return (h, c) if batched else (h.squeeze(0), c.squeeze(0))


class GRUCell(_CellBase):
    """torch.nn.GRUCell(input_size, hidden_size, bias=True): input (N, H_in) or (H_in),
    hx an optional h (N, H); returns h'."""
    _gates = 3

    def forward(self, input, hx=None):
        x, (h,), batched = self._prepare(input, hx, 1)
        h = _gru_step(_C.linear(x, self.weight_ih, self.bias_ih), h, self.weight_hh, self.bias_hh)
        return h if batched else h.squeeze(0)
