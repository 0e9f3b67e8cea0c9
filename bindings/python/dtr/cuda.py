"""torch.cuda for dtr, through the CUDA backend (core/backend.h): whether devices
are present, how many, synchronize, seeding and the memory counters of the
remat runtime. Without a driver or without the CUDA backend in the build,
is_available() is False and device_count() 0; the functions that need a device
raise dtr.DeviceError (a RuntimeError), as PyTorch raises when CUDA is missing,
and nothing aborts."""
from . import DeviceError, _C, device as _device, manual_seed as _manual_seed

__all__ = ["is_available", "device_count", "current_device", "synchronize", "manual_seed",
           "manual_seed_all", "seed", "memory_allocated", "max_memory_allocated",
           "memory_reserved", "reset_peak_memory_stats", "empty_cache", "is_initialized"]


def is_available():
    """True when at least one CUDA device is present."""
    return _C._cuda_device_count() > 0


def device_count():
    """The number of CUDA devices present (0 without a driver or a device)."""
    return _C._cuda_device_count()


def is_initialized():
    return is_available()


def _index(device):
    """The device index of `device` (None: the current device, an int, "cuda:1", or a
    dtr.device); DeviceError when no such CUDA device exists."""
    n = device_count()
    if n == 0:
        raise DeviceError("no CUDA device is available (dtr.cuda.is_available() is False)")
    if device is None:
        return 0
    if isinstance(device, str):
        device = _device(device)
    if isinstance(device, _device):
        if str(device).split(":")[0] != "cuda":
            raise ValueError(f"expected a cuda device, got {device}")
        index = device.index
    else:
        index = int(device)
    if not 0 <= index < n:
        raise DeviceError(f"cuda device {index} does not exist ({n} present)")
    return index


def current_device():
    """The index of the current CUDA device: 0 (dtr runs on cuda:0 unless a tensor
    names another). DeviceError without a device."""
    return _index(None)


def synchronize(device=None):
    """Waits until the work queued on `device` (default: the current one) has run."""
    _C._cuda_synchronize(_index(device))


def manual_seed(seed):
    """Seeds the generator: dtr has one generator for every device, so this is
    dtr.manual_seed(seed) (PyTorch seeds only the CUDA generators). Works without a
    device, as in PyTorch."""
    _manual_seed(int(seed))


manual_seed_all = manual_seed


def seed():
    """Seeds the generator with a random number (torch.cuda.seed)."""
    import random
    _manual_seed(random.SystemRandom().getrandbits(63))


def _stats(device):
    return _C.stats(_device(f"cuda:{_index(device)}"))


def memory_allocated(device=None):
    """Bytes of tensor storage resident on the device now (the remat runtime's
    resident_bytes: evicted tensors do not count)."""
    return _stats(device)["resident_bytes"]


def max_memory_allocated(device=None):
    """The high-water mark of memory_allocated() since the last reset_peak_memory_stats()."""
    return _stats(device)["peak_bytes"]


def memory_reserved(device=None):
    """Bytes the device allocator has reserved from the device (its own account)."""
    return max(_stats(device)["reserved_bytes"], 0)


def reset_peak_memory_stats(device=None):
    """Restarts the peaks (and the runtime's other counters, on every device) from now."""
    _index(device)
    _C.reset_stats()


def empty_cache():
    """Does nothing; kept so that PyTorch programs calling it run. The runtime decides
    when the allocator's cached blocks go back to the driver (under a budget, resident
    plus cached bytes are trimmed to stay within it)."""
