"""The memory budget and the runtime's counters, per device (dtr::remat).

    dtr.memory.set_budget("64MiB")          # or bytes, "60%", None = unlimited
    dtr.memory.stats()["evictions"]

Memory snapshots for PyTorch's visualizer (https://pytorch.org/memory_viz,
torch.cuda._memory_viz), with PyTorch's names:

    dtr.memory._record_memory_history()
    ... train ...
    dtr.memory._dump_snapshot("snapshot.pickle")
"""
import os
import pickle
import sys

from . import _C


def set_budget(budget, device=None):
    """Caps the resident tensor-storage bytes of `device` (default: the default device)
    at `budget`: an int number of bytes, a string ("64MiB", "1.5GiB", "800MB", "60%" of
    the device's memory), or None for no cap. Over the cap the runtime evicts storages
    and recomputes them when needed, bitwise equal to a run without one. ValueError for a
    non-positive or malformed budget, TypeError for any other type (a bool included: True
    is not one byte), dtr.DeviceError for a device that does not exist."""
    _C.set_budget(budget, _device(device))


def get_budget(device=None):
    """The budget in bytes of `device`, or None when unlimited."""
    return _C.get_budget(_device(device))


def stats(device=None):
    """The runtime's counters for `device` as a dict: budget_bytes (-1: none),
    resident_bytes, peak_bytes, evictions, eager_frees, allocations (times bytes were given
    to a storage: new outputs, rematerializations, swap-ins, host-tier copies; a memory
    snapshot's alloc events), rematerializations,
    recomputed_ops, recomputed_flops, recompute_seconds_estimated,
    recompute_seconds_measured; the host tier's swap_outs, swap_ins, swapped_bytes,
    swap_bytes_out, swap_bytes_in, swap_seconds_estimated and (on the cpu)
    host_tier_bytes (DTR_SWAP); window_evictions and the device allocator's
    allocated_bytes, reserved_bytes, largest_free_block, peak_allocated_bytes
    (-1 where it keeps no account, as the cpu's) and fragmentation; metadata_nodes, live_storages."""
    return _C.stats(_device(device))


def reset_stats():
    """Zeroes the counters of every device; each peak restarts from its resident bytes."""
    _C.reset_stats()


def _record_memory_history(enabled="all", context="all", stacks="all", max_entries=sys.maxsize,
                           device=None, *, trace_alloc_max_entries=None, **_legacy):
    """Starts (or stops) recording the memory history of every device, as
    torch.cuda.memory._record_memory_history does for CUDA.

    enabled: "all" (the state and a trace of every alloc, free, segment and
        out-of-memory event), "state" (only which op allocated each block in
        use), None to stop (what was recorded is dropped); True/False (PyTorch
        1.13's and 2.0's form) mean "all"/None.
    context: which events keep frames: "all", "alloc", "state" or None.
    stacks: "python" or "all" (dtr's frames are the same: what dtr did --
        "evict <op>", "remat <op>", "swap out <op>", "swap in <op>" --, the op,
        and the dtr::trace::Scope names around it).
    max_entries: the trace keeps the last this many events (the older 2.0
        keyword trace_alloc_max_entries is read as this).
    device: accepted and ignored: every device is recorded.
    ValueError for any other value, TypeError for a non-int max_entries."""
    del device, _legacy
    if enabled is True:
        enabled = "all"
    elif enabled is False:
        enabled = None
    if trace_alloc_max_entries is not None:
        max_entries = trace_alloc_max_entries
    if isinstance(max_entries, bool) or not isinstance(max_entries, int):
        raise TypeError(f"max_entries must be an int, got {type(max_entries).__name__}")
    if max_entries < 0:
        raise ValueError(f"max_entries must be >= 0, got {max_entries}")
    for name, value in (("enabled", enabled), ("context", context), ("stacks", stacks)):
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{name} must be a str or None, got {type(value).__name__}")
    if stacks is None:
        stacks = "all"  # what PyTorch records when none is named
    _C.record_memory_history(enabled, context, stacks, min(max_entries, sys.maxsize))


def _snapshot(device=None):
    """The memory snapshot now as a dict in the format of
    torch.cuda.memory._snapshot(): "segments" (every device's segments and
    blocks; sizes in bytes), "device_traces" (per device index the recorded
    events) and "devices" (the dtr device name of each index: cuda:N at N,
    then privateuseone, then "cpu"). `device` is ignored."""
    del device
    return pickle.loads(_C.memory_snapshot())


def _dump_snapshot(filename="dump_snapshot.pickle"):
    """Writes the memory snapshot as a pickle to `filename` (open it at
    https://pytorch.org/memory_viz, or read it with torch.cuda._memory_viz).
    `filename`: a str, bytes or os.PathLike path. TypeError for anything
    else (None included); ValueError for an embedded null byte, and naming
    the path when it cannot be written."""
    if not isinstance(filename, (str, bytes, os.PathLike)):
        raise TypeError(f"filename must be a path (str, bytes or os.PathLike), got {type(filename).__name__}")
    path = os.fsdecode(filename)
    if "\0" in path:
        raise ValueError("filename: embedded null byte")  # as open() says
    _C.dump_snapshot(path)


def _device(d):
    return _C.device(d) if isinstance(d, str) else d
