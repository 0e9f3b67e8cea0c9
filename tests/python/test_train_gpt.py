"""examples/python/train_gpt.py prints the losses of examples/train_gpt (C++) for the
same flags and seed, bitwise (%.9g identifies a float32), with and without a budget."""
import os
import re
import subprocess
import sys

import pytest

import dtr

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("DTR_BUILD_DIR", os.path.join(ROOT, "build"))
CXX = os.path.join(BUILD, "examples", "train_gpt")
PY = os.path.join(ROOT, "examples", "python", "train_gpt.py")
DATA = "/usr/share/games/fortunes"
FLAGS = ["--steps", "4", "--batch-size", "8", "--seq-len", "32", "--layers", "2", "--n-embd", "32",
         "--heads", "2", "--log-interval", "1", "--eval-interval", "2", "--eval-batches", "2",
         "--sample-bytes", "16", "--seed", "5"]


def run(cmd):
    env = dict(os.environ)
    env.pop("DTR_MEMORY_BUDGET", None)
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.dirname(os.path.dirname(dtr.__file__))] + env.get("PYTHONPATH", "").split(os.pathsep))
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout


def losses(stdout):
    """(step, loss, val) of every log line, and the sample."""
    found = re.findall(r"^step +(\d+)/\d+ \| loss (\S+)(?: \| val (\S+))?", stdout, re.M)
    sample = stdout.split("-" * 60)[1] if "-" * 60 in stdout else ""
    return found, sample


@pytest.mark.skipif(not os.path.exists(DATA), reason="needs Debian's fortunes package")
def test_python_example_prints_the_cxx_losses():
    if not os.path.exists(CXX):
        pytest.skip(f"{CXX} was not built (DTR_BUILD_EXAMPLES=OFF)")
    cxx = losses(run([CXX] + FLAGS))
    py = losses(run([sys.executable, PY] + FLAGS))
    assert len(cxx[0]) == 4 and cxx[0][1][2] != ""  # four steps, validation at step 2
    assert py == cxx
    budgeted = run([sys.executable, PY, "--budget-fraction", "0.6"] + FLAGS)
    assert losses(budgeted) == cxx
    evictions = re.search(r"^stats: .* evictions (\d+)", budgeted, re.M)
    assert int(evictions.group(1)) > 0
