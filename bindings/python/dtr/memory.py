"""The memory budget and the runtime's counters, per device (dtr::remat).

    dtr.memory.set_budget("64MiB")          # or bytes, "60%", None = unlimited
    dtr.memory.stats()["evictions"]
"""
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
    resident_bytes, peak_bytes, evictions, eager_frees, rematerializations,
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


def _device(d):
    return _C.device(d) if isinstance(d, str) else d
