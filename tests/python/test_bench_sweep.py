"""The benchmark sweep's argument checks, its reading of a failed child's
error, and plot_sweep's Revolve count (benchmarks/sweep.py, plot_sweep.py).
No sweep runs here: every bad argument must stop it before the first point."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import plot_sweep  # noqa: E402
import sweep  # noqa: E402


def run_sweep(tmp_path, *args):
    cmd = [sys.executable, os.path.join(ROOT, "benchmarks", "sweep.py"), "--out", str(tmp_path / "out"),
           "--dtr", "/bin/true", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("args, message", [
    (["--ratios", "abc"], "--ratios 'abc': expected comma-separated numbers"),
    (["--ratios", "0.5,1.5"], "every ratio must lie in (0, 1]"),
    (["--other-heuristics", "lru", "--other-ratios", "x"], "--other-ratios 'x': expected"),
    (["--other-ratios", "0.5"], "--other-ratios needs --other-heuristics"),
    (["--quick", "--full"], "--quick and --full exclude each other"),
    (["--steps", "0"], "--steps >= 1"),
])
def test_bad_arguments_stop_before_any_point(tmp_path, args, message):
    proc = run_sweep(tmp_path, *args)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "out" / "points.csv").exists()


def test_a_missing_dtr_binary_is_named(tmp_path):
    cmd = [sys.executable, os.path.join(ROOT, "benchmarks", "sweep.py"), "--out", str(tmp_path),
           "--dtr", str(tmp_path / "no_such_zoo_step")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "no_such_zoo_step: not an executable" in proc.stderr


def test_a_failed_childs_message_keeps_its_error_lines():
    option = ("zoo_step: malformed DTR_* environment variable:\n"
              "  DTR_HEURISTIC: unknown heuristic \"foo\"; accepted forms: dtr_eq\n"
              "This error is thrown once; the program may catch it\n")
    assert sweep.stderr_message(option) == ("zoo_step: malformed DTR_* environment variable: "
                                            "DTR_HEURISTIC: unknown heuristic \"foo\"; accepted forms: dtr_eq")
    model = "zoo_step: model zoo: no model called 'nosuch' (known: chain)\nusage: zoo_step --model NAME\n"
    assert sweep.stderr_message(model) == "zoo_step: model zoo: no model called 'nosuch' (known: chain)"
    assert sweep.stderr_message("Traceback\n  File x\nRuntimeError: boom\n") == "RuntimeError: boom"
    assert sweep.stderr_message("usage: zoo_step\n") == ""


def test_a_point_without_a_json_result_is_an_error():
    r = sweep.run_point(["/bin/true"], dict(os.environ), 60)
    assert r["outcome"] == "error"
    assert r["error"] == "no JSON result on stdout"


def test_revolve_forward_steps():
    # Every input fits: one retaping forward per layer but the last.
    assert plot_sweep.revolve_forward_steps(64, 63) == 63
    # No slot: every state recomputed from the input, l(l-1)/2.
    assert plot_sweep.revolve_forward_steps(64, 0) == 2016
    # Griewank's p(l, s) = t*l - C(s+t, t-1), checked by hand for l = 10, s = 2:
    # t = 3 (C(4, 2) = 6 < 10 <= C(5, 2) = 10), p = 30 - C(5, 3) = 20.
    assert plot_sweep.revolve_forward_steps(10, 2) == 20
    # The committed chain_b2048 rows (benchmarks/results/summary.md).
    assert [plot_sweep.revolve_forward_steps(64, s) for s in (55, 37, 19)] == [71, 89, 107]
    assert plot_sweep.revolve_forward_steps(64, -1) is None


def test_unusable_paths_are_argument_errors(tmp_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    for args, message in [(["--torch-python", str(tmp_path / "no_python")], "--torch-python"),
                          (["--out", str(a_file)], "cannot make the directory")]:
        proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "sweep.py"), "--dtr", "/bin/true",
                               "--out", str(tmp_path / "out"), *args], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2, args
        assert message in proc.stderr and "Traceback" not in proc.stderr
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "sweep.py"), "--dtr", str(tmp_path),
                           "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "not an executable" in proc.stderr


def test_a_child_that_cannot_run_or_prints_bad_json_is_a_failed_point(tmp_path):
    r = sweep.run_point([str(tmp_path / "missing")], dict(os.environ), 60)
    assert r["outcome"] == "error" and "cannot run" in r["error"]
    r = sweep.run_point(["/bin/echo", "{not json"], dict(os.environ), 60)
    assert r["outcome"] == "error" and r["error"].startswith("unreadable JSON result")
