#!/usr/bin/python3
"""Plots and tables of the budget sweep.

    /usr/bin/python3 benchmarks/plot_sweep.py [--results benchmarks/results]

Reads sweep.csv (benchmarks/budget_sweep.cpp) and, when present, revolve.csv
(the sweep of chain_b2048) and pytorch.csv (benchmarks/pytorch_zoo.py) from
--results and writes there:

  sweep.svg   slowdown against budget ratio, one panel per model, one line
              per eviction heuristic; the smallest feasible ratio of dtr_eq
              as a dotted line; static checkpointing (dtr) and PyTorch's
              variants (plain, checkpointed, selective checkpointing,
              torch.compile under activation memory budgets) as marked points
  summary.md  the tables quoted in README.md

Needs Debian's python3-matplotlib. Slowdowns are ratios of median process
CPU times (see budget_sweep.cpp); the PyTorch points are placed by the
measure both libraries share: x = PyTorch's peak-RSS increase over dtr's
unbudgeted one (for torch.compile the peak of the measured steps alone,
compilation's own left out), y = PyTorch's CPU time over dtr's unbudgeted
one.
"""

import argparse
import csv
import math
import os
from collections import defaultdict

MODELS = ["chain", "gpt", "resnet", "unet", "lstm", "chain_b2048"]
HEURISTICS = ["dtr_eq", "dtr", "dtr_local", "lru", "size", "msps"]
GOALS_RATIO = {0.5: 1.08, 0.3: 1.25}


def read_csv(path):
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def num(value):
    return float(value) if value not in ("", None) else math.nan


def fmt(x, digits=2, suffix=""):
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}{suffix}"


class Sweep:
    def __init__(self, rows):
        self.rows = rows
        self.models = [m for m in MODELS if any(r["model"] == m for r in rows)]
        self.models += sorted({r["model"] for r in rows} - set(self.models))

    def get(self, model, point, heuristic=None, ratio=None):
        for r in self.rows:
            if r["model"] != model or r["point"] != point:
                continue
            if heuristic is not None and r["heuristic"] != heuristic:
                continue
            if ratio is not None and abs(num(r["ratio"]) - ratio) > 1e-6:
                continue
            return r
        return None

    def curve(self, model, heuristic):
        """(ratio, slowdown or nan when infeasible), by decreasing ratio."""
        pts = [(num(r["ratio"]), num(r["slowdown"]) if r["feasible"] == "1" else math.nan)
               for r in self.rows if r["model"] == model and r["point"] == "budget" and r["heuristic"] == heuristic]
        return sorted(pts, reverse=True)

    def slowdown(self, model, heuristic, ratio):
        r = self.get(model, "budget", heuristic, ratio)
        if r is None:
            return None
        return num(r["slowdown"]) if r["feasible"] == "1" else math.inf

    def heuristics(self):
        present = {r["heuristic"] for r in self.rows if r["point"] == "budget"}
        return [h for h in HEURISTICS if h in present] + sorted(present - set(HEURISTICS))


def torch_row(torch_rows, library, model, mode):
    for r in torch_rows:
        if r["library"] == library and r["model"] == model and r["mode"] == mode:
            return r
    return None


PYTORCH_LABELS = {"plain": "PyTorch", "checkpoint": "PyTorch checkpoint", "sac": "PyTorch SAC"}
PYTORCH_MARKERS = {"plain": "P", "checkpoint": "X", "sac": "D"}


def pytorch_label(mode):
    if mode.startswith("compile_"):
        return f"PyTorch compile, budget {mode[len('compile_'):]}"
    return PYTORCH_LABELS.get(mode, f"PyTorch {mode}")


def rss_mib(row):
    """The RSS increase of a pytorch.csv row: under torch.compile the peak of
    the measured steps alone (compilation's own peak left out), else the
    peak of the whole run."""
    if row["mode"].startswith("compile_") and row.get("rss_steps_peak_delta_mib"):
        return num(row["rss_steps_peak_delta_mib"])
    return num(row["rss_peak_delta_mib"])


def mode_order(row):
    """plain, checkpoint, sac, then compile_<b> by decreasing b, then the rest."""
    mode = row["mode"]
    if mode.startswith("compile_"):
        return (3, -num(mode[len("compile_"):]))
    return ({"plain": 0, "checkpoint": 1, "sac": 2}.get(mode, 4), 0.0)


def torch_version(torch_rows):
    versions = sorted({r.get("version") or "" for r in torch_rows if r["library"] == "pytorch"} - {""})
    return ", ".join(versions) if versions else "1.13"


def pytorch_points(torch_rows, model):
    """[(mode, label, x, y)]: each PyTorch variant relative to dtr plain, by RSS and CPU time."""
    base = torch_row(torch_rows, "dtr", model, "plain")
    if base is None or not num(base["rss_peak_delta_mib"]) > 0:
        return []
    out = []
    for r in torch_rows:
        if r["library"] != "pytorch" or r["model"] != model or r.get("error"):
            continue
        out.append((r["mode"], pytorch_label(r["mode"]), rss_mib(r) / num(base["rss_peak_delta_mib"]),
                    num(r["median_cpu_ms"]) / num(base["median_cpu_ms"])))
    return out


def plot(sweep, torch_rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = sweep.models
    cols = min(3, len(models))
    rows = math.ceil(len(models) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.9 * rows + 1.0), squeeze=False)
    styles = dict(zip(HEURISTICS, ["o-", "s--", "^--", "v:", "d:", "x:"]))
    compile_modes = sorted({r["mode"] for r in torch_rows if r["mode"].startswith("compile_")})
    for ax, model in zip(axes.flat, models):
        top, bottom = 1.0, 0.8
        for h in sweep.heuristics():
            pts = [(x, y) for x, y in sweep.curve(model, h) if not math.isnan(y)]
            if not pts:
                continue
            xs, ys = zip(*pts)
            top, bottom = max(top, max(ys)), min(bottom, min(ys) - 0.05)
            ax.plot(xs, ys, styles.get(h, "o-"), label=h, lw=2 if h == "dtr_eq" else 1, ms=4)
        mf = sweep.get(model, "min_feasible", "dtr_eq")
        if mf is not None:
            ax.axvline(num(mf["ratio"]), color="grey", ls=":", lw=1, label="dtr_eq smallest feasible")
        ck = sweep.get(model, "checkpoint")
        if ck is not None and ck["feasible"] == "1":
            ax.plot([num(ck["ratio"])], [num(ck["slowdown"])], "*", ms=13, color="black", label="static √N checkpoint (dtr)")
            top, bottom = max(top, num(ck["slowdown"])), min(bottom, num(ck["slowdown"]) - 0.05)
        for mode, label, x, y in pytorch_points(torch_rows, model):
            compiled = mode in compile_modes
            marker = "^v<>"[compile_modes.index(mode) % 4] if compiled else PYTORCH_MARKERS.get(mode, "o")
            ax.plot([x], [y], marker, ms=9, color="tab:purple" if compiled else "tab:red", alpha=0.8,
                    label=label + " (RSS, CPU time vs dtr)")
            top, bottom = max(top, y), min(bottom, y - 0.05)
        ax.axhline(1.0, color="grey", lw=0.5)
        ax.set_title(model)
        ax.set_xlim(1.05, 0)
        ax.set_ylim(max(bottom, 0.0), min(top * 1.08, 6.0))
        ax.set_xlabel("budget / unbudgeted peak")
        ax.set_ylabel("slowdown (CPU time)")
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
    fig.suptitle("dtr: slowdown against memory budget (one thread; slowdowns above 6× are off the chart)")
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    fig.savefig(path)


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def slowdown_cell(x):
    if x is None:
        return "–"
    return "infeasible" if math.isinf(x) else f"{x:.2f}×"


def summary(sweep, torch_rows):
    md = ["# Budget sweep results", "",
          "Generated by `benchmarks/plot_sweep.py` from `sweep.csv`, `revolve.csv` and `pytorch.csv`. Slowdown = median "
          "process CPU time of a training step under the budget / without one; ratio = budget / unbudgeted "
          "peak of resident tensor-storage bytes (parameters, gradients and optimizer state included). One "
          "thread.", ""]

    # ---- unbudgeted step, dtr against PyTorch
    rows = []
    for m in sweep.models:
        base = sweep.get(m, "unbudgeted")
        d = torch_row(torch_rows, "dtr", m, "plain")
        t = torch_row(torch_rows, "pytorch", m, "plain")
        peak = num(base["peak_bytes"]) if base else math.nan
        const = num(base["constant_bytes"]) if base else math.nan
        rows.append([m, fmt(num(d["median_cpu_ms"]), 0) if d else "–", fmt(num(t["median_cpu_ms"]), 0) if t else "–",
                     fmt(num(d["median_cpu_ms"]) / num(t["median_cpu_ms"]), 2, "×") if d and t else "–",
                     fmt(peak / 2**20, 1), fmt(num(d["rss_peak_delta_mib"]), 0) if d else "–",
                     fmt(num(t["rss_peak_delta_mib"]), 0) if t else "–", fmt(const / peak, 2)])
    md += [f"## Unbudgeted step: dtr against PyTorch {torch_version(torch_rows)}", "",
           "CPU ms: median process CPU time of one step (fresh process per configuration, `pytorch_zoo.py`; "
           "the smallest of the rounds' medians when it ran several rounds). "
           "RSS: peak resident set size (ru_maxrss) above its value after the model was built, the same "
           "measure for both libraries. Between steps: resident bytes between two steps (parameters, "
           "gradients, optimizer state, inputs) / peak. All but the inputs are never evictable and all are "
           "resident together at the end of backward, so budgets much below this ratio cannot be feasible "
           "(inputs drawn with randn are evictable: the LSTM's are 8 MiB of its 16.8).", "",
           table(["model", "dtr CPU ms", "PyTorch CPU ms", "dtr / PyTorch", "dtr storage peak MiB",
                  "dtr RSS +MiB", "PyTorch RSS +MiB", "between steps"], rows), ""]

    # ---- slowdown grid
    ratios = sorted({num(r["ratio"]) for r in sweep.rows if r["point"] == "budget"}, reverse=True)
    rows = []
    for m in sweep.models:
        for h in sweep.heuristics():
            cells = [slowdown_cell(sweep.slowdown(m, h, x)) for x in ratios]
            if any(c != "–" for c in cells):
                rows.append([m, h] + cells)
    md += ["## Slowdown by budget ratio", "", table(["model", "heuristic"] + [f"{x:g}" for x in ratios], rows), ""]

    # ---- smallest feasible ratio
    hs = sweep.heuristics()
    rows = []
    for m in sweep.models:
        cells = []
        for h in hs:
            r = sweep.get(m, "min_feasible", h)
            cells.append(fmt(num(r["ratio"]), 3) if r else "–")
        rows.append([m] + cells)
    md += ["## Smallest feasible ratio (bisection to 0.01, one warm-up step and one step per probe)", "",
           table(["model"] + hs, rows), ""]

    # ---- static checkpointing
    rows = []
    for m in sweep.models:
        ck = sweep.get(m, "checkpoint")
        base_d = torch_row(torch_rows, "dtr", m, "plain")
        dc = torch_row(torch_rows, "dtr", m, "checkpoint")
        tp = torch_row(torch_rows, "pytorch", m, "plain")
        tc = torch_row(torch_rows, "pytorch", m, "checkpoint")
        eq = None
        if ck is not None and ck["feasible"] == "1":
            # dtr_eq at the nearest grid ratio at or below the checkpoint's
            below = [x for x in ratios if x <= num(ck["ratio"]) + 1e-9]
            if below:
                eq = (below[0], sweep.slowdown(m, "dtr_eq", below[0]))
        rows.append([m, fmt(num(ck["ratio"]), 2) if ck else "–", slowdown_cell(num(ck["slowdown"])) if ck and ck["feasible"] == "1" else "–",
                     f"{slowdown_cell(eq[1])} at {eq[0]:g}" if eq else "–",
                     fmt(num(dc["rss_peak_delta_mib"]) / num(base_d["rss_peak_delta_mib"]), 2) if dc and base_d else "–",
                     fmt(num(tc["rss_peak_delta_mib"]) / num(tp["rss_peak_delta_mib"]), 2) if tc and tp else "–",
                     fmt(num(tc["median_cpu_ms"]) / num(tp["median_cpu_ms"]), 2, "×") if tc and tp else "–"])
    md += ["## Static √N checkpointing (no budget)", "",
           "dtr: `dtr::checkpoint_sequential` / `dtr::checkpoint` at round(√N) segments (U-Net: each of its "
           "five blocks); its ratio is its storage peak / the plain step's. PyTorch: "
           "`torch.utils.checkpoint` with the same segments; its memory ratio is by RSS.", "",
           table(["model", "dtr ratio", "dtr slowdown", "dtr_eq at that budget", "dtr RSS ratio",
                  "PyTorch RSS ratio", "PyTorch slowdown"], rows), ""]

    # ---- PyTorch's variants
    rows = []
    torch_models = list(dict.fromkeys(r["model"] for r in torch_rows if r["library"] == "pytorch"))
    for m in [m for m in sweep.models if m in torch_models] + [m for m in torch_models if m not in sweep.models]:
        tp = torch_row(torch_rows, "pytorch", m, "plain")
        for r in sorted((r for r in torch_rows if r["library"] == "pytorch" and r["model"] == m), key=mode_order):
            if r.get("error"):
                rows.append([m, r["mode"], "failed: " + r["error"][:80], "–", "–", "–"])
                continue
            rows.append([m, r["mode"], fmt(num(r["median_cpu_ms"]), 0), fmt(rss_mib(r), 0),
                         fmt(num(r["median_cpu_ms"]) / num(tp["median_cpu_ms"]), 2, "×") if tp else "–",
                         fmt(rss_mib(r) / rss_mib(tp), 2) if tp else "–"])
    if any(r[1] not in ("plain", "checkpoint") for r in rows):
        md += [f"## PyTorch {torch_version(torch_rows)}: checkpointing, selective checkpointing, torch.compile", "",
               "checkpoint: `torch.utils.checkpoint` at round(√N) segments; sac: selective activation "
               "checkpointing of the same segments, saving matmul and convolution outputs; compile_b: "
               "`torch.compile` of forward and loss with `activation_memory_budget` = b. RSS +MiB: peak "
               "resident set size above its value after the model was built (for compile_b the peak of the "
               "measured steps, compilation left out). Ratios against PyTorch plain.", "",
               table(["model", "mode", "CPU ms", "RSS +MiB", "CPU / plain", "RSS / plain"], rows), ""]

    # ---- chain against Revolve
    rows = []
    for r in sweep.rows:
        if r["revolve_recomputations"] == "" or r["feasible"] != "1":
            continue
        if r["point"] not in ("budget", "min_feasible", "checkpoint", "unbudgeted"):
            continue
        dtr_layers = num(r["layer_recomputations_per_step"])
        p = num(r["revolve_recomputations"])
        excess = p - 63  # beyond the l − 1 = 63 retaping forwards of a schedule that stores every input
        rows.append([r["model"], r["point"], r["heuristic"], fmt(num(r["ratio"]), 3), r["revolve_slots"], int(p),
                     int(excess), fmt(num(r["recomputed_ops_per_step"]), 0), fmt(dtr_layers, 1),
                     fmt(dtr_layers / p, 2) if p > 0 else "–"])
    if rows:
        md += ["## The chains against Revolve", "",
               "Revolve (Griewank): a slot holds one layer's input (batch × width floats) and the backward "
               "of a layer recomputes that layer's forward, so p(l, s) = t·l − β(s+1, t−1) counts every "
               "layer forward beyond the plain step's. s = (budget − parameters − optimizer state − inputs) "
               "/ slot bytes, capped at l − 1 = 63: Revolve is granted the gradients' memory and no working "
               "set, so p is a lower bound at that budget. dtr layer-equivalents = recomputed FLOPs / one "
               "layer's forward GEMM FLOPs (2·batch·512²), so a replayed GELU counts as a small fraction of "
               "a layer; static checkpointing's count is its recomputed layers. Revolve's model charges every "
               "layer one retaping forward (p ≥ l − 1 = 63 even when every input fits), which the plain step and "
               "dtr avoid by keeping each layer's pre-GELU output; p − 63, Revolve's forwards beyond that, is the "
               "closer like-for-like figure but not a proven bound.", "",
               table(["model", "point", "heuristic", "ratio", "Revolve slots s", "Revolve p", "p − 63", "dtr replayed ops",
                      "dtr layer-equivalents", "dtr / Revolve"], rows), ""]

    # ---- goals
    goals = []
    zoo = [m for m in sweep.models if m != "chain_b2048"]  # the auxiliary Revolve chain has no goals
    for ratio, goal in GOALS_RATIO.items():
        for m in zoo:
            v = sweep.slowdown(m, "dtr_eq", ratio)
            goals.append([f"slowdown at {ratio:g}, {m}", f"≤ {goal}×", slowdown_cell(v),
                          "yes" if v is not None and v <= goal else "no"])
    v = sweep.slowdown("gpt", "dtr_eq", 0.2)
    goals.append(["gpt slowdown at 0.2", "≤ 1.45×", slowdown_cell(v), "yes" if v is not None and v <= 1.45 else "no"])
    for m in ("chain", "gpt"):
        r = sweep.get(m, "min_feasible", "dtr_eq")
        x = num(r["ratio"]) if r else None
        goals.append([f"smallest feasible, {m}", "≤ 0.15", fmt(x, 3), "yes" if x is not None and x <= 0.15 else "no"])
    for m in zoo:
        d = torch_row(torch_rows, "dtr", m, "plain")
        t = torch_row(torch_rows, "pytorch", m, "plain")
        if d and t:
            x = num(d["median_cpu_ms"]) / num(t["median_cpu_ms"])
            goals.append([f"unbudgeted dtr / PyTorch, {m}", "≤ 1.0×", fmt(x, 2, "×"), "yes" if x <= 1.0 else "no"])
    md += ["## Goals", "", table(["goal", "target", "measured", "met"], goals), ""]
    return "\n".join(md)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"))
    args = parser.parse_args()
    sweep_rows = read_csv(os.path.join(args.results, "sweep.csv"))
    sweep_rows += read_csv(os.path.join(args.results, "revolve.csv"))
    if not sweep_rows:
        parser.error(f"no rows in {os.path.join(args.results, 'sweep.csv')}")
    torch_rows = read_csv(os.path.join(args.results, "pytorch.csv"))
    sweep = Sweep(sweep_rows)
    plot(sweep, torch_rows, os.path.join(args.results, "sweep.svg"))
    with open(os.path.join(args.results, "summary.md"), "w") as f:
        f.write(summary(sweep, torch_rows))
    print(f"wrote {os.path.join(args.results, 'sweep.svg')} and summary.md")


if __name__ == "__main__":
    main()
