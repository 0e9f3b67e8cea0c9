"""`import torch` finds dtr: the way a PyTorch program is run unchanged on dtr.

Inside `with torch_is_dtr():` every module of the dtr package is also in
sys.modules under the torch name (dtr.nn.functional as torch.nn.functional,
dtr.utils.data as torch.utils.data, ...), so `import torch`, `import
torch.nn as nn` and `from torch.utils.data import DataLoader` all bind dtr's
modules; whatever those names meant before (a PyTorch imported for reference
values) is restored after."""
import contextlib
import importlib
import pkgutil
import sys

import dtr


def _dtr_modules():
    for info in pkgutil.walk_packages(dtr.__path__, "dtr."):
        if not info.name.split(".")[-1].startswith("_"):
            importlib.import_module(info.name)
    return {n: m for n, m in sys.modules.items() if n == "dtr" or n.startswith("dtr.")}


@contextlib.contextmanager
def torch_is_dtr():
    aliases = {"torch" + n[3:]: m for n, m in _dtr_modules().items()}
    saved = {n: m for n, m in sys.modules.items() if n == "torch" or n.startswith("torch.")}
    for n in saved:
        del sys.modules[n]
    sys.modules.update(aliases)
    try:
        yield dtr
    finally:
        for n in [n for n in sys.modules if n == "torch" or n.startswith("torch.")]:
            del sys.modules[n]
        sys.modules.update(saved)
