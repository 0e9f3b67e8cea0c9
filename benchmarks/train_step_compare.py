#!/usr/bin/python3
"""One training step (zero_grad, forward, backward, AdamW step) of the two
models of benchmarks/train_step.cpp, timed in PyTorch and in dtr on the same
machine in one run, with the ratio dtr / PyTorch (lower is better for dtr).

    /usr/bin/python3 benchmarks/train_step_compare.py --dtr build/benchmarks/train_step
        [--threads N] [--iters 20] [--warmup 3]

Both sides use the same thread count: dtr through --threads (and the
OpenMP/OpenBLAS variables), PyTorch through torch.set_num_threads. The
models and shapes must stay identical to train_step.cpp:
  mlp:         batch 128, 784 -> 512 -> 512 -> 10, GELU, cross_entropy
  transformer: 2 pre-LayerNorm blocks, d_model 128, 4 heads, seq 64, batch 8,
               vocab 256, MLP 4*d_model with GELU, learned positions, lm_head
               without bias; causal attention written out (PyTorch 1.13 has no
               F.scaled_dot_product_attention).
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dtr", default=os.path.join("build", "benchmarks", "train_step"),
                    help="path of the train_step program")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--json", help="also write the results here")
    return ap.parse_args()


# The BLAS thread pools (OpenBLAS behind both PyTorch and dtr) read these at
# load time, so they are set before torch is imported.
ARGS = parse_args()
os.environ["OMP_NUM_THREADS"] = str(ARGS.threads)
os.environ["OPENBLAS_NUM_THREADS"] = str(ARGS.threads)

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(784, 512), nn.Linear(512, 512), nn.Linear(512, 10)

    def forward(self, x):
        return self.fc3(F.gelu(self.fc2(F.gelu(self.fc1(x)))))


class CausalSelfAttention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.c_attn, self.c_proj = nn.Linear(d, 3 * d), nn.Linear(d, d)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // self.heads))
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        att = torch.softmax(att.masked_fill(~mask, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln_1, self.attn, self.ln_2 = nn.LayerNorm(d), CausalSelfAttention(d, heads), nn.LayerNorm(d)
        self.c_fc, self.c_proj = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.c_proj(F.gelu(self.c_fc(self.ln_2(x))))


class Transformer(nn.Module):
    def __init__(self, vocab, block_size, d, heads, layers):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(block_size, d)
        self.h = nn.ModuleList([Block(d, heads) for _ in range(layers)])
        self.ln_f, self.lm_head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for b in self.h:
            x = b(x)
        return self.lm_head(self.ln_f(x))


def time_steps(step, warmup, iters):
    loss = None
    for _ in range(warmup):
        loss = step()
    ms = []
    for _ in range(iters):
        t0 = time.perf_counter()
        loss = step()
        ms.append((time.perf_counter() - t0) * 1e3)
    return {"median_ms": statistics.median(ms), "min_ms": min(ms), "loss": loss}


def torch_mlp(warmup, iters):
    torch.manual_seed(0)
    model = Mlp()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = torch.randn(128, 784), torch.randint(0, 10, (128,))

    def step():
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()

    r = time_steps(step, warmup, iters)
    r["parameters"] = sum(p.numel() for p in model.parameters())
    return r


def torch_transformer(warmup, iters):
    B, T, C, V = 8, 64, 128, 256
    torch.manual_seed(0)
    model = Transformer(V, T, C, 4, 2)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    idx, targets = torch.randint(0, V, (B, T)), torch.randint(0, V, (B * T,))

    def step():
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(idx).view(B * T, V), targets)
        loss.backward()
        opt.step()
        return loss.item()

    r = time_steps(step, warmup, iters)
    r["parameters"] = sum(p.numel() for p in model.parameters())
    return r


def main():
    args = ARGS
    proc = subprocess.run([args.dtr, "--threads", str(args.threads), "--iters", str(args.iters),
                           "--warmup", str(args.warmup)], capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit("train_step failed (%d): %s" % (proc.returncode, proc.stderr.strip()))
    dtr = json.loads(proc.stdout)

    torch.set_num_threads(dtr["threads"])
    ours = {"mlp": torch_mlp(args.warmup, args.iters),
            "transformer": torch_transformer(args.warmup, args.iters)}

    print("one training step (forward + backward + AdamW), median of %d after %d warm-up, %d threads"
          % (args.iters, args.warmup, dtr["threads"]))
    print("PyTorch %s" % torch.__version__)
    print("%-12s %12s %14s %14s %10s" % ("model", "parameters", "dtr ms", "PyTorch ms", "dtr/PyTorch"))
    rows = {}
    for name in ("mlp", "transformer"):
        d, t = dtr["models"][name], ours[name]
        if d["parameters"] != t["parameters"]:
            print("warning: %s has %d parameters in dtr, %d in PyTorch" % (name, d["parameters"], t["parameters"]))
        ratio = d["median_ms"] / t["median_ms"]
        rows[name] = {"dtr_ms": d["median_ms"], "torch_ms": t["median_ms"], "ratio": ratio,
                      "parameters": t["parameters"]}
        print("%-12s %12d %14.3f %14.3f %10.2f" % (name, t["parameters"], d["median_ms"], t["median_ms"], ratio))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"threads": dtr["threads"], "iters": args.iters, "rows": rows}, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
