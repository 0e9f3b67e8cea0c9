#!/usr/bin/env python3
"""Sets one model of the zoo side by side: dtr without a budget, dtr under a
budget, PyTorch eager; fails unless the budgeted run is the unbudgeted one.

    zoo_compare.py --model NAME DTR.log DTR_BUDGET.log [TORCH.log]

Each log holds one run's output, whose last line starting with "{" is the
JSON line that benchmarks/zoo_step (dtr) or benchmarks/pytorch_zoo.py
--child (PyTorch) prints. Prints every run's median and minimum step time,
dtr's storage peak and evictions per step, the loss, and dtr's time over
PyTorch's. Exits 1 when a dtr run is missing or did not finish ("outcome"
other than "ok"), when the budgeted run's loss differs from the unbudgeted
one's (the same seed and steps: DTR's replay is bitwise), or when the
budgeted run evicted nothing (its budget never bound); else 0. A missing
PyTorch run is reported, not failed (gpu-check.sh counts that run itself).
"""

import argparse
import json
import sys


def last_json(path):
    """The last JSON object line of the file at `path`, or an error string."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = [ln.strip() for ln in f if ln.strip().startswith("{")]
    except OSError as e:
        return f"cannot read {path}: {e.strerror}"
    if not lines:
        return f"{path} has no JSON line: the run printed no result"
    try:
        return json.loads(lines[-1])
    except ValueError as e:
        return f"{path}: unreadable JSON line ({e})"


def not_ok(run):
    """Why a parsed run gave no figures ("" when it did)."""
    if run.get("outcome", "ok") != "ok" or "error" in run:
        return f"outcome {run.get('outcome', 'error')}: {run.get('error', 'no error given')}"
    if "median_ms" not in run or "loss" not in run:
        return "no median_ms or loss in its JSON line"
    return ""


def mib(n):
    return f"{n / 2**20:.1f}"


def compare(model, dtr, budgeted, torch=None):
    """Prints the table for parsed runs (dicts, or error strings); returns the problems."""
    problems = []
    rows = [("dtr, no budget", dtr), ("dtr, under the budget", budgeted)]
    if torch is not None:
        rows.append(("PyTorch eager", torch))
    print(f"zoo {model}: {'run':<24} {'median ms':>10} {'min ms':>9} {'peak MiB':>9} {'evict/step':>10} {'loss':>12}")
    for label, r in rows:
        if isinstance(r, str):
            print(f"zoo {model}: {label:<24} no figures: {r}")
            continue
        if not_ok(r):
            print(f"zoo {model}: {label:<24} {not_ok(r)}")
            continue
        peak = mib(r["peak_bytes"]) if "peak_bytes" in r else "-"
        evictions = f"{r['evictions']:.1f}" if "evictions" in r else "-"
        budget = f" (budget {mib(r['budget_bytes'])} MiB)" if r.get("budget_bytes", -1) > 0 else ""
        print(f"zoo {model}: {label:<24} {r['median_ms']:>10.3f} {r['min_ms']:>9.3f} {peak:>9} {evictions:>10} "
              f"{r['loss']:>12.6f}{budget}")
    for label, r in rows[:2]:
        if isinstance(r, str):
            problems.append(f"{label}: {r}")
        elif not_ok(r):
            problems.append(f"{label}: {not_ok(r)}")
    if problems:
        return problems
    if budgeted["loss"] != dtr["loss"]:
        problems.append(f"the budgeted run's loss {budgeted['loss']:.6f} differs from the unbudgeted "
                        f"{dtr['loss']:.6f}")
    if budgeted.get("evictions", 0) <= 0:
        problems.append("the budgeted run evicted nothing: its budget never bound")
    if isinstance(torch, dict) and not not_ok(torch) and torch.get("median_ms"):
        print(f"zoo {model}: dtr / PyTorch median step time: {dtr['median_ms'] / torch['median_ms']:.2f}x "
              f"without a budget, {budgeted['median_ms'] / torch['median_ms']:.2f}x under it")
    elif torch is not None:
        print(f"zoo {model}: no PyTorch figure to compare with")
    return problems


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("dtr", help="zoo_step's output without a budget")
    parser.add_argument("budgeted", help="zoo_step's output under a budget")
    parser.add_argument("torch", nargs="?", help="pytorch_zoo.py --child's output")
    args = parser.parse_args(argv)
    runs = [last_json(args.dtr), last_json(args.budgeted), last_json(args.torch) if args.torch else None]
    problems = compare(args.model, *runs)
    for p in problems:
        print(f"zoo {args.model}: FAILED: {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
