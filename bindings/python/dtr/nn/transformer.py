"""torch.nn.MultiheadAttention, TransformerEncoderLayer and TransformerEncoder over
dtr's ops (linear, scaled_dot_product_attention or matmul + softmax, layer_norm,
dropout), with PyTorch's parameter names, order and initialization."""
import copy
import math

from .. import _C
from . import Dropout, LayerNorm, Linear, Module, ModuleList, Parameter, init
from . import functional as F

__all__ = ["MultiheadAttention", "TransformerEncoderLayer", "TransformerEncoder"]


def _additive_mask(attn_mask, key_padding_mask, N, heads, L, S, dtype, device):
    """attn_mask ((L, S) or (N * heads, L, S); bool True = not allowed, or floating and
    added) and key_padding_mask ((N, S); bool True = ignore, or floating and added) as
    one floating mask broadcastable to (N, heads, L, S), or None."""
    mask = None
    if attn_mask is not None:
        if attn_mask.dim() == 2:
            if tuple(attn_mask.shape) != (L, S):
                raise ValueError(f"The shape of the 2D attn_mask is {tuple(attn_mask.shape)}, but "
                                 f"should be {(L, S)}.")
            m = attn_mask.reshape(1, 1, L, S)
        elif attn_mask.dim() == 3:
            if tuple(attn_mask.shape) != (N * heads, L, S):
                raise ValueError(f"The shape of the 3D attn_mask is {tuple(attn_mask.shape)}, but "
                                 f"should be {(N * heads, L, S)}.")
            m = attn_mask.reshape(N, heads, L, S)
        else:
            raise ValueError(f"attn_mask's dimension {attn_mask.dim()} is not supported")
        mask = _as_float(m, dtype, device)
    if key_padding_mask is not None:
        if tuple(key_padding_mask.shape) != (N, S):
            raise ValueError(f"expected key_padding_mask of shape {(N, S)}, but got "
                             f"{tuple(key_padding_mask.shape)}")
        k = _as_float(key_padding_mask.reshape(N, 1, 1, S), dtype, device)
        mask = k if mask is None else mask + k
    return mask


def _as_float(m, dtype, device):
    if m.dtype == _C.dtype.bool:
        return _C.zeros(list(m.shape), dtype, device, False).masked_fill(m, float("-inf"))
    return m.to(dtype)


class MultiheadAttention(Module):
    """torch.nn.MultiheadAttention(embed_dim, num_heads, dropout=0.0, bias=True,
    batch_first=False). Parameters in PyTorch's order: in_proj_weight (3E, E)
    xavier_uniform, in_proj_bias (3E) zeros, out_proj (a Linear(E, E): weight as Linear
    draws it, bias zeros). add_bias_kv, add_zero_attn and kdim/vdim other than embed_dim
    are NotImplementedError.

    forward(query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
    average_attn_weights=True, is_causal=False): query (L, N, E), key and value
    (S, N, E) ((N, L, E) with batch_first, or unbatched (L, E)); returns (output like
    query, weights) with weights (N, L, S) averaged over heads (or (N, heads, L, S)),
    None when need_weights is False (then the fused scaled_dot_product_attention row
    runs). Masks: bool True = not allowed, floating = added to the scores."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
                 add_zero_attn=False, kdim=None, vdim=None, batch_first=False, device=None,
                 dtype=None):
        super().__init__()
        if add_bias_kv or add_zero_attn:
            raise NotImplementedError("MultiheadAttention: add_bias_kv and add_zero_attn are not "
                                      "supported by dtr")
        if (kdim not in (None, embed_dim)) or (vdim not in (None, embed_dim)):
            raise NotImplementedError("MultiheadAttention: kdim/vdim other than embed_dim are not "
                                      "supported by dtr")
        if num_heads <= 0 or embed_dim % num_heads:
            raise ValueError(f"embed_dim ({embed_dim}) must be divisible by num_heads ({num_heads})")
        self.embed_dim, self.num_heads, self.dropout = embed_dim, num_heads, dropout
        self.head_dim = embed_dim // num_heads
        self.batch_first = batch_first
        self.kdim = self.vdim = embed_dim
        self._qkv_same_embed_dim = True
        self.in_proj_weight = Parameter(init._constant((3 * embed_dim, embed_dim), 0.0, dtype, device))
        if bias:
            self.in_proj_bias = Parameter(init._constant((3 * embed_dim,), 0.0, dtype, device))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(embed_dim, embed_dim, bias, device, dtype)
        # PyTorch's _reset_parameters: xavier_uniform_ in_proj_weight after out_proj exists;
        # the biases zero.
        init.xavier_uniform_(self.in_proj_weight)
        if bias:
            init.zeros_(self.out_proj.bias)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        batched = query.dim() == 3
        if not batched:
            query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        elif self.batch_first:
            query, key, value = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)
        # (L, N, E) from here
        L, N, E = query.shape
        S = key.shape[0]
        if E != self.embed_dim:
            raise ValueError(f"was expecting embedding dimension of {self.embed_dim}, but got {E}")
        if tuple(key.shape) != tuple(value.shape) or key.shape[1] != N:
            raise ValueError(f"key shape {tuple(key.shape)} does not match value shape "
                             f"{tuple(value.shape)} or the batch of the query ({N})")
        h, hd = self.num_heads, self.head_dim
        w, b = self.in_proj_weight, self.in_proj_bias
        parts = []
        for i, x in enumerate((query, key, value)):
            wi = w.narrow(0, i * E, E)
            bi = None if b is None else b.narrow(0, i * E, E)
            # (T, N, E) -> (N, h, T, hd)
            parts.append(_C.linear(x, wi, bi).reshape(x.shape[0], N, h, hd).permute(1, 2, 0, 3))
        q, k, v = parts
        if is_causal and attn_mask is None:
            raise ValueError("MultiheadAttention: is_causal needs attn_mask (the causal mask), as in "
                             "PyTorch")
        mask = _additive_mask(attn_mask, key_padding_mask, N, h, L, S, q.dtype, q.device)
        p = self.dropout if self.training else 0.0
        if need_weights:
            scores = _C.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
            if mask is not None:
                scores = scores + mask
            weights = _C.softmax(scores, -1)
            out = _C.matmul(F.dropout(weights, p, True) if p > 0 else weights, v)
        else:
            out = _C.scaled_dot_product_attention(q, k, v, mask, p, False, None)
            weights = None
        out = out.permute(2, 0, 1, 3).reshape(L, N, E)  # (L, N, E)
        out = self.out_proj(out)
        if weights is not None and average_attn_weights:
            weights = _C.mean(weights, 1, False)
        if not batched:
            out = out.squeeze(1)
            if weights is not None:
                weights = weights.squeeze(0)
        elif self.batch_first:
            out = out.transpose(0, 1)
        return out, weights


def _activation(activation):
    if callable(activation):
        return activation
    if activation == "relu":
        return lambda x: _C.relu(x)  # a Python function: copy.deepcopy keeps it as is
    if activation == "gelu":
        return lambda x: _C.gelu(x, "none")
    raise ValueError(f"activation should be relu/gelu, not {activation}")


class TransformerEncoderLayer(Module):
    """torch.nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward=2048, dropout=0.1,
    activation="relu" (or "gelu", or a callable), layer_norm_eps=1e-5, batch_first=False,
    norm_first=False, bias=True): self-attention then a feed-forward block, each with a
    residual connection and a LayerNorm (after it, or before with norm_first). Children
    in PyTorch's order: self_attn, linear1, dropout, linear2, norm1, norm2, dropout1,
    dropout2. forward(src, src_mask=None, src_key_padding_mask=None, is_causal=False):
    src (S, N, E), (N, S, E) with batch_first, or (S, E) → the same shape."""

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True, device=None,
                 dtype=None):
        super().__init__()
        self.self_attn = MultiheadAttention(d_model, nhead, dropout, bias, batch_first=batch_first,
                                            device=device, dtype=dtype)
        self.linear1 = Linear(d_model, dim_feedforward, bias, device, dtype)
        self.dropout = Dropout(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias, device, dtype)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, layer_norm_eps, bias=bias, device=device, dtype=dtype)
        self.norm2 = LayerNorm(d_model, layer_norm_eps, bias=bias, device=device, dtype=dtype)
        self.dropout1 = Dropout(dropout)
        self.dropout2 = Dropout(dropout)
        self.activation = _activation(activation)

    def _sa_block(self, x, attn_mask, key_padding_mask):
        x = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                           need_weights=False)[0]
        return self.dropout1(x)

    def _ff_block(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask))
            x = self.norm2(x + self._ff_block(x))
        return x


def _clone_module(module):
    """A deep copy of `module` with fresh copies of its parameters and buffers (the
    tensors themselves cannot be pickled, so copy.deepcopy is told what to use)."""
    memo = {}
    for m in module.modules():
        for t in list(m._parameters.values()):
            if t is not None and id(t) not in memo:
                memo[id(t)] = Parameter(t.detach().clone(), t.requires_grad)
        for t in list(m._buffers.values()):
            if t is not None and id(t) not in memo:
                memo[id(t)] = t.detach().clone()
    return copy.deepcopy(module, memo)


class TransformerEncoder(Module):
    """torch.nn.TransformerEncoder(encoder_layer, num_layers, norm=None): `num_layers`
    deep copies of `encoder_layer` (children layers.0, layers.1, ...) applied in turn,
    then `norm` when given. forward(src, mask=None, src_key_padding_mask=None,
    is_causal=None)."""

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True,
                 mask_check=True):
        super().__init__()
        self.layers = ModuleList([_clone_module(encoder_layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        x = src
        for layer in self.layers:
            x = layer(x, src_mask=mask, src_key_padding_mask=src_key_padding_mask)
        if self.norm is not None:
            x = self.norm(x)
        return x

