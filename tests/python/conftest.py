"""pytest set-up for the Python package: `dtr` from build/python unless PYTHONPATH
already finds one; `torch` (PyTorch, for reference values) where installed."""
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
try:
    import dtr  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(os.environ.get("DTR_BUILD_DIR", os.path.join(ROOT, "build")),
                                    "python"))
    import dtr  # noqa: F401


@pytest.fixture
def torch():
    return pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _fresh_state():
    """Each test starts with no budget, grad mode on and a known seed."""
    import dtr
    dtr.memory.set_budget(None)
    dtr.set_grad_enabled(True)
    dtr.manual_seed(0)
    yield
    dtr.memory.set_budget(None)
