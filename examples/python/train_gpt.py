#!/usr/bin/env python3
"""Trains a byte-level GPT on real English text under a memory budget: the model,
data, initialization, optimizer, schedule and clipping of examples/train_gpt.cpp,
written against the Python package `dtr`. For the same flags and seed it prints the
same losses as the C++ program, bitwise (the same ops run in the same order, and
the parameters are drawn from dtr's generator in the same order).

    PYTHONPATH=build/python python3 examples/python/train_gpt.py --budget-fraction 0.5
    ... --help
"""
import argparse
import math
import os
import sys
import time

import numpy as np

import dtr
import dtr.nn as nn
import dtr.nn.functional as F
from dtr.nn import init

PROGRAM = "train_gpt.py"
DEFAULT_DATA = "/usr/share/games/fortunes"
VOCAB = 256  # bytes


# ---- data ------------------------------------------------------------------------------

def load_text(path):
    """The bytes of `path`: the file itself, or every plain text file of a folder in name
    order (symlinks, sub-folders and the fortune index files *.dat and *.u8 skipped)."""
    if not os.path.exists(path):
        if path == DEFAULT_DATA:
            raise SystemExit(f"{PROGRAM}: no text at {DEFAULT_DATA}: install Debian's 'fortunes' "
                             "package (sudo apt-get install fortunes) or pass --data FILE_OR_DIR")
        raise SystemExit(f"{PROGRAM}: --data {path}: no such file or directory")
    if not os.path.isdir(path):
        with open(path, "rb") as f:
            return f.read()
    names = sorted(e.name for e in os.scandir(path)
                   if not e.is_symlink() and e.is_file(follow_symlinks=False)
                   and os.path.splitext(e.name)[1] not in (".dat", ".u8"))
    if not names:
        raise SystemExit(f"{PROGRAM}: --data {path}: no text files in this folder")
    text = bytearray()
    for name in sorted(os.fsencode(n) for n in names):
        with open(os.path.join(os.fsencode(path), name), "rb") as f:
            text += f.read()
    return bytes(text)


def make_batch(split, offsets, T):
    """Inputs x and targets y (x shifted by one byte), both int64 (B, T)."""
    idx = np.asarray(offsets, dtype=np.int64)[:, None] + np.arange(T, dtype=np.int64)
    return dtr.tensor(split[idx].astype(np.int64)), dtr.tensor(split[idx + 1].astype(np.int64))


def sample_batch(split, B, T):
    """B windows at offsets drawn from dtr's generator."""
    offsets = dtr.randint(0, len(split) - T, (B,))
    return make_batch(split, offsets.tolist(), T)


# ---- model -----------------------------------------------------------------------------

class Mlp(nn.Module):
    def __init__(self, n_embd, dropout):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.c_proj = nn.Linear(4 * n_embd, n_embd)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(F.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, n_embd, n_head, dropout, attn_dropout):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = nn.CausalSelfAttention(n_embd, n_head, attn_dropout)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = Mlp(n_embd, dropout)

    def forward(self, x):
        h = x + self.attn(self.ln_1(x))
        return h + self.mlp(self.ln_2(h))


class Gpt(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.block_size = c.seq_len
        self.wte = nn.Embedding(VOCAB, c.n_embd)
        self.wpe = nn.Embedding(c.seq_len, c.n_embd)
        self.drop = nn.Dropout(c.dropout)
        self.h = nn.Sequential(*[Block(c.n_embd, c.n_head, c.dropout, c.attn_dropout)
                                 for _ in range(c.n_layer)])
        self.ln_f = nn.LayerNorm(c.n_embd)
        self.lm_head = nn.Linear(c.n_embd, VOCAB, bias=False)
        self._init_gpt2(c.n_layer)

    def forward(self, idx):
        """idx int64 (B, T) with T <= block_size → logits float32 (B, T, 256)."""
        pos = dtr.arange(idx.size(1))
        x = self.drop(self.wte(idx) + self.wpe(pos))
        return self.lm_head(self.ln_f(self.h(x)))

    @dtr.no_grad()
    def _init_gpt2(self, n_layer):
        # GPT-2's initialization: weights N(0, 0.02), the projections into the residual
        # stream N(0, 0.02/sqrt(2·n_layer)), biases zero, LayerNorms left as they are.
        for name, p in self.named_parameters():
            if "ln_" in name:
                continue
            if name.endswith(".bias"):
                p.zero_()
            elif name.endswith("c_proj.weight"):
                p.copy_(init._normal(p.shape, 0.0, 0.02 / math.sqrt(2.0 * n_layer)))
            else:
                p.copy_(init._normal(p.shape, 0.0, 0.02))


def loss_of(model, batch):
    x, y = batch
    logits = model(x)  # (B, T, V)
    n = x.numel()
    return F.cross_entropy(logits.reshape(n, VOCAB), y.reshape(n))


# ---- training --------------------------------------------------------------------------

def lr_at(c, step):
    """Linear warm-up over c.warmup steps, then cosine decay to lr/10 at c.steps."""
    min_lr = c.lr / 10
    if step <= c.warmup:
        return c.lr * step / c.warmup
    if c.steps <= c.warmup:
        return c.lr
    progress = (step - c.warmup) / (c.steps - c.warmup)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0))) * (c.lr - min_lr)


def build(c):
    """A fresh model and optimizer from the seed: the same weights every time."""
    dtr.manual_seed(c.seed)
    model = Gpt(c)
    opt = dtr.optim.AdamW(model.parameters(), lr=c.lr, betas=(0.9, 0.95),
                          weight_decay=c.weight_decay)
    return model, opt


def train_step(c, model, opt, train, step):
    opt.param_groups[0]["lr"] = lr_at(c, step)
    batch = sample_batch(train, c.batch_size, c.seq_len)
    loss = loss_of(model, batch)
    value = loss.item()
    loss.backward()
    nn.utils.clip_grad_norm_(opt.param_groups[0]["params"], c.grad_clip)
    opt.step()
    opt.zero_grad()  # the gradients' memory is free for evaluation
    return value


@dtr.no_grad()
def evaluate(c, model, split):
    """Mean loss over fixed windows spread evenly over the split (no randomness)."""
    model.eval()
    windows = c.eval_batches * c.batch_size
    span = len(split) - c.seq_len - 1
    total = 0.0
    for i in range(c.eval_batches):
        offsets = [span * (i * c.batch_size + j) // (windows - 1) if windows > 1 else 0
                   for j in range(c.batch_size)]
        total += loss_of(model, make_batch(split, offsets, c.seq_len)).item()
    model.train()
    return total / c.eval_batches


@dtr.no_grad()
def generate(c, model, n):
    """n bytes continuing a newline, drawn from softmax(logits / temperature)."""
    model.eval()
    dtr.manual_seed(c.seed)
    context = [ord("\n")]
    out = []
    for _ in range(n):
        T = min(len(context), c.seq_len)
        logits = model(dtr.tensor([context[-T:]]))
        last = logits.select(1, T - 1).select(0, 0)
        probs = dtr.softmax(last / c.temperature, 0).numpy()
        u = dtr.rand(1).to(dtr.float32).item()
        nxt, cumulative = VOCAB - 1, np.float32(0)
        for v in range(VOCAB):
            cumulative = np.float32(cumulative + probs[v])
            if np.float32(u) < cumulative:
                nxt = v
                break
        context.append(nxt)
        ch = chr(nxt)
        out.append(ch if ch in "\n\t" or 32 <= nxt < 127 else "?")
    model.train()
    return "".join(out)


def mib(b):
    return f"{b / (1024.0 * 1024.0):.1f} MiB"


def memory_columns(now, since, seconds):
    share = 100.0 * (now["recompute_seconds_measured"] - since["recompute_seconds_measured"]) / seconds \
        if seconds > 0 else 0.0
    budget = mib(now["budget_bytes"]) if now["budget_bytes"] >= 0 else "none"
    return (f"resident {mib(now['resident_bytes'])} | peak {mib(now['peak_bytes'])} | budget {budget} "
            f"| evictions {now['evictions'] - since['evictions']} "
            f"| remats {now['rematerializations'] - since['rematerializations']} "
            f"| recompute {share:.0f}%")


class StepStats:
    """The runtime's counters step by step (reset before each step), summed here."""
    SUMMED = ("evictions", "eager_frees", "rematerializations", "recomputed_ops",
              "recomputed_flops", "recompute_seconds_estimated", "recompute_seconds_measured")

    def __init__(self):
        dtr.memory.reset_stats()
        self.totals = {k: 0 for k in self.SUMMED}
        self.totals["peak_bytes"] = 0

    def begin_step(self):
        self.totals = self.total()
        dtr.memory.reset_stats()

    def total(self):
        s = dtr.memory.stats()
        out = dict(s)
        for k in self.SUMMED:
            out[k] = self.totals[k] + s[k]
        out["peak_bytes"] = max(self.totals["peak_bytes"], s["peak_bytes"])
        return out


def parse_flags(argv):
    p = argparse.ArgumentParser(prog=PROGRAM, description=(
        "trains a byte-level GPT on text (by default the fortunes of Debian's 'fortunes' package) "
        "under an optional memory budget, then prints a sample of its text"))
    a = p.add_argument
    a("--data", default=DEFAULT_DATA, help="text file, or folder of text files, to train on")
    a("--steps", type=int, default=900, help="optimizer steps of the schedule")
    a("--batch-size", type=int, default=32, help="sequences per step")
    a("--seq-len", type=int, default=64, help="bytes per sequence (the context length)")
    a("--layers", "--n-layer", dest="n_layer", type=int, default=4, help="transformer blocks")
    a("--n-embd", "--width", dest="n_embd", type=int, default=64, help="width of the residual stream")
    a("--heads", "--n-head", dest="n_head", type=int, default=4, help="attention heads")
    a("--dropout", type=float, default=0.1, help="dropout after the embeddings and in the MLPs")
    a("--attn-dropout", type=float, default=0.0, help="dropout of the attention weights and output")
    a("--lr", type=float, default=4e-3, help="peak learning rate (cosine decay to lr/10)")
    a("--warmup", type=int, default=30, help="linear warm-up steps")
    a("--weight-decay", type=float, default=0.1, help="AdamW weight decay")
    a("--grad-clip", type=float, default=1.0, help="clip gradients to this global norm (0: off)")
    a("--seed", type=int, default=1337, help="seed of weights, batches, dropout and the sample")
    a("--threads", type=int, default=1, help="kernel threads (0: all cores)")
    a("--log-interval", type=int, default=50, help="steps between log lines")
    a("--eval-interval", type=int, default=100, help="steps between validation losses")
    a("--eval-batches", type=int, default=8, help="batches per validation loss")
    a("--sample-bytes", type=int, default=300, help="bytes of text to generate at the end (0: none)")
    a("--temperature", type=float, default=0.8, help="sampling temperature of the generated text")
    a("--budget-fraction", type=float, default=None,
      help="train under this fraction of the measured peak of an unbudgeted step (e.g. 0.5)")
    c = p.parse_args(argv)
    checks = [
        (c.steps >= 1, "--steps must be at least 1"),
        (c.batch_size >= 1, "--batch-size must be at least 1"),
        (1 <= c.seq_len <= 65536, "--seq-len must be in [1, 65536]"),
        (c.n_layer >= 1, "--layers must be at least 1"),
        (c.n_embd >= 1 and c.n_head >= 1, "--n-embd and --heads must be at least 1"),
        (c.n_embd % max(c.n_head, 1) == 0, f"--heads ({c.n_head}) must divide --n-embd ({c.n_embd})"),
        (0 <= c.dropout < 1, "--dropout must be in [0, 1)"),
        (0 <= c.attn_dropout < 1, "--attn-dropout must be in [0, 1)"),
        (c.lr > 0, "--lr must be positive"),
        (c.warmup >= 0, "--warmup must be non-negative"),
        (c.weight_decay >= 0, "--weight-decay must be non-negative"),
        (c.grad_clip >= 0, "--grad-clip must be non-negative"),
        (c.seed >= 0, "--seed must be non-negative"),
        (c.threads >= 0, "--threads must be non-negative"),
        (c.log_interval >= 1, "--log-interval must be at least 1"),
        (c.eval_interval >= 1, "--eval-interval must be at least 1"),
        (c.eval_batches >= 1, "--eval-batches must be at least 1"),
        (c.sample_bytes >= 0, "--sample-bytes must be non-negative"),
        (c.temperature > 0, "--temperature must be positive"),
        (c.budget_fraction is None or 0 < c.budget_fraction <= 1,
         "--budget-fraction must be in (0, 1]"),
    ]
    for ok, msg in checks:
        if not ok:
            p.error(msg)
    return c


def main(argv):
    c = parse_flags(argv)
    if c.threads > 0:
        dtr.set_num_threads(c.threads)
    text = load_text(c.data)
    data = np.frombuffer(text, dtype=np.uint8)
    n_train = len(text) * 9 // 10
    train, val = data[:n_train], data[n_train:]
    if len(val) < c.seq_len + 2:
        raise SystemExit(f"{PROGRAM}: {c.data} has {len(text)} bytes: too little text for "
                         f"--seq-len {c.seq_len} (the validation tenth needs at least "
                         f"{c.seq_len + 2} bytes)")

    # --budget-fraction: two steps of a throw-away model measure the peak.
    peak = -1
    if c.budget_fraction is not None:
        dtr.memory.set_budget(None)
        dtr.memory.reset_stats()
        probe = build(c)
        for step in (1, 2):
            train_step(c, *probe, train, step)
        del probe
        peak = dtr.memory.stats()["peak_bytes"]
        budget = max(1, int(math.floor(c.budget_fraction * peak + 0.5)))
        dtr.memory.set_budget(budget)
    else:
        budget = dtr.memory.get_budget()

    model, opt = build(c)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"{PROGRAM}: {n_params / 1e6:.2f}M parameters (layers {c.n_layer}, n_embd {c.n_embd}, "
          f"heads {c.n_head}, context {c.seq_len}), device cpu")
    print(f"data: {c.data}, {len(text)} bytes (train {len(train)}, validation {len(val)})")
    print(f"training: steps 1 to {c.steps} of {c.steps}, batch {c.batch_size} x {c.seq_len} bytes, "
          f"AdamW lr {c.lr:g} (warm-up {c.warmup}, cosine to {c.lr / 10:g}), clip {c.grad_clip:g}, "
          f"dropout {c.dropout:g} (attention {c.attn_dropout:g}), seed {c.seed}")
    if c.budget_fraction is not None:
        print(f"memory: one training step needs {mib(peak)} with no budget; budget "
              f"{c.budget_fraction:.2f} x that = {mib(budget)}")
    elif budget is not None:
        print(f"memory: budget {mib(budget)} (from DTR_MEMORY_BUDGET)")
    else:
        print("memory: no budget (--budget-fraction 0.5 sets one at half the peak; DTR_MEMORY_BUDGET=SIZE caps it in bytes)")
    sys.stdout.flush()

    run_stats = StepStats()
    interval_start = run_stats.total()
    interval_seconds = train_seconds = loss_sum = 0.0
    interval_steps = 0
    last_loss = last_val = math.nan
    for step in range(1, c.steps + 1):
        run_stats.begin_step()
        t0 = time.perf_counter()
        loss = train_step(c, model, opt, train, step)
        seconds = time.perf_counter() - t0
        interval_seconds += seconds
        train_seconds += seconds
        loss_sum += loss
        interval_steps += 1
        last_loss = loss
        tokens_per_second = interval_steps * c.batch_size * c.seq_len / max(interval_seconds, 1e-9)
        eval_now = step % c.eval_interval == 0 or step == c.steps
        if step % c.log_interval == 0 or eval_now or step == 1:
            now = run_stats.total()
            line = f"step {step:5d}/{c.steps} | loss {loss_sum / interval_steps:.9g}"
            if eval_now:
                last_val = evaluate(c, model, val)
                line += f" | val {last_val:.9g}"
            line += f" | {tokens_per_second:.0f} tok/s | " + memory_columns(now, interval_start,
                                                                           interval_seconds)
            print(line, flush=True)
            interval_start = run_stats.total()
            interval_seconds = loss_sum = 0.0
            interval_steps = 0

    stats = run_stats.total()
    print(f"validation loss {last_val:.4f} ({last_val / math.log(2.0):.3f} bits per byte) after step "
          f"{c.steps}; last train loss {last_loss:.4f}")
    if c.sample_bytes > 0:
        print(f"sample (temperature {c.temperature:g}, seed {c.seed}):\n{'-' * 60}")
        print(f"{generate(c, model, c.sample_bytes)}\n{'-' * 60}")
    print(f"stats: peak_bytes {stats['peak_bytes']} budget_bytes {budget if budget else -1} "
          f"unbudgeted_peak_bytes {peak} evictions {stats['evictions']} "
          f"rematerializations {stats['rematerializations']} "
          f"recompute_seconds {stats['recompute_seconds_measured']:.3f} train_seconds {train_seconds:.3f}")
    recompute = stats["recompute_seconds_measured"]
    base = train_seconds - recompute
    extra = 100.0 * recompute / base if base > 0 else 0.0
    if budget is not None and peak >= 0:
        print(f"peak {mib(stats['peak_bytes'])} under a budget of {mib(budget)}; the same run needs "
              f"{mib(peak)} without one, at {extra:.0f}% more compute time ({stats['evictions']} "
              f"evictions, {stats['rematerializations']} rematerializations)")
    elif budget is not None:
        print(f"peak {mib(stats['peak_bytes'])} under a budget of {mib(budget)} (DTR_MEMORY_BUDGET), "
              f"at {extra:.0f}% more compute time for rematerialization ({stats['evictions']} "
              f"evictions, {stats['rematerializations']} rematerializations)")
    else:
        print(f"peak {mib(stats['peak_bytes'])} with no budget; run with --budget-fraction 0.5 to "
              "train in half of it")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except dtr.OutOfMemoryError as e:
        print(f"{PROGRAM}: out of memory: {e}", file=sys.stderr)
        sys.exit(3)
