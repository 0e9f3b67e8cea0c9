#!/usr/bin/env python3
"""Compares the losses of two train_gpt runs, the second under a memory
budget, and fails unless they are equal and the budget did something.

    train_gpt_losses.py [--labels A,B] UNBUDGETED.log BUDGETED.log

Each log is train_gpt's standard output run with --log-interval 1, whose
lines it reads (examples/train_gpt.cpp):

    step     3/20 | loss 5.43841457 | ...             (every step, %.9g)
    step    20/20 | loss 5.33999014 | val 5.2344439 | ...
    validation loss 5.2344 (...) after step 20; last train loss 5.3400
    stats: peak_bytes ... evictions 123 rematerializations 138 ...

DTR promises the losses of a budgeted run are bitwise those of the run
without one; train_gpt prints them to 9 significant digits, so equal here
means equal as printed. Prints every step side by side and exits 1 when a
log has no step lines or no stats line (the run did not finish), the two
logs cover different steps, any step's training or validation loss differs,
or the budgeted run evicted nothing (then the comparison tested nothing);
else 0. scripts/gpu-check.sh runs it on train_gpt at budget fractions 1.0
and 0.5.
"""

import argparse
import re
import sys

STEP = re.compile(r"^step\s+(\d+)/\d+ \| loss (\S+)(?: \| val (\S+))?")
STATS = re.compile(r"^stats: .*\bevictions (\d+) rematerializations (\d+)")


def parse(text):
    """{step: (loss, val or None)} and (evictions, rematerializations) or None."""
    steps, stats = {}, None
    for line in text.splitlines():
        m = STEP.match(line)
        if m:
            steps[int(m.group(1))] = (m.group(2), m.group(3))
            continue
        m = STATS.match(line)
        if m:
            stats = (int(m.group(1)), int(m.group(2)))
    return steps, stats


def compare(first, second, labels=("unbudgeted", "budgeted")):
    """Prints the comparison of two logs' texts; returns the problems found."""
    (a_steps, a_stats), (b_steps, b_stats) = parse(first), parse(second)
    problems = []
    for label, steps, stats in ((labels[0], a_steps, a_stats), (labels[1], b_steps, b_stats)):
        if not steps:
            problems.append(f"the {label} run printed no step lines (run it with --log-interval 1)")
        if stats is None:
            problems.append(f"the {label} run printed no stats line: it did not finish")
    if problems:
        return problems
    if sorted(a_steps) != sorted(b_steps):
        problems.append(f"the runs logged different steps: {labels[0]} {sorted(a_steps)}, "
                        f"{labels[1]} {sorted(b_steps)}")
    width = max(len(v[0]) for v in a_steps.values())
    print(f"{'step':>5}  {labels[0] + ' loss':>{width + 5}}  {labels[1] + ' loss':>{width + 5}}")
    differing = []
    for step in sorted(set(a_steps) & set(b_steps)):
        (a_loss, a_val), (b_loss, b_val) = a_steps[step], b_steps[step]
        same = a_loss == b_loss and a_val == b_val
        extra = f"   val {a_val} / {b_val}" if a_val or b_val else ""
        print(f"{step:>5}  {a_loss:>{width + 5}}  {b_loss:>{width + 5}}  {'equal' if same else 'DIFFERENT'}{extra}")
        if not same:
            differing.append(step)
    if differing:
        problems.append(f"the losses differ at {len(differing)} step(s), the first at step {differing[0]}")
    print(f"{labels[0]}: {a_stats[0]} evictions, {a_stats[1]} rematerializations; "
          f"{labels[1]}: {b_stats[0]} evictions, {b_stats[1]} rematerializations")
    if b_stats[0] == 0:
        problems.append(f"the {labels[1]} run evicted nothing: its budget never bound, so equal losses prove nothing")
    if not problems:
        print(f"train_gpt: the {len(a_steps)} logged losses are equal at {labels[0]} and {labels[1]}")
    return problems


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("unbudgeted", help="train_gpt's output without a binding budget")
    parser.add_argument("budgeted", help="train_gpt's output under a budget")
    parser.add_argument("--labels", default="unbudgeted,budgeted", help="names of the two runs, comma-separated")
    args = parser.parse_args(argv)
    labels = args.labels.split(",")
    if len(labels) != 2:
        parser.error("--labels takes two names separated by a comma")
    texts = []
    for path in (args.unbudgeted, args.budgeted):
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                texts.append(f.read())
        except OSError as e:
            print(f"train_gpt: FAILED: cannot read {path}: {e.strerror}")
            return 1
    problems = compare(texts[0], texts[1], tuple(labels))
    for p in problems:
        print(f"train_gpt: FAILED: {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
