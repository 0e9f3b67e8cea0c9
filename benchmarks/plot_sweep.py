#!/usr/bin/python3
"""Plot and tables of the full budget sweep.

    /usr/bin/python3 benchmarks/plot_sweep.py [--results benchmarks/results]

Reads from --results points.csv (`benchmarks/sweep.py --full`: one row per
process, dtr and PyTorch alternated) and, when present, min_feasible.csv
(`build/benchmarks/budget_sweep --predict-only`: the budget planner's
smallest feasible ratio, a count that does not depend on load), and writes
there:

  sweep.svg   slowdown against budget ratio, one panel per model: dtr's
              heuristics as lines (x = budget / dtr's unbudgeted storage
              peak); dtr_eq again by peak RSS (thin grey line) and PyTorch's
              variants (plain, checkpoint_sequential, selective
              checkpointing, torch.compile under activation memory budgets)
              as marked points, both placed by the measure the two libraries
              share: x = peak RSS above the built model / dtr's unbudgeted
              one, y = median CPU time / dtr's unbudgeted one. The floor
              (resident bytes between steps / peak) is a dashed line.
  summary.md  every table README.md quotes, with the goals met or not.

Needs Debian's python3-matplotlib. Cells are pooled exactly as sweep.py
pools them (its `headline`): the steps of all rounds of one point, median
over median against the same run's unbudgeted dtr steps.
"""

import argparse
import csv
import math
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sweep as sweep_py  # noqa: E402  (benchmarks/sweep.py: the pooling)

MODELS = sweep_py.FULL_MODELS
HEURISTICS = ["dtr_eq"] + sweep_py.FULL_OTHER_HEURISTICS
VARIANTS = sweep_py.FULL_VARIANTS
GOAL_MODELS = sweep_py.QUICK_MODELS
GOALS_RATIO = {"0.5": 1.08, "0.3": 1.25}
# benchmarks/models/zoo.h: chain_b2048 is 64 × (Linear 512→512, GELU) at batch 2048.
CHAIN_B2048 = {"layers": 64, "batch": 2048, "width": 512}
FAILED = {"oom": "oom", "thrash": "thrash", "timeout": "timeout", "error": "error"}


def read_csv(path):
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def fmt(x, digits=2, suffix=""):
    return "–" if x is None or x == "" or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}{suffix}"


class Cells:
    """sweep.py's pooled cells, looked up by model, library, variant, heuristic and ratio."""

    def __init__(self, points):
        self.points = points
        models = list(dict.fromkeys(p["model"] for p in points))
        self.models = [m for m in MODELS if m in models] + [m for m in models if m not in MODELS]
        self.cells = sweep_py.headline(points, self.models)

    def get(self, model, library, variant, heuristic=None, ratio=None):
        for c in self.cells:
            if (c["model"], c["library"], c["variant"]) != (model, library, variant):
                continue
            if heuristic is not None and c["heuristic"] != heuristic:
                continue
            if ratio is not None and not (library == "dtr" and abs(float(c["ratio"]) - float(ratio)) < 1e-9):
                continue
            return c
        return None

    def ratios(self):
        return sorted({float(c["ratio"]) for c in self.cells if c["variant"] == "budget"}, reverse=True)

    def heuristics(self):
        present = {c["heuristic"] for c in self.cells if c["variant"] == "budget"}
        return [h for h in HEURISTICS if h in present] + sorted(present - set(HEURISTICS))

    def rss(self, model, library, variant, heuristic=None, ratio=None):
        """Median peak RSS above the built model (MiB) over the point's completed processes."""
        vals = [float(p["rss_peak_delta_mib"]) for p in self.points
                if (p["model"], p["library"], p["variant"]) == (model, library, variant) and p["outcome"] == "ok"
                and p["rss_peak_delta_mib"] and (heuristic is None or p["heuristic"] == heuristic)
                and (ratio is None or (p["ratio"] and abs(float(p["ratio"]) - float(ratio)) < 1e-9))]
        return statistics.median(vals) if vals else None


def ok(c):
    return c is not None and c["outcome"] == "ok" and c["median_cpu_ms"] != ""


def slowdown_text(c):
    if c is None:
        return "–"
    if not ok(c):
        return "/".join(FAILED.get(o, o) for o in c["outcome"].split("/"))
    return f"{c['slowdown']:.2f}×"


def plot(cells, min_feasible, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = cells.models
    cols = min(3, len(models))
    rows = math.ceil(len(models) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.9 * rows + 1.2), squeeze=False)
    styles = dict(zip(HEURISTICS, ["o-", "s--", "^--", "v:", "d:", "x:"]))
    markers = {"plain": "P", "checkpoint": "X", "sac": "D", "compile_0.5": "^", "compile_0.3": "v"}
    for ax, model in zip(axes.flat, models):
        base = cells.get(model, "dtr", "plain")
        top, bottom, right = 1.0, 0.8, 1.05
        for h in cells.heuristics():
            pts = sorted(((float(c["ratio"]), c["slowdown"]) for c in cells.cells
                          if c["model"] == model and c["variant"] == "budget" and c["heuristic"] == h and ok(c)),
                         reverse=True)
            if not pts:
                continue
            xs, ys = zip(*pts)
            top, bottom = max(top, max(ys)), min(bottom, min(ys) - 0.05)
            ax.plot(xs, ys, styles.get(h, "o-"), label=f"dtr, {h}", lw=2 if h == "dtr_eq" else 1, ms=4)
        base_rss = cells.rss(model, "dtr", "plain")
        if base_rss:
            pts = []
            for c in cells.cells:
                if c["model"] == model and c["variant"] == "budget" and c["heuristic"] == "dtr_eq" and ok(c):
                    rss = cells.rss(model, "dtr", "budget", "dtr_eq", c["ratio"])
                    if rss:
                        pts.append((rss / base_rss, c["slowdown"]))
            if pts:
                xs, ys = zip(*sorted(pts, reverse=True))
                ax.plot(xs, ys, ".-", color="grey", lw=0.8, ms=3, label="dtr, dtr_eq by RSS")
            for variant in VARIANTS:
                c = cells.get(model, "pytorch", variant)
                rss = cells.rss(model, "pytorch", variant)
                if not ok(c) or not rss or not ok(base):
                    continue
                y = c["median_cpu_ms"] / base["median_cpu_ms"]
                compiled = variant.startswith("compile_")
                label = f"PyTorch {variant.replace('_', ' ')}" if variant != "plain" else "PyTorch"
                ax.plot([rss / base_rss], [y], markers.get(variant, "o"), ms=9, alpha=0.8,
                        color="tab:purple" if compiled else "tab:red", label=label + " (by RSS)")
                top, bottom, right = max(top, y), min(bottom, y - 0.05), max(right, rss / base_rss + 0.05)
        if ok(base) and base["floor"] != "":
            ax.axvline(base["floor"], color="grey", ls="--", lw=1, label="floor (between steps / peak)")
        mf = min_feasible.get(model)
        if mf is not None:
            ax.axvline(mf, color="grey", ls=":", lw=1, label="dtr_eq smallest feasible (planner)")
        ax.axhline(1.0, color="grey", lw=0.5)
        ax.set_title(model)
        ax.set_xlim(right, 0)
        ax.set_ylim(max(bottom, 0.0), min(top * 1.08, 4.0))
        ax.set_xlabel("budget / unbudgeted peak (PyTorch: RSS / dtr's)")
        ax.set_ylabel("CPU time / dtr unbudgeted")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(models):]:
        ax.axis("off")
    handles, labels = {}, []
    for ax in axes.flat:
        for h, l in zip(*ax.get_legend_handles_labels()):
            if l not in handles:
                handles[l] = h
                labels.append(l)
    fig.legend([handles[l] for l in labels], labels, loc="lower center", fontsize=8, ncol=4)
    fig.suptitle("dtr: slowdown against memory budget (one thread; above 4× off the chart)")
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    fig.savefig(path)


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def beta(s, t):
    return math.comb(s + t, s) if t >= 0 else 0


def revolve_forward_steps(l, s):
    """Binomial checkpointing's fewest layer forwards for l layers and s slots
    (Griewank & Walther 2000): p = t·l − β(s+1, t−1), β(s, t−1) < l ≤ β(s, t).
    The same formula as budget_sweep.cpp's."""
    if s < 0:
        return None
    if s == 0:
        return l * (l - 1) // 2
    t = 1
    while beta(s, t) < l:
        t += 1
    return t * l - beta(s + 1, t - 1)


def summary(cells, min_feasible, points):
    first = points[0]
    rounds = max(int(p["round"]) for p in points) + 1
    torch_version = next((c["version"] for c in cells.cells if c["library"] == "pytorch" and c["version"]), "–")
    md = ["# Budget sweep results", "",
          f"Generated by `benchmarks/plot_sweep.py` from `points.csv` (`benchmarks/sweep.py --full`): commit "
          f"{first['commit']}, {first['cpu']} ({first['cpu_flags']}), DTR_SAMPLE={first.get('sample') or 'auto'}, "
          f"one thread per library, PyTorch {torch_version}. Every point ran in its own process with a time "
          f"limit; {rounds} rounds alternated dtr and PyTorch per model; each process ran {first['warmup']} "
          f"warm-up step(s) (PyTorch's compile variants 2) and {first['steps']} timed steps; a point's steps "
          "of all rounds are pooled. Slowdown = median process CPU time of a step / the median of dtr's "
          "unbudgeted steps of the same run; ratio = budget / dtr's unbudgeted peak of resident storage bytes "
          "(parameters, gradients and optimizer state included). A point that did not complete in a round "
          "(oom: OutOfMemoryError; thrash: the thrash guard's error; timeout: killed at its time limit) "
          "was not run again.", ""]

    # ---- unbudgeted
    rows = []
    for m in cells.models:
        d, t = cells.get(m, "dtr", "plain"), cells.get(m, "pytorch", "plain")
        rows.append([m, f"{d['min_cpu_ms']:.0f} / {d['median_cpu_ms']:.0f}" if ok(d) else "–",
                     f"{t['min_cpu_ms']:.0f} / {t['median_cpu_ms']:.0f}" if ok(t) else "–",
                     fmt(d["vs_pytorch"], 2, "×") if ok(d) else "–",
                     fmt(d["min_cpu_ms"] / t["min_cpu_ms"], 2, "×") if ok(d) and ok(t) else "–",
                     fmt(float(d["peak_bytes"]) / 2**20, 1) if ok(d) else "–",
                     fmt(cells.rss(m, "dtr", "plain"), 0), fmt(cells.rss(m, "pytorch", "plain"), 0),
                     fmt(d["floor"], 2) if ok(d) else "–"])
    md += [f"## Unbudgeted step: dtr against PyTorch {torch_version}", "",
           "CPU ms: min / median of the pooled steps. RSS: peak resident set size above its value once the "
           "model was built, the same measure for both libraries (median over processes). Floor: resident "
           "bytes between steps (parameters, gradients, optimizer state, the loader's inputs: never "
           "evictable) / peak; no budget below it is feasible.", "",
           table(["model", "dtr CPU ms", "PyTorch CPU ms", "dtr / PyTorch (median)", "(min)",
                  "dtr storage peak MiB", "dtr RSS +MiB", "PyTorch RSS +MiB", "floor"], rows), ""]

    # ---- slowdown grid
    ratios = cells.ratios()
    rows = []
    for m in cells.models:
        for h in cells.heuristics():
            row = [slowdown_text(cells.get(m, "dtr", "budget", h, x)) for x in ratios]
            if any(c != "–" for c in row):
                rows.append([m, h] + row)
    md += ["## Slowdown by budget ratio", "",
           table(["model", "heuristic"] + [f"{x:g}" for x in ratios], rows), ""]

    # ---- dtr_eq in detail
    rows = []
    for m in cells.models:
        flops = next((float(p["step_flops"]) for p in cells.points if p["model"] == m and p["library"] == "dtr"
                      and p["variant"] == "plain" and p["step_flops"]), None)
        for x in ratios:
            c = cells.get(m, "dtr", "budget", "dtr_eq", x)
            if c is None:
                continue
            if not ok(c):
                rows.append([m, f"{x:g}", slowdown_text(c), "–", "–", "–", "–", "–", (c["error"] or "")[:90]])
                continue
            share = float(c["recomputed_flops"]) / flops if flops and c["recomputed_flops"] != "" else None
            rows.append([m, f"{x:g}", f"{c['slowdown']:.2f}×", f"{c['slowdown_min']:.2f}×",
                         f"±{100 * c['spread']:.0f}%", fmt(float(c["recomputed_ops"]), 0), fmt(share, 2),
                         fmt(cells.rss(m, "dtr", "budget", "dtr_eq", x), 0), ""])
    md += ["## dtr_eq point by point", "",
           "Slowdown of medians and of minimums; spread = (max − min) / median of the point's steps; replays "
           "and replayed FLOPs (over the unbudgeted step's own) per step are counts that do not depend on "
           "load.", "",
           table(["model", "ratio", "slowdown", "of minimums", "spread", "replays / step", "replayed FLOPs share",
                  "RSS +MiB", "error"], rows), ""]

    # ---- smallest feasible
    if min_feasible:
        rows = []
        for m in cells.models:
            d = cells.get(m, "dtr", "plain")
            rows.append([m, fmt(min_feasible.get(m), 3), fmt(d["floor"], 2) if ok(d) else "–"])
        md += ["## Smallest feasible ratio of dtr_eq", "",
               "`budget_sweep --predict-only --heuristics dtr_eq`: the budget planner bisects the smallest "
               "budget under which a recorded trace of warm-up and measured step completes (to 0.001 of the "
               "peak); an earlier check found it equal to measured runs (README).", "",
               table(["model", "smallest feasible (planner)", "floor"], rows), ""]

    # ---- PyTorch's variants at equal peak
    rows = []
    for m in cells.models:
        d = cells.get(m, "dtr", "plain")
        d_rss = cells.rss(m, "dtr", "plain")
        tp = cells.get(m, "pytorch", "plain")
        dtr_points = [("plain", d, d_rss)] + [
            (f"dtr_eq {c['ratio']}", c, cells.rss(m, "dtr", "budget", "dtr_eq", c["ratio"])) for c in cells.cells
            if c["model"] == m and c["variant"] == "budget" and c["heuristic"] == "dtr_eq" and ok(c)]
        for v in VARIANTS:
            c = cells.get(m, "pytorch", v)
            if c is None:
                continue
            if not ok(c):
                rows.append([m, v, slowdown_text(c) + ": " + (c["error"] or "")[:60]] + ["–"] * 5)
                continue
            rss = cells.rss(m, "pytorch", v)
            fits = [(p[1]["median_cpu_ms"], p[0], p[2]) for p in dtr_points if ok(p[1]) and p[2] is not None
                    and rss is not None and p[2] <= rss]
            best = min(fits) if fits else None
            rows.append([m, v, f"{c['median_cpu_ms']:.0f}", fmt(rss, 0),
                         fmt(c["median_cpu_ms"] / tp["median_cpu_ms"], 2, "×") if ok(tp) else "–",
                         f"{best[1]}: {best[0]:.0f} ms, {best[2]:.0f} MiB" if best else "none at ≤ that RSS",
                         ("yes" if best[0] < c["median_cpu_ms"] else "no") if best else "no"])
    md += [f"## At equal peak: PyTorch {torch_version}'s memory-saving variants against dtr", "",
           "checkpoint: `checkpoint_sequential` at round(√N) segments; sac: selective activation checkpointing "
           "saving matmuls (and convolutions); compile_b: `torch.compile` with "
           "`torch._functorch.config.activation_memory_budget` = b. Peak RSS above the built model, median "
           "over processes (compile: the measured steps' peak, compilation's left out). dtr at ≤ that RSS: "
           "dtr's fastest point (unbudgeted or dtr_eq at a ratio) whose peak RSS is at most the variant's.", "",
           table(["model", "variant", "CPU ms (median)", "RSS +MiB", "vs PyTorch plain", "dtr at ≤ that RSS",
                  "dtr faster"], rows), ""]

    # ---- chain_b2048 against Revolve
    rows = []
    shape = CHAIN_B2048
    layer_flops = 2.0 * shape["batch"] * shape["width"] ** 2
    slot = shape["batch"] * shape["width"] * 4
    d = cells.get("chain_b2048", "dtr", "plain")
    params = next((int(p["parameter_bytes"]) for p in cells.points if p["model"] == "chain_b2048"
                   and p.get("parameter_bytes")), None)
    between = next((int(p["resident_between_steps"]) for p in cells.points if p["model"] == "chain_b2048"
                    and p["variant"] == "plain" and p["library"] == "dtr" and p["outcome"] == "ok"), None)
    for x in ratios:
        c = cells.get("chain_b2048", "dtr", "budget", "dtr_eq", x)
        if c is None or not ok(d) or params is None or between is None:
            continue
        budget = int(int(d["peak_bytes"]) * x)
        never = between - params  # parameters, optimizer state, inputs: all but the gradients
        s = min(shape["layers"] - 1, (budget - never) // slot) if budget >= never else -1
        p = revolve_forward_steps(shape["layers"], s)
        dtr_layers = float(c["recomputed_flops"]) / layer_flops if ok(c) else None
        rows.append([f"{x:g}", s, p if p is not None else "–", p - 63 if p is not None else "–",
                     fmt(dtr_layers, 1) if ok(c) else slowdown_text(c),
                     fmt(dtr_layers / (p - 63), 2) if ok(c) and p is not None and p > 63 else "–"])
    if rows:
        md += ["## chain_b2048 against Revolve", "",
               "Revolve (Griewank & Walther 2000): a slot holds one layer's input (2048 × 512 floats) and the "
               "backward of a layer recomputes its forward, so p(l, s) = t·l − β(s+1, t−1) counts every layer "
               "forward beyond the plain step's. s = (budget − parameters − optimizer state − inputs) / slot "
               "bytes, capped at l − 1 = 63: Revolve is granted the gradients' memory and no working set, so p "
               "is a lower bound at that budget. Its model charges every layer one retaping forward (p ≥ 63 even "
               "when every input fits), which the plain step and dtr avoid by keeping each layer's pre-GELU "
               "output, so p − 63 is the like-for-like figure. dtr layer-equivalents = replayed FLOPs per step / "
               "one layer's forward GEMM (2·2048·512²).", "",
               table(["ratio", "Revolve slots s", "Revolve p", "p − 63", "dtr layer-equivalents",
                      "dtr / (p − 63)"], rows), ""]

    # ---- goals
    goals = []
    for x, goal in GOALS_RATIO.items():
        for m in GOAL_MODELS:
            c = cells.get(m, "dtr", "budget", "dtr_eq", x)
            goals.append([f"slowdown at {x}, {m}", f"≤ {goal}×", slowdown_text(c),
                          "yes" if ok(c) and c["slowdown"] <= goal else "no"])
    c = cells.get("gpt", "dtr", "budget", "dtr_eq", 0.2)
    goals.append(["gpt slowdown at 0.2", "≤ 1.45×", slowdown_text(c), "yes" if ok(c) and c["slowdown"] <= 1.45 else "no"])
    for m in ("gpt", "chain_b2048"):
        x = min_feasible.get(m)
        goals.append([f"smallest feasible, {m}", "≤ 0.15", fmt(x, 3), "yes" if x is not None and x <= 0.15 else "no"])
    for m in GOAL_MODELS:
        d = cells.get(m, "dtr", "plain")
        if ok(d) and d["vs_pytorch"] != "":
            goals.append([f"unbudgeted dtr / PyTorch, {m}", "≤ 1.0×", fmt(d["vs_pytorch"], 2, "×"),
                          "yes" if d["vs_pytorch"] <= 1.0 else "no"])
    md += ["## Goals", "", table(["goal", "target", "measured", "met"], goals), ""]
    return "\n".join(md)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"))
    args = parser.parse_args()
    points = read_csv(os.path.join(args.results, "points.csv"))
    if not points:
        parser.error(f"no rows in {os.path.join(args.results, 'points.csv')} (run benchmarks/sweep.py --full)")
    min_feasible = {r["model"]: float(r["predicted_min_feasible_ratio"])
                    for r in read_csv(os.path.join(args.results, "min_feasible.csv"))
                    if r["point"] == "min_feasible" and r["heuristic"] == "dtr_eq" and r["predicted_min_feasible_ratio"]}
    cells = Cells(points)
    plot(cells, min_feasible, os.path.join(args.results, "sweep.svg"))
    with open(os.path.join(args.results, "summary.md"), "w") as f:
        f.write(summary(cells, min_feasible, points))
    print(f"wrote {os.path.join(args.results, 'sweep.svg')} and summary.md")


if __name__ == "__main__":
    main()
