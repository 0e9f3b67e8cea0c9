#!/usr/bin/python3
"""Budget sweep of the model zoo, one process per point, dtr and PyTorch alternated.

    build/venv-bench/bin/python benchmarks/sweep.py --quick --out benchmarks/results
        [--dtr build/benchmarks/zoo_step] [--torch-python build/venv-bench/bin/python]
        [--models gpt,resnet,...] [--ratios 0.5,0.3] [--heuristics dtr_eq,...]
        [--variants plain,checkpoint,sac,compile_0.5,compile_0.3]
        [--steps 5] [--warmup 1] [--rounds 2] [--callgrind]

Every point (a model under one library, variant, heuristic and budget) runs
in a fresh process (dtr: benchmarks/zoo_step; PyTorch: pytorch_zoo.py
--child) with a time limit, so a point that thrashes or fails costs its own
process only and is recorded as such (`timeout`, `oom`, `error`) while the
sweep moves on. For each model the points of one round run one after the
other (dtr unbudgeted, PyTorch plain, dtr at each ratio, PyTorch's other
variants), and the rounds repeat that order, so the two libraries alternate
within a minute of each other. Nothing else may run on the machine meanwhile.

A point's budget is ratio × the storage peak of dtr's unbudgeted run of the
same model (dtr::remat::stats().peak_bytes: resident tensor-storage bytes,
parameters, gradients and optimizer state included). Times are process CPU
time of one training step (one thread per library): for each point the
steps of all its rounds are pooled, and min, median and spread
((max − min) / median) are reported. Slowdown is median over median
against dtr's unbudgeted steps of the same rounds; dtr / PyTorch likewise
against PyTorch's plain steps. The floor is the resident bytes between
steps (never evictable: parameters, gradients, optimizer state, inputs) /
the peak: no ratio below it is feasible.

--full runs the whole sweep that benchmarks/plot_sweep.py draws: the chain
and the headline models, dtr_eq at ratios 0.9 to 0.2 and every other
heuristic at 0.5 and 0.3, against all of PyTorch's variants (about 50
minutes on two cores). In every mode a budget point that did not complete in
one round (oom, thrash, timeout, error) is not run again in later rounds.

--quick runs the headline cells: gpt, resnet, unet, lstm and chain_b2048,
unbudgeted and at 0.5 and 0.3 (gpt also at 0.2), against PyTorch plain, two
rounds of 5 steps after 1 warm-up (7–9 minutes on two cores).

Writes OUT/points.csv (one row per process, with the commit, the CPU
model and the flags), OUT/headline.csv (one row per cell) and
OUT/headline.md (the table, stating machine, commit and method).
--callgrind adds instruction counts (valgrind --tool=callgrind, the measured
step only) of one step of gpt and lstm with lineage off, unbudgeted and at
0.5 to OUT/callgrind.csv: counts that do not depend on load (lineage's
overhead is unbudgeted over lineage off; a budget's cost, 0.5 over
unbudgeted).
"""

import argparse
import csv
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
QUICK_MODELS = ["gpt", "resnet", "unet", "lstm", "chain_b2048"]
QUICK_RATIOS = {"gpt": [0.5, 0.3, 0.2]}
DEFAULT_RATIOS = [0.5, 0.3]
FULL_MODELS = ["chain"] + QUICK_MODELS
FULL_RATIOS = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2]
FULL_OTHER_HEURISTICS = ["dtr", "dtr_local", "lru", "size", "msps"]
FULL_OTHER_RATIOS = [0.5, 0.3]
FULL_VARIANTS = ["plain", "checkpoint", "sac", "compile_0.5", "compile_0.3"]


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = line.split(":", 1)[1].split()
                    return " ".join(f for f in ("avx2", "avx512f", "fma") if f in flags)
    except OSError:
        pass
    return ""


def commit():
    try:
        out = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return out.stdout.strip() + ("+dirty" if dirty else "")
    except OSError:
        return "unknown"


def run_point(cmd, env, timeout):
    """Runs one point; returns its JSON object with "outcome" set (ok, oom, timeout, error)."""
    start = time.monotonic()
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"outcome": "timeout", "error": f"killed after {timeout:.0f} s", "seconds": timeout}
    except OSError as e:
        return {"outcome": "error", "error": f"cannot run {cmd[0]}: {e}", "seconds": time.monotonic() - start}
    seconds = time.monotonic() - start
    lines = [l for l in proc.stdout.strip().splitlines() if l.startswith("{")]
    try:
        result = json.loads(lines[-1]) if lines else {}
    except json.JSONDecodeError:
        result = {"outcome": "error", "error": f"unreadable JSON result: {lines[-1][:200]}"}
    result.setdefault("outcome", "ok" if proc.returncode == 0 and lines else "error")
    if proc.returncode != 0 and result["outcome"] == "ok":
        result["outcome"] = "error"
    if result["outcome"] != "ok" and "error" not in result:
        result["error"] = stderr_message(proc.stderr) or (
            f"exit code {proc.returncode}" if proc.returncode != 0 else "no JSON result on stdout")
    result["seconds"] = seconds
    return result


def stderr_message(stderr):
    """The error a failed child printed: from its last `zoo_step:` line to the
    end (a malformed option's message spans lines), else its last line; usage
    lines and the options' "thrown once" reminder left out."""
    lines = [l.strip() for l in stderr.splitlines() if l.strip() and not l.startswith("usage:")
             and not l.startswith("This error is thrown once")]
    if not lines:
        return ""
    starts = [i for i, l in enumerate(lines) if l.startswith("zoo_step:")]
    return " ".join(lines[starts[-1]:]) if starts else lines[-1]


def ratio_list(parser, flag, text):
    """Comma-separated budget ratios in (0, 1], or a parser error naming the flag."""
    try:
        ratios = [float(x) for x in text.split(",")]
    except ValueError:
        parser.error(f"{flag} {text!r}: expected comma-separated numbers in (0, 1], e.g. 0.5,0.3")
    if not all(0 < x <= 1 for x in ratios):
        parser.error(f"{flag} {text!r}: every ratio must lie in (0, 1]")
    return ratios


def summary(values):
    if not values:
        return {"min": "", "median": "", "spread": ""}
    med = statistics.median(values)
    return {"min": min(values), "median": med, "spread": (max(values) - min(values)) / med if med else 0.0}


def fmt(x, digits=2):
    return "" if x == "" or x is None else f"{x:.{digits}f}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="directory for points.csv, headline.csv, headline.md")
    parser.add_argument("--quick", action="store_true", help="the headline cells only")
    parser.add_argument("--full", action="store_true",
                        help="the full sweep: chain too, dtr_eq at 0.9..0.2, the other heuristics at 0.5 and 0.3")
    parser.add_argument("--dtr", default=os.path.join(ROOT, "build", "benchmarks", "zoo_step"))
    venv_python = os.path.join(ROOT, "build", "venv-bench", "bin", "python")
    parser.add_argument("--torch-python", default=venv_python if os.access(venv_python, os.X_OK) else "/usr/bin/python3",
                        help="the Python whose torch is the peer (default: build/venv-bench's, else python3)")
    parser.add_argument("--models")
    parser.add_argument("--ratios", help="budget ratios of --heuristics (default 0.5,0.3, and 0.2 for gpt; "
                        "--full: 0.9,...,0.2)")
    parser.add_argument("--heuristics", default="dtr_eq", help="heuristics run at --ratios (default dtr_eq)")
    parser.add_argument("--other-heuristics", help="heuristics run at --other-ratios only (--full: dtr,dtr_local,"
                        "lru,size,msps)")
    parser.add_argument("--other-ratios", help="budget ratios of --other-heuristics (default 0.5,0.3)")
    parser.add_argument("--variants", help="PyTorch variants (default: plain with --quick, otherwise "
                        "plain,checkpoint,sac,compile_0.5,compile_0.3)")
    parser.add_argument("--dtr-checkpoint", action="store_true", help="also dtr's static checkpointing")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--torch-warmup", type=int, default=None,
                        help="PyTorch's warm-up steps (default --warmup; compile variants at least 2)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--timeout-factor", type=float, default=25.0,
                        help="a point's limit: this × the unbudgeted point's process time (at least 60 s)")
    parser.add_argument("--callgrind", action="store_true")
    parser.add_argument("--callgrind-timeout", type=float, default=1800,
                        help="seconds one valgrind run may take (default 1800)")
    args = parser.parse_args()
    if args.steps < 1 or args.warmup < 0 or args.rounds < 1:
        parser.error("--steps >= 1, --warmup >= 0 and --rounds >= 1 are required")
    if args.quick and args.full:
        parser.error("--quick and --full exclude each other")
    if not (os.path.isfile(args.dtr) and os.access(args.dtr, os.X_OK)):
        parser.error(f"--dtr {args.dtr}: not an executable (build first: ./dtr.sh build)")
    if not (os.path.isfile(args.torch_python) and os.access(args.torch_python, os.X_OK)):
        parser.error(f"--torch-python {args.torch_python}: not an executable")
    models = args.models.split(",") if args.models else (FULL_MODELS if args.full else QUICK_MODELS)
    heuristics = args.heuristics.split(",")
    other_heuristics = [h for h in (args.other_heuristics.split(",") if args.other_heuristics else (
        FULL_OTHER_HEURISTICS if args.full else [])) if h not in heuristics]
    if args.other_ratios and not other_heuristics:
        parser.error("--other-ratios needs --other-heuristics (or --full), naming heuristics not in --heuristics")
    other_ratios = ratio_list(parser, "--other-ratios", args.other_ratios) if args.other_ratios else FULL_OTHER_RATIOS
    ratio_override = ratio_list(parser, "--ratios", args.ratios) if args.ratios else None
    variants = args.variants.split(",") if args.variants else (["plain"] if args.quick else list(FULL_VARIANTS))
    if "plain" not in variants:
        variants.insert(0, "plain")
    try:
        os.makedirs(args.out, exist_ok=True)
    except OSError as e:
        parser.error(f"--out {args.out!r}: cannot make the directory: {e.strerror}")

    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    env.pop("DTR_MEMORY_BUDGET", None)
    machine = {"commit": commit(), "cpu": cpu_model(), "cpu_flags": cpu_flags(), "threads": 1,
               "sample": os.environ.get("DTR_SAMPLE", "") or "auto",
               "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}
    common = ["--steps", str(args.steps), "--threads", "1"]
    pyzoo = os.path.join(HERE, "pytorch_zoo.py")

    fields = ["model", "library", "variant", "heuristic", "ratio", "round", "outcome", "budget_bytes", "peak_bytes",
              "resident_between_steps", "rss_peak_delta_mib", "cpu_ms", "wall_ms", "evictions", "recomputed_ops",
              "recomputed_flops", "step_flops", "max_replay_ratio", "parameter_bytes", "version", "seconds", "error",
              "commit", "cpu", "cpu_flags", "sample", "steps", "warmup"]
    points_path = os.path.join(args.out, "points.csv")
    points = []
    with open(points_path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()

        def record(model, library, variant, heuristic, ratio, rnd, r, warmup):
            row = {"model": model, "library": library, "variant": variant, "heuristic": heuristic,
                   "ratio": ratio, "round": rnd, "outcome": r["outcome"], "budget_bytes": r.get("budget_bytes", ""),
                   "peak_bytes": r.get("peak_bytes", ""), "resident_between_steps": r.get("resident_between_steps", ""),
                   "rss_peak_delta_mib": fmt(r["rss_peak_delta_kib"] / 1024, 1) if "rss_peak_delta_kib" in r else "",
                   "cpu_ms": " ".join(f"{x:.3f}" for x in r.get("cpu_ms", [])),
                   "wall_ms": " ".join(f"{x:.3f}" for x in r.get("wall_ms", [])),
                   "evictions": r.get("evictions", ""), "recomputed_ops": r.get("recomputed_ops", ""),
                   "recomputed_flops": r.get("recomputed_flops", ""),
                   "step_flops": r.get("step_flops", ""), "max_replay_ratio": r.get("max_replay_ratio", ""),
                   "parameter_bytes": r.get("parameter_bytes", ""), "version": r.get("version", ""),
                   "seconds": fmt(r["seconds"], 1), "error": r.get("error", "")[:300], "steps": args.steps,
                   "warmup": warmup, **{k: machine[k] for k in ("commit", "cpu", "cpu_flags", "sample")}}
            writer.writerow(row)
            f.flush()
            points.append(row)
            cpu = r.get("cpu_ms", [])
            print(f"{model:12s} {library:8s} {variant:12s} {heuristic:7s} {ratio:>5} round {rnd}: {r['outcome']:8s}"
                  f" {statistics.median(cpu) if cpu else float('nan'):9.1f} ms  ({r['seconds']:.0f} s)"
                  + (f"  {r.get('error', '')[:120]}" if r["outcome"] != "ok" else ""), file=sys.stderr, flush=True)

        for model in models:
            ratios = ratio_override or (FULL_RATIOS if args.full else QUICK_RATIOS.get(model, DEFAULT_RATIOS))
            budget_points = [(h, x) for h in heuristics for x in ratios]
            budget_points += [(h, x) for h in other_heuristics for x in other_ratios]
            failed = set()  # budget points that did not complete: not run again
            peak, limit = None, None
            for rnd in range(args.rounds):
                # dtr unbudgeted (sets the budgets and the time limit), then PyTorch plain.
                r = run_point([args.dtr, "--model", model, "--warmup", str(args.warmup)] + common,
                              dict(env, DTR_HEURISTIC=heuristics[0]), 3600)
                record(model, "dtr", "plain", "none", "1.0", rnd, r, args.warmup)
                if r["outcome"] != "ok":
                    break
                peak = peak or r["peak_bytes"]
                limit = limit or max(60.0, args.timeout_factor * r["seconds"])
                torch_points = []
                for variant in variants:
                    warm = args.torch_warmup if args.torch_warmup is not None else args.warmup
                    if variant.startswith("compile"):
                        warm = max(warm, 2)
                    torch_points.append((variant, warm))
                # PyTorch plain right after dtr's unbudgeted point; its other variants after dtr's budgets.
                for variant, warm in torch_points[:1]:
                    r = run_point([args.torch_python, pyzoo, "--child", model, "--mode", variant,
                                   "--warmup", str(warm)] + common, env, limit * 4)
                    record(model, "pytorch", variant, "", "", rnd, r, warm)
                for heuristic, ratio in budget_points:
                    if (heuristic, ratio) in failed:
                        continue
                    budget = int(peak * ratio)
                    r = run_point([args.dtr, "--model", model, "--warmup", str(args.warmup), "--budget",
                                   str(budget)] + common, dict(env, DTR_HEURISTIC=heuristic), limit)
                    r.setdefault("budget_bytes", budget)
                    record(model, "dtr", "budget", heuristic, f"{ratio}", rnd, r, args.warmup)
                    if r["outcome"] != "ok":
                        failed.add((heuristic, ratio))
                if args.dtr_checkpoint:
                    r = run_point([args.dtr, "--model", model, "--mode", "checkpoint", "--warmup", str(args.warmup)]
                                  + common, env, limit)
                    record(model, "dtr", "checkpoint", "none", "", rnd, r, args.warmup)
                for variant, warm in torch_points[1:]:
                    r = run_point([args.torch_python, pyzoo, "--child", model, "--mode", variant,
                                   "--warmup", str(warm)] + common, env, limit * 4)
                    record(model, "pytorch", variant, "", "", rnd, r, warm)
    cells = headline(points, models)
    write_headline(args, cells, machine, points)
    if args.callgrind:
        callgrind(args, env, machine)


def pooled(points, **match):
    rows = [p for p in points if all(str(p[k]) == str(v) for k, v in match.items())]
    cpu = [float(x) for p in rows if p["outcome"] == "ok" for x in p["cpu_ms"].split()]
    outcomes = sorted({p["outcome"] for p in rows})
    return rows, cpu, outcomes


def headline(points, models):
    """One row per (model, library, variant, heuristic, ratio) with pooled statistics."""
    cells = []
    keys = []
    for p in points:
        k = (p["model"], p["library"], p["variant"], p["heuristic"], p["ratio"])
        if k not in keys:
            keys.append(k)
    for model, library, variant, heuristic, ratio in keys:
        rows, cpu, outcomes = pooled(points, model=model, library=library, variant=variant, heuristic=heuristic,
                                     ratio=ratio)
        s = summary(cpu)
        _, base, _ = pooled(points, model=model, library="dtr", variant="plain")
        _, torch_base, _ = pooled(points, model=model, library="pytorch", variant="plain")
        ok = [r for r in rows if r["outcome"] == "ok"]
        first = ok[0] if ok else rows[0]
        peak = next((int(r["peak_bytes"]) for r in points if r["model"] == model and r["library"] == "dtr"
                     and r["variant"] == "plain" and r["outcome"] == "ok"), None)
        between = next((int(r["resident_between_steps"]) for r in points if r["model"] == model and
                        r["library"] == "dtr" and r["variant"] == "plain" and r["outcome"] == "ok"), None)
        cell = {"model": model, "library": library, "variant": variant, "heuristic": heuristic, "ratio": ratio,
                "outcome": "ok" if len(ok) == len(rows) else "/".join(outcomes), "processes": len(rows),
                "steps": len(cpu), "min_cpu_ms": s["min"], "median_cpu_ms": s["median"], "spread": s["spread"],
                "slowdown": "", "slowdown_min": "", "vs_pytorch": "", "floor": "",
                "recomputed_ops": first.get("recomputed_ops", ""), "recomputed_flops": first.get("recomputed_flops", ""),
                "peak_bytes": first.get("peak_bytes", ""), "rss_peak_delta_mib": first.get("rss_peak_delta_mib", ""),
                "version": first.get("version", ""), "error": "" if ok else first.get("error", "")}
        if cpu and base:
            cell["slowdown"] = statistics.median(cpu) / statistics.median(base)
            cell["slowdown_min"] = min(cpu) / min(base)
        if cpu and torch_base and library == "dtr" and variant == "plain":
            cell["vs_pytorch"] = statistics.median(cpu) / statistics.median(torch_base)
        if library == "pytorch" and cpu and torch_base:
            cell["slowdown"] = statistics.median(cpu) / statistics.median(torch_base)
            cell["slowdown_min"] = min(cpu) / min(torch_base)
            rss = [float(r["rss_peak_delta_mib"]) for r in ok if r["rss_peak_delta_mib"]]
            rss_base = [float(r["rss_peak_delta_mib"]) for r in points if r["model"] == model and
                        r["library"] == "pytorch" and r["variant"] == "plain" and r["outcome"] == "ok" and
                        r["rss_peak_delta_mib"]]
            if rss and rss_base and min(rss_base) > 0:
                cell["ratio"] = f"{min(rss) / min(rss_base):.2f} (RSS)"
        if peak and between:
            cell["floor"] = between / peak
        cells.append(cell)
    return cells


def write_headline(args, cells, machine, points):
    fields = list(cells[0].keys()) if cells else []
    with open(os.path.join(args.out, "headline.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields + ["commit", "cpu"])
        w.writeheader()
        for c in cells:
            w.writerow({**{k: (f"{v:.4f}" if isinstance(v, float) else v) for k, v in c.items()},
                        "commit": machine["commit"], "cpu": machine["cpu"]})

    def cell_text(c):
        if c is None:
            return "–"
        if c["outcome"] != "ok":
            names = {"oom": "infeasible (oom)", "thrash": "thrash (guard)", "timeout": "thrash (timeout)"}
            return "/".join(names.get(o, o) for o in c["outcome"].split("/"))
        text = f"{c['slowdown']:.2f}× ({c['slowdown_min']:.2f}× min, ±{100 * c['spread']:.0f}%)"
        if c["recomputed_ops"] not in ("", None):
            text += f", {float(c['recomputed_ops']):.0f} replays"
        return text

    def find(model, **match):
        for c in cells:
            if c["model"] == model and all(str(c[k]) == str(v) for k, v in match.items()):
                return c
        return None

    torch_version = next((c["version"] for c in cells if c["library"] == "pytorch" and c["version"]), "")
    lead = args.heuristics.split(",")[0]  # the table's heuristic; the others are in headline.csv
    ratios = sorted({c["ratio"] for c in cells if c["library"] == "dtr" and c["variant"] == "budget"
                     and c["heuristic"] == lead}, key=float, reverse=True)
    lines = [
        "# Headline: dtr's slowdown under a budget, and dtr against PyTorch",
        "",
        f"Generated by `benchmarks/sweep.py{' --quick' if args.quick else ' --full' if args.full else ''}` on "
        f"{machine['date']}: commit {machine['commit']}, {machine['cpu']} ({machine['cpu_flags'] or 'no AVX2 flag'}), "
        f"DTR_SAMPLE={machine['sample']}, one thread per library, "
        f"PyTorch {torch_version or '(not run)'}. Each point in a fresh process with a time limit; {args.rounds} rounds "
        f"alternating dtr and PyTorch per model; each process {args.warmup} warm-up step(s) (PyTorch's compile "
        f"variants at least 2) then {args.steps} timed steps; the steps of all rounds pooled. Figures are median "
        "process CPU time over median, with the ratio of minimums and the spread ((max − min) / median of the "
        "point's steps). ratio = budget / dtr's unbudgeted peak of resident storage bytes; floor = resident bytes "
        "between steps / that peak (parameters, gradients, optimizer state, inputs: never evictable).",
        "",
        "| model | dtr ms (min, median) | PyTorch ms (min, median) | dtr / PyTorch | floor | "
        + " | ".join(f"{lead} at {r}" for r in ratios) + " |",
        "|---|---|---|---|---|" + "---|" * len(ratios),
    ]
    for model in dict.fromkeys(c["model"] for c in cells):
        d = find(model, library="dtr", variant="plain")
        t = find(model, library="pytorch", variant="plain")

        def ms(c):
            return f"{c['min_cpu_ms']:.0f}, {c['median_cpu_ms']:.0f}" if c and c["outcome"] == "ok" else (
                c["outcome"] if c else "–")

        vs = f"{d['vs_pytorch']:.2f}×" if d and d["vs_pytorch"] != "" else "–"
        floor = f"{d['floor']:.2f}" if d and d["floor"] != "" else "–"
        row = [model, ms(d), ms(t), vs, floor]
        for r in ratios:
            row.append(cell_text(find(model, library="dtr", variant="budget", heuristic=lead, ratio=r)))
        lines.append("| " + " | ".join(row) + " |")
    others = [c for c in cells if c["library"] == "pytorch" and c["variant"] != "plain"]
    if others:
        lines += ["", "PyTorch's memory-saving variants (ratio: peak RSS above the built model / plain's; slowdown "
                  "against PyTorch plain):", "", "| model | variant | ratio | slowdown |", "|---|---|---|---|"]
        for c in others:
            lines.append(f"| {c['model']} | {c['variant']} | {c['ratio'] or '–'} | "
                         f"{cell_text(c) if c['outcome'] == 'ok' else c['outcome'] + ': ' + c['error'][:80]} |")
    bad = [p for p in points if p["outcome"] not in ("ok",)]
    if bad:
        lines += ["", "Points that did not complete:", ""]
        for p in bad:
            lines.append(f"- {p['model']} {p['library']} {p['variant']} {p['heuristic']} {p['ratio']} "
                         f"round {p['round']}: {p['outcome']}: {p['error'][:200]}")
    with open(os.path.join(args.out, "headline.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


def callgrind(args, env, machine):
    """Instructions (Ir) of one measured step of gpt and lstm: lineage off, unbudgeted, and at 0.5."""
    rows = []
    for model in ("lstm", "gpt"):
        base = run_point([args.dtr, "--model", model, "--steps", "1", "--warmup", "1", "--threads", "1"], env, 3600)
        if base["outcome"] != "ok":
            continue
        for setting in ("lineage off", "unbudgeted", "0.5"):
            with tempfile.TemporaryDirectory() as tmp:
                out = os.path.join(tmp, "cg.out")
                cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}", args.dtr,
                       "--model", model, "--steps", "1", "--warmup", "1", "--threads", "1"]
                if setting == "lineage off":
                    cmd += ["--lineage", "off"]
                elif setting == "0.5":
                    cmd += ["--budget", str(int(base["peak_bytes"] * 0.5))]
                start = time.monotonic()
                try:
                    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.callgrind_timeout)
                except subprocess.TimeoutExpired:
                    print(f"callgrind {model} {setting}: over {args.callgrind_timeout} s, skipped", file=sys.stderr)
                    continue
                m = re.search(r"Collected\s*:\s*(\d+)", proc.stderr)
                lines = [l for l in proc.stdout.splitlines() if l.startswith("{")]
                r = json.loads(lines[-1]) if lines else {}
                rows.append({"model": model, "setting": setting, "instructions": m.group(1) if m else "",
                             "recomputed_ops": r.get("recomputed_ops", ""),
                             "recomputed_flops": r.get("recomputed_flops", ""),
                             "seconds": f"{time.monotonic() - start:.0f}", "commit": machine["commit"]})
                print(f"callgrind {model} {setting}: {rows[-1]['instructions']} instructions", file=sys.stderr)
    with open(os.path.join(args.out, "callgrind.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["model", "setting", "instructions", "recomputed_ops", "recomputed_flops",
                                          "seconds", "commit"])
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main()
