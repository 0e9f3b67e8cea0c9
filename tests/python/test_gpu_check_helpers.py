"""The checkers scripts/gpu-check.sh runs on a GPU machine, tested here on
fixtures, since this machine's GPU checks cannot run:

- scripts/gtest_summary.py on reports in gtest_reports/, written by
  GoogleTest 1.12's --gtest_output=json from a program of five tests
  (A.Passes, A.Fails, A.Skips (GTEST_SKIP), A.DISABLED_Off, B.Passes) under
  the filters the file names say;
- scripts/train_gpt_losses.py on train_gpt's log lines (examples/train_gpt.cpp);
- scripts/zoo_compare.py on zoo_step's and pytorch_zoo.py --child's JSON lines.
"""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REPORTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gtest_reports")


def run(script, *args):
    return subprocess.run([sys.executable, os.path.join(ROOT, "scripts", script), *map(str, args)],
                          capture_output=True, text=True, timeout=60)


# ---- gtest_summary.py


@pytest.mark.parametrize("report, code, line, problem", [
    ("passed.json", 0, "t: 2 run, 0 failed, 0 skipped, 0 disabled (2 selected)", None),
    ("failed.json", 1, "t: 3 run, 1 failed, 0 skipped, 0 disabled (3 selected)", "1 test(s) failed"),
    ("skipped.json", 1, "t: 1 run, 0 failed, 1 skipped, 0 disabled (2 selected)", "1 test(s) skipped"),
    ("no_match.json", 1, "t: 0 run, 0 failed, 0 skipped, 0 disabled (0 selected)",
     "no test ran: the filter matched no test"),
    ("disabled.json", 0, "t: 1 run, 0 failed, 0 skipped, 1 disabled (2 selected)", None),
])
def test_gtest_summary_counts_and_fails_on_failures_skips_and_empty_runs(report, code, line, problem):
    proc = run("gtest_summary.py", "--name", "t", os.path.join(REPORTS, report))
    assert proc.returncode == code, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[0] == line
    if problem:
        assert f"t: FAILED: {problem}" in proc.stdout
    else:
        assert "FAILED" not in proc.stdout


def test_gtest_summary_names_the_failed_and_skipped_tests():
    assert "  failed: A.Fails" in run("gtest_summary.py", os.path.join(REPORTS, "failed.json")).stdout
    assert "  skipped: A.Skips" in run("gtest_summary.py", os.path.join(REPORTS, "skipped.json")).stdout
    assert "  disabled: A.DISABLED_Off" in run("gtest_summary.py", os.path.join(REPORTS, "disabled.json")).stdout


def test_gtest_summary_fails_without_a_readable_report(tmp_path):
    # A program that crashed or was killed leaves no report, or half of one.
    proc = run("gtest_summary.py", tmp_path / "none.json")
    assert proc.returncode == 1
    assert "no report at" in proc.stdout and "crashed or was killed" in proc.stdout
    half = tmp_path / "half.json"
    with open(os.path.join(REPORTS, "passed.json")) as f:
        half.write_text(f.read()[:300])
    proc = run("gtest_summary.py", half)
    assert proc.returncode == 1 and "unreadable report" in proc.stdout
    other = tmp_path / "other.json"
    other.write_text("[1, 2]")
    proc = run("gtest_summary.py", other)
    assert proc.returncode == 1 and "is not a gtest JSON report" in proc.stdout


def test_gtest_summary_counts_a_failure_outside_any_test(tmp_path):
    with open(os.path.join(REPORTS, "passed.json")) as f:
        report = json.load(f)
    report["failures"] = 1  # a global environment's SetUp failed
    path = tmp_path / "env.json"
    path.write_text(json.dumps(report))
    proc = run("gtest_summary.py", path)
    assert proc.returncode == 1
    assert "1 failed" in proc.stdout.splitlines()[0]


# ---- train_gpt_losses.py

HEAD = """train_gpt: 0.24M parameters (layers 4, n_embd 64, heads 4, context 64), device cpu
memory: one training step needs 44.5 MiB with no budget; budget {f} x that = 22.2 MiB
"""
STEPS = [
    "step     1/3 | loss 5.563519 | 5718 tok/s | resident 2.7 MiB | peak 22.2 MiB",
    "step     2/3 | loss 5.51342916 | 6687 tok/s | resident 2.7 MiB | peak 22.2 MiB",
    "step     3/3 | loss 5.43841457 | val 5.2344439 | 6211 tok/s | resident 2.7 MiB",
]
TAIL = """validation loss 5.2344 (7.552 bits per byte) after step 3; last train loss 5.4384
stats: peak_bytes 23290880 budget_bytes 23327236 unbudgeted_peak_bytes 46654472 evictions {e} rematerializations {r} recompute_seconds 0.140 train_seconds 1.422
"""


def log(tmp_path, name, steps=STEPS, evictions=0, remats=0, tail=True):
    text = HEAD.format(f=name) + "\n".join(steps) + "\n" + (TAIL.format(e=evictions, r=remats) if tail else "")
    path = tmp_path / f"{name}.log"
    path.write_text(text)
    return path


def test_equal_losses_under_a_binding_budget_pass(tmp_path):
    proc = run("train_gpt_losses.py", "--labels", "1.0,0.5", log(tmp_path, "1.0"),
               log(tmp_path, "0.5", evictions=123, remats=138))
    assert proc.returncode == 0, proc.stdout
    assert "train_gpt: the 3 logged losses are equal at 1.0 and 0.5" in proc.stdout
    assert "0.5: 123 evictions, 138 rematerializations" in proc.stdout
    assert proc.stdout.count("equal") >= 3


def test_a_loss_that_differs_in_the_last_printed_digit_fails(tmp_path):
    other = STEPS[:1] + ["step     2/3 | loss 5.51342917 | 6687 tok/s"] + STEPS[2:]
    proc = run("train_gpt_losses.py", log(tmp_path, "a"), log(tmp_path, "b", steps=other, evictions=5))
    assert proc.returncode == 1
    assert "DIFFERENT" in proc.stdout
    assert "the losses differ at 1 step(s), the first at step 2" in proc.stdout


def test_a_different_validation_loss_fails(tmp_path):
    other = STEPS[:2] + ["step     3/3 | loss 5.43841457 | val 5.2344440 | 6211 tok/s"]
    proc = run("train_gpt_losses.py", log(tmp_path, "a"), log(tmp_path, "b", steps=other, evictions=5))
    assert proc.returncode == 1 and "first at step 3" in proc.stdout


@pytest.mark.parametrize("case, message", [
    ("no_evictions", "the budgeted run evicted nothing"),
    ("unfinished", "the budgeted run printed no stats line: it did not finish"),
    ("no_steps", "the budgeted run printed no step lines"),
    ("fewer_steps", "the runs logged different steps"),
])
def test_comparisons_that_prove_nothing_fail(tmp_path, case, message):
    budgeted = {
        "no_evictions": dict(evictions=0),
        "unfinished": dict(evictions=9, tail=False),
        "no_steps": dict(steps=[], evictions=9),
        "fewer_steps": dict(steps=STEPS[:2], evictions=9),
    }[case]
    proc = run("train_gpt_losses.py", log(tmp_path, "a"), log(tmp_path, "b", **budgeted))
    assert proc.returncode == 1
    assert f"train_gpt: FAILED: {message}" in proc.stdout


def test_an_unreadable_log_fails(tmp_path):
    proc = run("train_gpt_losses.py", tmp_path / "missing.log", log(tmp_path, "b", evictions=1))
    assert proc.returncode == 1 and "cannot read" in proc.stdout


# ---- zoo_compare.py


def zoo_line(tmp_path, name, **fields):
    base = {"library": "dtr", "outcome": "ok", "model": "gpt", "budget_bytes": -1, "median_ms": 10.0,
            "min_ms": 9.5, "loss": 5.123456, "peak_bytes": 100 << 20, "evictions": 0.0}
    base.update(fields)
    path = tmp_path / f"{name}.log"
    path.write_text("some text on stderr\n" + json.dumps(base) + "\n")
    return path


def test_zoo_compare_prints_every_run_and_passes_equal_losses(tmp_path):
    torch = tmp_path / "torch.log"
    torch.write_text(json.dumps({"library": "torch", "median_ms": 8.0, "min_ms": 7.9, "loss": 5.2}) + "\n")
    proc = run("zoo_compare.py", "--model", "gpt", zoo_line(tmp_path, "plain"),
               zoo_line(tmp_path, "half", budget_bytes=50 << 20, median_ms=12.0, evictions=40.0, peak_bytes=50 << 20),
               torch)
    assert proc.returncode == 0, proc.stdout
    assert "dtr, under the budget" in proc.stdout and "(budget 50.0 MiB)" in proc.stdout
    assert "PyTorch eager" in proc.stdout
    assert "1.25x without a budget, 1.50x under it" in proc.stdout


@pytest.mark.parametrize("half, message", [
    (dict(loss=5.123457, evictions=3.0), "loss 5.123457 differs from the unbudgeted 5.123456"),
    (dict(evictions=0.0), "evicted nothing"),
    (dict(outcome="oom", error="budget too small"), "outcome oom: budget too small"),
])
def test_zoo_compare_fails_when_the_budgeted_run_is_not_the_unbudgeted_one(tmp_path, half, message):
    proc = run("zoo_compare.py", "--model", "gpt", zoo_line(tmp_path, "plain"), zoo_line(tmp_path, "half", **half))
    assert proc.returncode == 1
    assert message in proc.stdout


def test_zoo_compare_fails_without_dtr_figures_and_reports_a_failed_peer(tmp_path):
    empty = tmp_path / "empty.log"
    empty.write_text("zoo_step: error: no CUDA device\n")
    proc = run("zoo_compare.py", "--model", "resnet", zoo_line(tmp_path, "plain"), empty)
    assert proc.returncode == 1 and "has no JSON line" in proc.stdout
    torch = tmp_path / "torch.log"
    torch.write_text(json.dumps({"library": "torch", "error": "CUDA not available"}) + "\n")
    proc = run("zoo_compare.py", "--model", "resnet", zoo_line(tmp_path, "plain"),
               zoo_line(tmp_path, "half", evictions=2.0), torch)
    assert proc.returncode == 0, proc.stdout
    assert "CUDA not available" in proc.stdout and "no PyTorch figure to compare with" in proc.stdout
