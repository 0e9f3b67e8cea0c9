#!/usr/bin/python3
"""PyTorch versions of the dtr model zoo (benchmarks/models/), measured the
same way as dtr's, each configuration in a fresh process.

Run with PyTorch 2 from build/venv-bench (`./dtr.sh bench-env` installs it;
Debian's python3-torch 1.13 runs plain and checkpoint only):

    build/venv-bench/bin/python benchmarks/pytorch_zoo.py --out benchmarks/results/pytorch.csv \\
        [--models chain,gpt,resnet,unet,lstm] [--modes plain,checkpoint] [--steps 5] [--warmup 2] \\
        [--threads 1] [--dtr build/benchmarks/zoo_step] [--rounds 1]

    build/venv-bench/bin/python benchmarks/pytorch_zoo.py --child MODEL --mode VARIANT \\
        [--steps 5] [--warmup 2] [--threads 1]

Models: chain, gpt, resnet, unet, lstm (the default), llama, unet_gn, moe and
chain_b2048, with the shapes, losses and optimizers of benchmarks/models/zoo.h
and the same parameter counts. Variants (--mode, --modes):

  plain         eager forward and backward, every saved activation kept
  checkpoint    static checkpointing of round(sqrt(N)) segments of the N units
                zoo.h names (layers, blocks, LSTM step groups; the U-Nets'
                five blocks each one unit): torch.utils.checkpoint's
                checkpoint_sequential / checkpoint, use_reentrant=False on
                PyTorch 2
  sac           selective activation checkpointing over the same segments:
                checkpoint(..., use_reentrant=False, context_fn=
                create_selective_checkpoint_contexts(policy)) where the policy
                saves matmul and convolution outputs (aten mm, addmm, bmm,
                baddbmm, convolution: MUST_SAVE) and recomputes everything
                else (PREFER_RECOMPUTE); PyTorch >= 2.4
  compile_<b>   torch.compile (inductor) of the forward and loss, backward
                through AOTAutograd, with
                torch._functorch.config.activation_memory_budget = b in
                [0, 1] (read by the min-cut partitioner, inductor's default
                for training graphs: 1 keeps what it would save anyway, 0
                recomputes all it can); the optimizer step stays eager.
                Compilation happens in the first warm-up step (forward at
                the call, backward at the first backward), so --warmup 1 is
                enough; warmup_wall_ms shows it and recompiled_in_steps says
                whether dynamo compiled again during the measured steps

For every model and mode the driver starts one PyTorch process and, when
--dtr names the zoo_step program and the mode is plain or checkpoint, one dtr
process right after it (--rounds times, alternating), and writes a CSV row
each (columns below; a configuration that failed gets its error column set
and empty figures, and the driver goes on). The child prints one JSON line:

  library, version, model, mode, threads, steps, warmup
  parameters, parameter_bytes   of the model (the same counts as dtr's)
  cpu_ms, wall_ms      every measured step's process CPU time (all
                       threads) and wall time, ms; a step is zero_grad,
                       forward, loss, backward, optimizer step
  warmup_wall_ms       the warm-up steps' wall times (compilation included)
  median_ms, min_ms    of wall_ms
  median_cpu_ms, min_cpu_ms   of cpu_ms: the figure to compare on a machine
                       shared with other work; with --rounds > 1 the driver
                       keeps the round with the smallest median_cpu_ms
  loss                 of the last step
  rss_base_kib         peak resident set size (getrusage ru_maxrss) right
                       after imports and the model, optimizer and inputs
                       were built
  rss_peak_delta_kib   the peak of the whole run (ru_maxrss, the larger of
                       its values before the reset below and at the end)
                       minus rss_base_kib: the memory
                       training adds, measured identically for both
                       libraries (zoo_step prints the same); under compile_<b>
                       it includes compilation's own peak
  rss_steps_peak_delta_kib   the peak of the measured steps alone (VmHWM
                       reset through /proc/self/clear_refs before the first
                       measured step) minus rss_base_kib; null where the
                       kernel refuses the reset. The measure for compile_<b>,
                       where it still counts what compilation left resident
                       (compiled code, graphs: tens of MiB), so compare
                       compile_<b> with compile_1
  rss_before_steps_kib the resident set size (VmRSS) right before the first
                       measured step
  compiled_graphs, recompiled_in_steps   compile_<b> only
  error                only when the configuration failed (exit status 1)

PyTorch has no allocator statistics for CPU tensors, so resident set size is
the memory measure of both libraries (dtr's zoo_step adds peak_bytes, its
storage-byte peak). CSV columns: library, model, mode, threads, steps,
warmup, rounds, median_ms, min_ms, median_cpu_ms, min_cpu_ms, loss,
rss_peak_delta_mib, storage_peak_mib (dtr only), version, parameters,
rss_steps_peak_delta_mib, warmup_ms (the warm-up steps' wall times, ms, joined
with ";"), recompiled_in_steps (1 or 0; compile_<b> only), error.

Inputs and targets are random tensors drawn once from a fixed seed before
the first step, like a data loader's constant batch (the two libraries draw
different numbers). Attention is torch.nn.functional.scaled_dot_product_attention
(is_causal=True: PyTorch's fused CPU kernel, as dtr's fused row) where it
exists (PyTorch >= 2.0), else composed from matmul/masked_fill/softmax; the U-Net's nearest upsampling
from reshape/expand like dtr's. The mixture of experts dispatches sparsely
like dtr's (per expert nonzero over the routing, index_select, index_add), so
torch.compile breaks its graph at each nonzero. PyTorch 1.13's checkpoint is
the reentrant one, which gives no parameter gradients inside a segment whose
inputs do not require grad; there the first segment's data input (and the
LSTM's initial state) is made to require grad, as its documentation advises.
"""

import argparse
import csv
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import time

MODELS = ["chain", "gpt", "resnet", "unet", "lstm", "llama", "unet_gn", "moe", "chain_b2048"]
# Those of the default sweep (zoo.h); the others run by name.
DEFAULT_MODELS = MODELS[:5]



def causal_attention(q, k, v):
    """softmax(q kᵀ / √E, causal) v: PyTorch's fused kernel where it exists."""
    import torch
    if hasattr(torch.nn.functional, "scaled_dot_product_attention"):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    T = q.shape[-2]
    scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
    future = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
    return torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1) @ v

def checkpoint_segments(units):
    return max(1, round(math.sqrt(units)))


# ---------------------------------------------------------------- models (child only)


class Runner:
    """How a forward pass runs its units: plainly, under static checkpointing
    (torch.utils.checkpoint) or under selective activation checkpointing."""

    def __init__(self, mode, torch):
        from torch.utils import checkpoint as ckpt

        self.mode, self.ckpt = mode, ckpt
        self.checkpoints = mode in ("checkpoint", "sac")
        # PyTorch 1.13's default checkpoint is the reentrant one: no parameter
        # gradients inside a segment whose inputs do not require grad.
        self.reentrant = mode == "checkpoint" and torch_major(torch) < 2
        self.kwargs = {} if self.reentrant else {"use_reentrant": False}
        if mode == "sac":
            self.kwargs["context_fn"] = sac_context_fn(torch)

    def input(self, x):
        """x, made to require grad where the reentrant checkpoint needs it."""
        return x.detach().requires_grad_() if self.reentrant and not x.requires_grad else x

    def sequential(self, units, x):
        """Applies `units` in order; checkpointing splits them into
        checkpoint_segments(len(units)) segments like checkpoint_sequential
        (the first segments-1 hold len // segments units, the last the rest
        and runs without checkpointing)."""
        if self.mode == "checkpoint":
            return self.ckpt.checkpoint_sequential(units, checkpoint_segments(len(units)), self.input(x),
                                                   **self.kwargs)
        if self.mode == "sac":
            segments = checkpoint_segments(len(units))
            size, end = len(units) // segments, 0
            for start in range(0, size * (segments - 1), size):
                x = self.unit(lambda t, seg=units[start:start + size]: apply_all(seg, t), x)
                end = start + size
            units = units[end:]
        return apply_all(units, x)

    def unit(self, fn, *args):
        """fn(*args), as one checkpointed unit when checkpointing."""
        return self.ckpt.checkpoint(fn, *args, **self.kwargs) if self.checkpoints else fn(*args)


def apply_all(units, x):
    for unit in units:
        x = unit(x)
    return x


def torch_major(torch):
    return int(torch.__version__.split(".")[0])


def sac_context_fn(torch):
    """context_fn of selective activation checkpointing: matmul and
    convolution outputs are saved (MUST_SAVE), everything else recomputed
    (PREFER_RECOMPUTE). Needs PyTorch 2.4's create_selective_checkpoint_contexts."""
    import functools

    from torch.utils import checkpoint as ckpt

    if not hasattr(ckpt, "create_selective_checkpoint_contexts"):
        raise RuntimeError(f"sac needs torch.utils.checkpoint.create_selective_checkpoint_contexts "
                           f"(PyTorch >= 2.4); this is PyTorch {torch.__version__}")
    aten = torch.ops.aten
    # linear, matmul and conv2d reach the policy decomposed into these.
    saved = {aten.mm.default, aten.addmm.default, aten.bmm.default, aten.baddbmm.default, aten.convolution.default}

    def policy(ctx, op, *args, **kwargs):
        return ckpt.CheckpointPolicy.MUST_SAVE if op in saved else ckpt.CheckpointPolicy.PREFER_RECOMPUTE

    return functools.partial(ckpt.create_selective_checkpoint_contexts, policy)


class Workload:
    """A model with its optimizer and fixed inputs: `loss(run)` is the
    forward and loss of the fixed batch, `run` a Runner."""

    def __init__(self, model, opt, loss):
        self.model, self.opt, self.loss = model, opt, loss


def build(name):
    """The Workload of the model `name`, built from seed 0."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.manual_seed(0)

    class RMSNorm(nn.Module):
        # torch.nn.RMSNorm (PyTorch 2.4) written out, for PyTorch 1.13.
        def __init__(self, dim, eps=1e-5):
            super().__init__()
            self.weight, self.eps = nn.Parameter(torch.ones(dim)), eps

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight

    def unet_logits(model, up2, up1, x, run):
        # The U-Nets' five blocks, each one checkpoint unit when checkpointing.
        e1 = run.unit(model.enc1, run.input(x))
        e2 = run.unit(lambda t: model.enc2(F.max_pool2d(t, 2)), e1)
        b = run.unit(lambda t: model.bottom(F.max_pool2d(t, 2)), e2)
        d2 = run.unit(lambda low, skip: model.dec2(torch.cat([up2(low), skip], 1)), b, e2)
        d1 = run.unit(lambda low, skip: model.dec1(torch.cat([up1(low), skip], 1)), d2, e1)
        return model.head(d1)

    if name in ("chain", "chain_b2048"):
        # 64 x (Linear 512->512, GELU), batch 256 (chain_b2048: 2048), mse_loss; SGD lr 0.01 momentum 0.9
        batch = 2048 if name == "chain_b2048" else 256
        model = nn.ModuleList(nn.Linear(512, 512) for _ in range(64))
        units = [lambda x, lin=lin: F.gelu(lin(x)) for lin in model]
        x, target = torch.randn(batch, 512), torch.randn(batch, 512)
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

        def loss(run):
            return F.mse_loss(run.sequential(units, x), target)

    elif name == "gpt":
        B, T, C, H, V, L, P = 8, 256, 256, 8, 256, 6, 0.1

        class Attention(nn.Module):
            def __init__(self):
                super().__init__()
                self.c_attn = nn.Linear(C, 3 * C)
                self.c_proj = nn.Linear(C, C)

            def forward(self, x):
                q, k, v = (t.reshape(B, T, H, C // H).transpose(1, 2) for t in self.c_attn(x).split(C, dim=2))
                y = causal_attention(q, k, v)
                return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))

        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.ln_1, self.attn, self.ln_2 = nn.LayerNorm(C), Attention(), nn.LayerNorm(C)
                self.c_fc, self.c_proj, self.drop = nn.Linear(C, 4 * C), nn.Linear(4 * C, C), nn.Dropout(P)

            def forward(self, x):
                h = x + self.attn(self.ln_1(x))
                return h + self.drop(self.c_proj(F.gelu(self.c_fc(self.ln_2(h)))))

        class Gpt(nn.Module):
            def __init__(self):
                super().__init__()
                self.wte, self.wpe, self.drop = nn.Embedding(V, C), nn.Embedding(T, C), nn.Dropout(P)
                self.h = nn.ModuleList(Block() for _ in range(L))
                self.ln_f, self.lm_head = nn.LayerNorm(C), nn.Linear(C, V, bias=False)

        model = Gpt()
        opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.01)
        idx, targets, pos = torch.randint(0, V, (B, T)), torch.randint(0, V, (B * T,)), torch.arange(T)
        units = list(model.h)

        def loss(run):
            x = model.drop(model.wte(idx) + model.wpe(pos))
            h = run.sequential(units, x)
            return F.cross_entropy(model.lm_head(model.ln_f(h)).reshape(B * T, V), targets)

    elif name == "resnet":
        # ResNet-20 (16/32/64, BatchNorm, 1x1 projection shortcuts), 1x28x28, batch 64; SGD lr 0.1 momentum 0.9
        def conv3x3(i, o, s):
            return nn.Conv2d(i, o, 3, s, 1, bias=False)

        class BasicBlock(nn.Module):
            def __init__(self, i, o, s):
                super().__init__()
                self.conv1, self.bn1 = conv3x3(i, o, s), nn.BatchNorm2d(o)
                self.conv2, self.bn2 = conv3x3(o, o, 1), nn.BatchNorm2d(o)
                self.proj = None
                if s != 1 or i != o:
                    self.proj, self.proj_bn = nn.Conv2d(i, o, 1, s, 0, bias=False), nn.BatchNorm2d(o)

            def forward(self, x):
                y = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
                return F.relu(y + (self.proj_bn(self.proj(x)) if self.proj is not None else x))

        class ResNet(nn.Module):
            def __init__(self):
                super().__init__()
                self.stem, self.stem_bn = conv3x3(1, 16, 1), nn.BatchNorm2d(16)
                blocks, i = [], 16
                for stage in range(3):
                    o = 16 << stage
                    for b in range(3):
                        blocks.append(BasicBlock(i, o, 2 if stage > 0 and b == 0 else 1))
                        i = o
                self.blocks, self.fc = nn.ModuleList(blocks), nn.Linear(i, 10)

        model = ResNet()
        units = [lambda x: F.relu(model.stem_bn(model.stem(x)))] + list(model.blocks)
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        x, labels = torch.randn(64, 1, 28, 28), torch.randint(0, 10, (64,))

        def loss(run):
            return F.cross_entropy(model.fc(run.sequential(units, x).mean(dim=(2, 3))), labels)

    elif name == "unet":
        # 3-level U-Net (16/32/64, BatchNorm), 3x64x64, batch 16, 4 classes per pixel; SGD lr 0.01 momentum 0.9
        class ConvBlock(nn.Module):
            def __init__(self, i, o):
                super().__init__()
                self.conv1, self.bn1 = nn.Conv2d(i, o, 3, 1, 1, bias=False), nn.BatchNorm2d(o)
                self.conv2, self.bn2 = nn.Conv2d(o, o, 3, 1, 1, bias=False), nn.BatchNorm2d(o)

            def forward(self, x):
                return F.relu(self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x))))))

        class UNet(nn.Module):
            def __init__(self):
                super().__init__()
                self.enc1, self.enc2, self.bottom = ConvBlock(3, 16), ConvBlock(16, 32), ConvBlock(32, 64)
                self.dec2, self.dec1 = ConvBlock(64 + 32, 32), ConvBlock(32 + 16, 16)
                self.head = nn.Conv2d(16, 4, 1)

        def upsample2x(x):
            N, C, H, W = x.shape
            return x.reshape(N, C, H, 1, W, 1).expand(N, C, H, 2, W, 2).reshape(N, C, 2 * H, 2 * W)

        model = UNet()
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        x, target = torch.randn(16, 3, 64, 64), torch.randint(0, 4, (16, 64, 64))

        def loss(run):
            return F.cross_entropy(unet_logits(model, upsample2x, upsample2x, x, run), target)

    elif name == "lstm":
        # LSTM cell equations unrolled over 128 steps, input 256, hidden 256, batch 32; AdamW lr 1e-3
        T, B, I, H = 128, 32, 256, 256

        class Lstm(nn.Module):
            def __init__(self):
                super().__init__()
                k = 1.0 / math.sqrt(H)
                self.weight_ih = nn.Parameter(torch.empty(4 * H, I).uniform_(-k, k))
                self.weight_hh = nn.Parameter(torch.empty(4 * H, H).uniform_(-k, k))
                self.bias_ih = nn.Parameter(torch.empty(4 * H).uniform_(-k, k))
                self.bias_hh = nn.Parameter(torch.empty(4 * H).uniform_(-k, k))

            def cell(self, x, h, c):
                gates = F.linear(x, self.weight_ih, self.bias_ih) + F.linear(h, self.weight_hh, self.bias_hh)
                i, f, g, o = gates.chunk(4, 1)
                c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
                return torch.sigmoid(o) * torch.tanh(c), c

        model = Lstm()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
        x, target = torch.randn(T, B, I), torch.randn(T, B, H)
        groups = checkpoint_segments(T)
        per_group = (T + groups - 1) // groups

        def loss(run):
            h, c = run.input(torch.zeros(B, H)), run.input(torch.zeros(B, H))
            total = None
            for t0 in range(0, T, per_group):
                t1 = min(T, t0 + per_group)

                def group(hh, cc, t0=t0, t1=t1):
                    outputs = []
                    for t in range(t0, t1):
                        hh, cc = model.cell(x[t], hh, cc)
                        outputs.append(hh)
                    return hh, cc, F.mse_loss(torch.stack(outputs), target[t0:t1], reduction="sum")

                h, c, err = run.unit(group, h, c)
                total = err if total is None else total + err
            return total / (T * B * H)

    elif name == "llama":
        # 4 pre-RMSNorm blocks, d 128, 8 heads / 2 kv heads, RoPE, SwiGLU 352, seq 128, batch 8; AdamW lr 1e-3
        B, T, C, H, KV, HID, V, L = 8, 128, 128, 8, 2, 352, 256, 4
        HD = C // H

        def rotate_half(x):
            return torch.cat([-x[..., HD // 2:], x[..., :HD // 2]], -1)

        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.attention_norm, self.ffn_norm = RMSNorm(C), RMSNorm(C)
                self.wq, self.wk = nn.Linear(C, H * HD, bias=False), nn.Linear(C, KV * HD, bias=False)
                self.wv, self.wo = nn.Linear(C, KV * HD, bias=False), nn.Linear(H * HD, C, bias=False)
                self.w1, self.w2 = nn.Linear(C, HID, bias=False), nn.Linear(HID, C, bias=False)
                self.w3 = nn.Linear(C, HID, bias=False)

            def forward(self, x, cos, sin):
                n1 = self.attention_norm(x)
                q, k, v = (t.reshape(B, T, -1, HD).transpose(1, 2) for t in (self.wq(n1), self.wk(n1), self.wv(n1)))
                q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
                k, v = k.repeat_interleave(H // KV, 1), v.repeat_interleave(H // KV, 1)
                y = causal_attention(q, k, v)
                h = x + self.wo(y.transpose(1, 2).reshape(B, T, C))
                n2 = self.ffn_norm(h)
                return h + self.w2(F.silu(self.w1(n2)) * self.w3(n2))

        class Llama(nn.Module):
            def __init__(self):
                super().__init__()
                self.tok_embeddings = nn.Embedding(V, C)
                self.layers = nn.ModuleList(Block() for _ in range(L))
                self.norm, self.output = RMSNorm(C), nn.Linear(C, V, bias=False)

        model = Llama()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
        idx, targets, pos = torch.randint(0, V, (B, T)), torch.randint(0, V, (B * T,)), torch.arange(T).float()

        def loss(run):
            inv_freq = torch.exp(torch.arange(0, HD, 2).float() * (-math.log(10000.0) / HD))
            angles = pos[:, None] * inv_freq[None, :]
            emb = torch.cat([angles, angles], -1)
            cos, sin = emb.cos(), emb.sin()
            units = [lambda x, blk=blk: blk(x, cos, sin) for blk in model.layers]
            h = run.sequential(units, model.tok_embeddings(idx))
            return F.cross_entropy(model.output(model.norm(h)).reshape(B * T, V), targets)

    elif name == "unet_gn":
        # 3-level U-Net (16/32/64, GroupNorm(4), SiLU, ConvTranspose2d up), 3x32x32, batch 8; SGD lr 0.01 momentum 0.9
        class GnBlock(nn.Module):
            def __init__(self, i, o):
                super().__init__()
                self.conv1, self.gn1 = nn.Conv2d(i, o, 3, 1, 1, bias=False), nn.GroupNorm(4, o)
                self.conv2, self.gn2 = nn.Conv2d(o, o, 3, 1, 1, bias=False), nn.GroupNorm(4, o)

            def forward(self, x):
                return F.silu(self.gn2(self.conv2(F.silu(self.gn1(self.conv1(x))))))

        class UNetGn(nn.Module):
            def __init__(self):
                super().__init__()
                self.enc1, self.enc2, self.bottom = GnBlock(3, 16), GnBlock(16, 32), GnBlock(32, 64)
                self.up2, self.dec2 = nn.ConvTranspose2d(64, 32, 2, 2), GnBlock(64, 32)
                self.up1, self.dec1 = nn.ConvTranspose2d(32, 16, 2, 2), GnBlock(32, 16)
                self.head = nn.Conv2d(16, 4, 1)

        model = UNetGn()
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
        x, target = torch.randn(8, 3, 32, 32), torch.randint(0, 4, (8, 32, 32))

        def loss(run):
            return F.cross_entropy(unet_logits(model, model.up2, model.up1, x, run), target)

    elif name == "moe":
        # top-2 of 8 experts (64->128->64, SiLU), 4 pre-RMSNorm layers, 2048 tokens, sparse dispatch,
        # Switch load-balancing loss at 0.01, mse_loss; AdamW lr 1e-3
        N, C, HID, E, K, L, AUX = 2048, 64, 128, 8, 2, 4, 0.01

        class MoeLayer(nn.Module):
            def __init__(self):
                super().__init__()
                self.norm, self.router = RMSNorm(C), nn.Linear(C, E, bias=False)
                self.experts = nn.ModuleList(nn.Sequential(nn.Linear(C, HID), nn.SiLU(), nn.Linear(HID, C))
                                             for _ in range(E))

            def forward(self, x):
                n = self.norm(x)
                probs = torch.softmax(self.router(n), -1)
                top, expert = probs.topk(K, -1)
                gates, routed = (top / top.sum(-1, keepdim=True)).reshape(-1), expert.reshape(-1)
                out = torch.zeros_like(x)
                for e, mlp in enumerate(self.experts):
                    slots = (routed == e).nonzero(as_tuple=True)[0]  # in token order
                    if slots.numel() == 0:
                        continue
                    tokens = torch.div(slots, K, rounding_mode="floor")
                    y = mlp(n.index_select(0, tokens)) * gates.index_select(0, slots).unsqueeze(1)
                    out = out.index_add(0, tokens, y)
                share = F.one_hot(routed, E).sum(0).float() / routed.numel()
                return x + out, (share * probs.mean(0)).sum() * E

        class Moe(nn.Module):
            def __init__(self):
                super().__init__()
                self.layers, self.norm = nn.ModuleList(MoeLayer() for _ in range(L)), RMSNorm(C)

        model = Moe()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
        x, target = torch.randn(N, C), torch.randn(N, C)

        def loss(run):
            def segment(begin, end):
                def run(h, aux):
                    for layer in model.layers[begin:end]:
                        h, layer_aux = layer(h)
                        aux = aux + layer_aux
                    return h, aux
                return run

            per = -(-L // checkpoint_segments(L)) if run.checkpoints else L
            h, aux = run.input(x), torch.zeros(())
            for begin in range(0, L, per):
                h, aux = run.unit(segment(begin, min(L, begin + per)), h, aux)
            return F.mse_loss(model.norm(h), target) + aux * AUX

    else:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(MODELS)}")

    return Workload(model, opt, loss)


def compile_budget(mode):
    """b of a mode "compile_<b>" (0 <= b <= 1), else None."""
    if not mode.startswith("compile_"):
        return None
    try:
        b = float(mode[len("compile_"):])
    except ValueError:
        b = math.nan
    if not 0.0 <= b <= 1.0:
        raise ValueError(f"mode {mode!r}: compile_<b> needs a budget b in [0, 1]")
    return b


def check_mode(mode):
    """ValueError naming the known modes unless `mode` is one."""
    if mode.startswith("compile_"):
        compile_budget(mode)
    elif mode not in ("plain", "checkpoint", "sac"):
        raise ValueError(f"unknown mode {mode!r}; known: plain, checkpoint, sac, compile_<b> (0 <= b <= 1)")


def make_step(torch, work, mode):
    """The training step of `work` under `mode`: zero_grad, forward and loss
    (compiled for compile_<b>), backward, optimizer step; returns the loss."""
    budget = compile_budget(mode)
    if budget is None:
        run = Runner(mode, torch)

        def forward():
            return work.loss(run)
    else:
        if torch_major(torch) < 2:
            raise RuntimeError(f"{mode} needs torch.compile (PyTorch >= 2); this is PyTorch {torch.__version__}")
        import torch._functorch.config as functorch_config

        # Read by the min-cut partitioner (AOTAutograd's default under
        # inductor) when it splits the joint graph into forward and backward.
        functorch_config.activation_memory_budget = budget
        plain = Runner("plain", torch)
        forward = torch.compile(lambda: work.loss(plain))

    def step():
        work.opt.zero_grad(set_to_none=True)
        value = forward()
        value.backward()
        work.opt.step()
        return value.item()

    return step


def compiled_graphs(torch):
    """Graphs dynamo has compiled in this process so far (None before PyTorch 2)."""
    try:
        from torch._dynamo.utils import counters
    except ImportError:
        return None
    return int(counters["stats"]["unique_graphs"])


def reset_peak_rss():
    """Resets VmHWM (the peak resident set size) to the current RSS (Linux
    4.0+: 5 written to /proc/self/clear_refs); False where refused."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def status_kib(key):
    """Field `key` of /proc/self/status (VmHWM, VmRSS) in KiB, or None."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def child(args):
    """One configuration in this process; prints one JSON line. Exits 1
    (the JSON then carries "error") when the model fails to build or train."""
    import torch

    torch.set_num_threads(args.threads)
    out = {"library": "pytorch", "version": torch.__version__, "model": args.child, "mode": args.mode,
           "device": args.device, "threads": torch.get_num_threads(), "steps": args.steps, "warmup": args.warmup}
    try:
        check_mode(args.mode)
        if args.device != "cpu":
            # Every factory call of build() (weights, inputs) lands on the device;
            # step() ends in .item(), which waits for the device.
            torch.set_default_device(args.device)
        work = build(args.child)
        step = make_step(torch, work, args.mode)
        params = list(work.model.parameters())
        out["parameters"] = sum(p.numel() for p in params)
        out["parameter_bytes"] = sum(p.numel() * p.element_size() for p in params)
        rss_base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        warm = []
        for _ in range(args.warmup):
            start = time.perf_counter()
            step()
            warm.append((time.perf_counter() - start) * 1e3)
        graphs_warm = compiled_graphs(torch)
        # The reset lowers ru_maxrss too: keep the peak of the warm-up.
        warmup_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        peak_reset = reset_peak_rss()
        rss_before = status_kib("VmRSS")
        wall, cpu, loss = [], [], math.nan
        for _ in range(args.steps):
            start, cpu_start = time.perf_counter(), time.process_time()
            loss = step()
            cpu.append((time.process_time() - cpu_start) * 1e3)
            wall.append((time.perf_counter() - start) * 1e3)
        steps_peak = status_kib("VmHWM")
        run_peak = max(warmup_peak, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
        graphs = compiled_graphs(torch)
    except Exception as e:  # noqa: BLE001 - reported in the JSON, exit status 1
        out["error"] = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
        print(json.dumps(out))
        print(f"pytorch_zoo: {args.child} {args.mode} failed: {out['error']}", file=sys.stderr)
        sys.exit(1)
    out.update({
        "cpu_ms": [round(v, 3) for v in cpu], "wall_ms": [round(v, 3) for v in wall],
        "warmup_wall_ms": [round(v, 3) for v in warm],
        "median_ms": statistics.median(wall), "min_ms": min(wall), "median_cpu_ms": statistics.median(cpu),
        "min_cpu_ms": min(cpu), "loss": loss, "rss_base_kib": rss_base,
        "rss_peak_delta_kib": run_peak - rss_base,
        "rss_steps_peak_delta_kib": steps_peak - rss_base if peak_reset and steps_peak is not None else None,
        "rss_before_steps_kib": rss_before,
    })
    if compile_budget(args.mode) is not None:
        out["compiled_graphs"] = graphs
        out["recompiled_in_steps"] = graphs != graphs_warm
    print(json.dumps(out))


# ---------------------------------------------------------------- driver


DTR_MODES = ("plain", "checkpoint")  # those zoo_step has
CSV_FIELDS = ["library", "model", "mode", "threads", "steps", "warmup", "rounds", "median_ms", "min_ms",
              "median_cpu_ms", "min_cpu_ms", "loss", "rss_peak_delta_mib", "storage_peak_mib", "version",
              "parameters", "rss_steps_peak_delta_mib", "warmup_ms", "recompiled_in_steps", "error"]


def run_json(cmd, env):
    """The JSON line `cmd` prints. A child that failed with an "error" field
    in its JSON gives that JSON; any other failure raises RuntimeError."""
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    lines = proc.stdout.strip().splitlines()
    result = None
    if lines:
        try:
            result = json.loads(lines[-1])
        except json.JSONDecodeError:
            pass
    if proc.returncode != 0 and (result is None or "error" not in result):
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr}")
    if result is None:
        raise RuntimeError(f"{' '.join(cmd)} printed no JSON line:\n{proc.stdout}{proc.stderr}")
    return result


def csv_row(r, model, mode, warmup, rounds):
    def ms(key):
        return f"{r[key]:.3f}" if key in r else ""

    def mib(key):
        return f"{r[key] / 1024:.1f}" if r.get(key) is not None else ""

    return {
        "library": r["library"], "model": model, "mode": mode, "threads": r["threads"], "steps": r["steps"],
        "warmup": warmup, "rounds": rounds, "median_ms": ms("median_ms"), "min_ms": ms("min_ms"),
        "median_cpu_ms": ms("median_cpu_ms"), "min_cpu_ms": ms("min_cpu_ms"),
        "loss": f"{r['loss']:.6f}" if "loss" in r else "", "rss_peak_delta_mib": mib("rss_peak_delta_kib"),
        "storage_peak_mib": f"{r['peak_bytes'] / 2**20:.1f}" if "peak_bytes" in r else "",
        "version": r.get("version", ""), "parameters": r.get("parameters", ""),
        "rss_steps_peak_delta_mib": mib("rss_steps_peak_delta_kib"),
        "warmup_ms": ";".join(f"{v:.0f}" for v in r.get("warmup_wall_ms", [])),
        "recompiled_in_steps": {True: "1", False: "0"}.get(r.get("recompiled_in_steps"), ""),
        "error": r.get("error", ""),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="CSV to write (required unless --child)")
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS),
                        help=f"comma-separated, of: {', '.join(MODELS)}")
    parser.add_argument("--modes", default="plain,checkpoint",
                        help="comma-separated, of: plain, checkpoint, sac, compile_<b> (dtr runs plain and checkpoint)")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--dtr", help="path of dtr's zoo_step program, to measure dtr the same way")
    parser.add_argument("--rounds", type=int, default=1, help="runs of each configuration, alternating libraries")
    parser.add_argument("--child", metavar="MODEL", help="run MODEL in this process and print one JSON line")
    parser.add_argument("--mode", default="plain", help="with --child: the variant (as in --modes)")
    parser.add_argument("--device", default="cpu",
                        help="with --child: where the model and its inputs are made (cpu, cuda; "
                             "torch.set_default_device, PyTorch >= 2)")
    args = parser.parse_args()
    if args.steps < 1 or args.warmup < 0 or args.threads < 1 or args.rounds < 1:
        parser.error("--steps >= 1, --warmup >= 0, --threads >= 1 and --rounds >= 1 are required")
    if args.child:
        child(args)
        return
    if not args.out:
        parser.error("--out is required")
    models = [m for m in args.models.split(",") if m]
    modes = [m for m in args.modes.split(",") if m]
    for m in models:
        if m not in MODELS:
            parser.error(f"unknown model {m!r}; known: {', '.join(MODELS)}")
    for m in modes:
        try:
            check_mode(m)
        except ValueError as e:
            parser.error(str(e))
    if args.dtr and not os.access(args.dtr, os.X_OK):
        parser.error(f"--dtr {args.dtr}: not an executable")

    # Thread counts are fixed before either library starts (OpenBLAS and
    # OpenMP read them at load time).
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), OPENBLAS_NUM_THREADS=str(args.threads),
               MKL_NUM_THREADS=str(args.threads))
    common = ["--steps", str(args.steps), "--warmup", str(args.warmup), "--threads", str(args.threads)]
    failures = 0
    with open(args.out, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        writer.writeheader()
        for model in models:
            for mode in modes:
                commands = [[sys.executable, os.path.abspath(__file__), "--child", model, "--mode", mode] + common]
                if args.dtr and mode in DTR_MODES:
                    commands.append([args.dtr, "--model", model, "--mode", mode] + common)
                best = [None] * len(commands)
                for _ in range(args.rounds):
                    for i, cmd in enumerate(commands):
                        r = run_json(cmd, env)
                        if best[i] is None or "error" in best[i] or (
                                "error" not in r and r["median_cpu_ms"] < best[i]["median_cpu_ms"]):
                            best[i] = r
                for r in best:
                    row = csv_row(r, model, mode, args.warmup, args.rounds)
                    writer.writerow(row)
                    f.flush()
                    if row["error"]:
                        failures += 1
                        print(f"{row['library']:8s} {model:7s} {mode:12s} failed: {row['error']}", file=sys.stderr)
                        continue
                    print(f"{row['library']:8s} {model:7s} {mode:12s} {row['median_ms']:>10s} ms "
                          f"(cpu {row['median_cpu_ms']:>10s})  "
                          f"RSS +{row['rss_peak_delta_mib']} MiB  storage {row['storage_peak_mib'] or '-'} MiB",
                          file=sys.stderr)
    if failures:
        # Recorded, not fatal: the other configurations still compare.
        print(f"pytorch_zoo: warning: {failures} configuration(s) failed; see the error column of {args.out}",
              file=sys.stderr)


if __name__ == "__main__":
    main()
