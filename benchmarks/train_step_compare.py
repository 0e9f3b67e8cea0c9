#!/usr/bin/python3
"""One training step (zero_grad, forward, backward, AdamW step) of the two
models of benchmarks/train_step.cpp, timed in PyTorch and in dtr on the same
machine in one run, with the ratio dtr / PyTorch (lower is better for dtr).

    /usr/bin/python3 benchmarks/train_step_compare.py --dtr build/benchmarks/train_step
        [--threads N] [--iters 20] [--warmup 3] [--rounds 1]

With --rounds R the two run alternately R times and each figure is the
median of the R per-round medians (steadier on a shared machine). Besides
wall time, the CPU time of the process per step is reported: on a loaded
machine it does not count time spent waiting for a core. OMP_WAIT_POLICY
is passed through unchanged and printed (PyTorch's OpenMP threads busy-wait
by default, which costs it dearly when the cores are shared).

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
    ap.add_argument("--rounds", type=int, default=1, help="alternate dtr and PyTorch this many times")
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
    ms, cpu_ms = [], []
    for _ in range(iters):
        c0 = time.process_time()
        t0 = time.perf_counter()
        loss = step()
        ms.append((time.perf_counter() - t0) * 1e3)
        cpu_ms.append((time.process_time() - c0) * 1e3)
    return {"median_ms": statistics.median(ms), "min_ms": min(ms),
            "cpu_median_ms": statistics.median(cpu_ms), "loss": loss}


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


def run_dtr(args):
    proc = subprocess.run([args.dtr, "--threads", str(args.threads), "--iters", str(args.iters),
                           "--warmup", str(args.warmup)], capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit("train_step failed (%d): %s" % (proc.returncode, proc.stderr.strip()))
    return json.loads(proc.stdout)


KEYS = ("median_ms", "min_ms", "cpu_median_ms")


def main():
    args = ARGS
    torch.set_num_threads(args.threads)
    rounds = {"dtr": {"mlp": [], "transformer": []}, "torch": {"mlp": [], "transformer": []}}
    parameters = {}
    threads = args.threads
    for _ in range(max(1, args.rounds)):
        dtr = run_dtr(args)
        threads = dtr["threads"]
        for name in ("mlp", "transformer"):
            rounds["dtr"][name].append(dtr["models"][name])
        torch_runs = {"mlp": torch_mlp, "transformer": torch_transformer}
        for name, fn in torch_runs.items():
            r = fn(args.warmup, args.iters)
            rounds["torch"][name].append(r)
            parameters[name] = (dtr["models"][name]["parameters"], r["parameters"])

    def summary(runs):
        return {k: statistics.median(r[k] for r in runs) if k != "min_ms" else min(r[k] for r in runs)
                for k in KEYS}

    print("one training step (forward + backward + AdamW), median of %d steps after %d warm-up, "
          "%d threads, %d round(s), OMP_WAIT_POLICY=%s"
          % (args.iters, args.warmup, threads, max(1, args.rounds), os.environ.get("OMP_WAIT_POLICY", "unset")))
    print("PyTorch %s" % torch.__version__)
    print("%-12s %10s %10s %8s %10s %10s %8s %10s %10s" % (
        "model", "dtr ms", "torch ms", "ratio", "dtr cpu", "torch cpu", "ratio", "dtr min", "torch min"))
    rows = {}
    for name in ("mlp", "transformer"):
        d, t = summary(rounds["dtr"][name]), summary(rounds["torch"][name])
        if parameters[name][0] != parameters[name][1]:
            print("warning: %s has %d parameters in dtr, %d in PyTorch" % (name, *parameters[name]))
        ratio = d["median_ms"] / t["median_ms"]
        cpu_ratio = d["cpu_median_ms"] / t["cpu_median_ms"]
        rows[name] = {"dtr_ms": d["median_ms"], "torch_ms": t["median_ms"], "ratio": ratio,
                      "dtr_cpu_ms": d["cpu_median_ms"], "torch_cpu_ms": t["cpu_median_ms"],
                      "cpu_ratio": cpu_ratio, "dtr_min_ms": d["min_ms"], "torch_min_ms": t["min_ms"],
                      "parameters": parameters[name][1]}
        print("%-12s %10.3f %10.3f %8.2f %10.3f %10.3f %8.2f %10.3f %10.3f" % (
            name, d["median_ms"], t["median_ms"], ratio, d["cpu_median_ms"], t["cpu_median_ms"], cpu_ratio,
            d["min_ms"], t["min_ms"]))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"threads": threads, "iters": args.iters, "rounds": max(1, args.rounds),
                       "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"), "rows": rows}, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
