"""DTR_TRACE from Python: a program ended by SIGTERM, or by Ctrl-C (SIGINT, an unhandled
KeyboardInterrupt), leaves a trace file that is one JSON array as it is (Note [trace on
signals], remat/trace_file.h); a KeyboardInterrupt the program catches leaves the trace open
and the run goes on tracing."""
import json
import os
import signal
import subprocess
import sys
import time

import dtr

# The child: Python's own Ctrl-C handler (whatever the test runner's SIGINT disposition is),
# then ops in a loop under DTR_TRACE until a signal ends it.
LOOP = """
import signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)
import dtr
step = 0
while True:
    a = dtr.randn(16, 16)
    dtr.matmul(a, a).sum().item()
    if step == 0:
        print("running", flush=True)
    step += 1
    time.sleep(0.0005)
"""

# The child: catches one KeyboardInterrupt, traces on, exits normally.
CAUGHT = """
import os, signal
signal.signal(signal.SIGINT, signal.default_int_handler)
import dtr
a = dtr.randn(4, 4)
dtr.matmul(a, a).sum().item()
try:
    os.kill(os.getpid(), signal.SIGINT)
    while True:
        pass
except KeyboardInterrupt:
    pass
(a + 1).sum().item()
"""


def _env(trace):
    env = {k: v for k, v in os.environ.items() if not k.startswith("DTR_")}
    env["DTR_TRACE"] = str(trace)
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(os.path.abspath(dtr.__file__)))
    return env


def _signalled_run(tmp_path, sig):
    trace = tmp_path / "trace.json"
    child = subprocess.Popen([sys.executable, "-c", LOOP], env=_env(trace), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "running\n", child.stderr.read()
        time.sleep(1.5)  # past the first flush: events are on disk and more are buffered
        child.send_signal(sig)
        _, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
    return child.returncode, trace, err


def _events(trace):
    with open(trace) as f:
        return json.load(f)  # one JSON array, as it is on disk


def test_sigterm_leaves_a_closed_trace(tmp_path):
    rc, trace, err = _signalled_run(tmp_path, signal.SIGTERM)
    assert rc == -signal.SIGTERM, err
    assert any(e["name"] == "matmul" for e in _events(trace))


def test_ctrl_c_leaves_a_closed_trace(tmp_path):
    rc, trace, err = _signalled_run(tmp_path, signal.SIGINT)
    # An unhandled KeyboardInterrupt: Python finalizes, then ends itself with SIGINT.
    assert rc == -signal.SIGINT, err
    assert "KeyboardInterrupt" in err
    assert any(e["name"] == "matmul" for e in _events(trace))


def test_a_caught_keyboard_interrupt_leaves_the_trace_open(tmp_path):
    trace = tmp_path / "trace.json"
    r = subprocess.run([sys.executable, "-c", CAUGHT], env=_env(trace), capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    names = [e["name"] for e in _events(trace)]
    assert "matmul" in names
    assert names.index("add_scalar") > names.index("matmul")  # traced after the interrupt
