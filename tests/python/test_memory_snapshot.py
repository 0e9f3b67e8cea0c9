"""dtr's memory snapshots read by PyTorch's own tool, torch.cuda._memory_viz: a small MLP
trains without and under a budget with the history recorded, and what the snapshot's
trace says (allocations, the peak as the visualizer draws it, the evictions and
rematerializations tagged in the frames) equals dtr.memory.stats()."""
import json
import os
import pickle
import subprocess
import sys

import pytest

import dtr

torch = pytest.importorskip("torch", reason="needs PyTorch (Debian's python3-torch) for its _memory_viz")
from torch.cuda import _memory_viz  # noqa: E402  (imports without CUDA)

CHILD = r"""
import json, sys
import dtr
import dtr.nn as nn
import dtr.nn.functional as F
path, budget = sys.argv[1], int(sys.argv[2])
dtr.memory._record_memory_history()
dtr.memory.reset_stats()
dtr.manual_seed(11)
net = nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 128), nn.GELU(),
                    nn.Linear(128, 128), nn.GELU(), nn.Linear(128, 10))
opt = dtr.optim.AdamW(net.parameters(), lr=1e-3)
if budget > 0:
    dtr.memory.set_budget(budget)
for step in range(3):
    x = dtr.randn(1024, 64)
    y = dtr.randint(0, 10, (1024,))
    loss = F.cross_entropy(net(x), y)
    loss.item()
    opt.zero_grad()
    loss.backward()
    opt.step()
dtr.memory._dump_snapshot(path)
print(json.dumps(dtr.memory.stats("cpu")))
"""


def train(tmp_path, budget):
    path = str(tmp_path / f"snapshot_{budget}.pickle")
    env = dict(os.environ)
    for k in ("DTR_MEMORY_BUDGET", "DTR_MEMORY_SNAPSHOT"):
        env.pop(k, None)
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.dirname(os.path.dirname(dtr.__file__))] + env.get("PYTHONPATH", "").split(os.pathsep))
    out = subprocess.run([sys.executable, "-c", CHILD, path, str(budget)], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    with open(path, "rb") as f:
        return pickle.load(f), json.loads(out.stdout.strip().splitlines()[-1]), path


def trace_counts(snapshot, device):
    """Allocations and the peak bytes of `device`'s trace, counted as MemoryViz.js's
    process_alloc_data does (a block freed without its alloc in the trace, or in use in
    the segments without one, was there from the start), and dtr's tagged events."""
    trace = snapshot["device_traces"][device]
    live, initial, steps = {}, 0, []
    counts = {"alloc": 0, "evict": 0, "remat": 0, "swap out": 0, "swap in": 0}
    for e in trace:
        tag = e["frames"][0]["name"] if e["frames"] else ""
        if e["action"] == "alloc":
            counts["alloc"] += 1
            live[e["addr"]] = e["size"]
            steps.append(e["size"])
            if tag.startswith("remat ") and not tag.startswith("remat scratch "):
                counts["remat"] += 1
                assert e["user_metadata"] == tag
        elif e["action"] == "free_completed":
            if tag.startswith("evict "):
                counts["evict"] += 1
                assert e["user_metadata"] == tag
            if live.pop(e["addr"], None) is None:
                initial += e["size"]
            steps.append(-e["size"])
    for seg in snapshot["segments"]:
        if seg["device"] != device:
            continue
        for b in seg["blocks"]:
            if b["state"] == "active_allocated" and b["address"] not in live:
                initial += b["requested_size"]
    now = peak = initial
    for s in steps:
        now += s
        peak = max(peak, now)
    counts["peak"] = peak
    return counts


def check_with_memory_viz(snapshot):
    """Runs what this PyTorch's _memory_viz has over the snapshot: trace_plot and
    segment_plot (HTML) and segsum in PyTorch 2; stats, segments and memory (flame graph
    lines; flamegraph.pl itself is not packaged) in 1.13. Returns the active bytes the
    flame graph lines give."""
    identity = lambda lines: lines  # noqa: E731
    if hasattr(_memory_viz, "trace_plot"):  # PyTorch 2
        html = _memory_viz.trace_plot(snapshot)
        assert "<html>" in html and "snapshot.pickle" in html
        assert "<html>" in _memory_viz.segment_plot(snapshot)
        _memory_viz.segsum(snapshot)  # asserts that blocks add up to their segments
        lines = _memory_viz.memory(snapshot, format_flamegraph=identity)
    else:  # 1.13: a list of segments
        st = _memory_viz.stats(snapshot["segments"])  # asserts that blocks add up to segments
        assert st["segments"] == len(snapshot["segments"])
        assert _memory_viz.segments(snapshot["segments"], format_flamegraph=identity)
        lines = _memory_viz.memory(snapshot["segments"], format_flamegraph=identity)
    active = 0
    for line in lines.splitlines():
        stack, size = line.rsplit(" ", 1)
        if ";active_allocated;" in stack and not stack.endswith("<gaps>"):
            active += int(size)
    return active


@pytest.mark.parametrize("fraction", [None, 0.5])
def test_memory_viz_reads_the_snapshot_and_counts_equal_stats(tmp_path, fraction):
    budget = 0
    if fraction is not None:
        _, free_stats, _ = train(tmp_path, 0)
        budget = int(free_stats["peak_bytes"] * fraction)
    snapshot, stats, path = train(tmp_path, budget)
    assert set(snapshot) >= {"segments", "device_traces", "devices"}
    cpu = snapshot["devices"].index("cpu")
    counts = trace_counts(snapshot, cpu)
    assert counts["alloc"] == stats["allocations"]
    assert counts["peak"] == stats["peak_bytes"]
    assert counts["evict"] == stats["evictions"]
    assert counts["remat"] == stats["rematerializations"]
    if fraction is None:
        assert stats["evictions"] == 0
    else:
        assert stats["evictions"] > 0 and stats["rematerializations"] > 0
        assert stats["peak_bytes"] <= budget
    # Every event carries the keys the visualizer reads.
    for e in snapshot["device_traces"][cpu]:
        assert {"action", "addr", "size", "stream", "frames", "time_us"} <= set(e)
    # The blocks in use at the end are the resident storages.
    assert check_with_memory_viz(snapshot) == stats["resident_bytes"]
    print(f"snapshot {os.path.getsize(path)} bytes, {len(snapshot['device_traces'][cpu])} events")


def test_record_memory_history_takes_pytorchs_arguments(tmp_path):
    dtr.memory._record_memory_history(enabled=None)
    dtr.memory._record_memory_history(True, trace_alloc_max_entries=5)
    x = dtr.randn(64) * 2.0
    for _ in range(5):
        x = x + 1.0
    s = dtr.memory._snapshot()
    cpu = s["devices"].index("cpu")
    assert len(s["device_traces"][cpu]) == 5
    dtr.memory._record_memory_history(enabled="state", context=None)
    assert dtr.memory._snapshot()["device_traces"][cpu] == []
    with pytest.raises(ValueError, match="enabled"):
        dtr.memory._record_memory_history(enabled="sometimes")
    with pytest.raises(TypeError):
        dtr.memory._record_memory_history(max_entries="all")
    with pytest.raises(ValueError, match="nonexistent"):
        dtr.memory._dump_snapshot(str(tmp_path / "nonexistent" / "x.pickle"))
    dtr.memory._record_memory_history(enabled=None)


def test_memory_snapshot_variable_writes_at_exit(tmp_path):
    path = str(tmp_path / "exit.pickle")
    env = dict(os.environ, DTR_MEMORY_SNAPSHOT=path)
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.dirname(os.path.dirname(dtr.__file__))] + env.get("PYTHONPATH", "").split(os.pathsep))
    code = "import dtr; x = dtr.randn(1000) * 2.0; print(dtr.memory.stats()['allocations'])"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    with open(path, "rb") as f:
        s = pickle.load(f)
    cpu = s["devices"].index("cpu")
    assert sum(e["action"] == "alloc" for e in s["device_traces"][cpu]) >= int(out.stdout)


def test_dump_snapshot_takes_paths_and_refuses_other_types(tmp_path):
    dtr.memory._record_memory_history(max_entries=10)
    try:
        with pytest.raises(TypeError, match="filename must be a path"):
            dtr.memory._dump_snapshot(None)
        with pytest.raises(ValueError, match="embedded null byte"):
            dtr.memory._dump_snapshot(str(tmp_path / "a\0b"))
        assert not (tmp_path / "a").exists()
        p = tmp_path / "b.pickle"
        dtr.memory._dump_snapshot(os.fsencode(str(p)))  # bytes, as open() takes
        assert p.stat().st_size > 0
        with pytest.raises(TypeError, match="stacks must be a str or None"):
            dtr.memory._record_memory_history(stacks=3)
        dtr.memory._record_memory_history(stacks=None, max_entries=10)
    finally:
        dtr.memory._record_memory_history(enabled=None)
