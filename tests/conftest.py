"""Test set-up: CPU tests compile kernels for a configured architecture when
no GPU is present; GPU tests are marked ``gpu`` and skipped without one."""

import os

import numpy as np
import pytest

# numba-cuda 0.30.4 uses np.row_stack, which numpy 2.5 removed (the GPU
# machine has numpy 2.5); restore it for the test run only.
if not hasattr(np, "row_stack"):
    np.row_stack = np.vstack

os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")
# Numba's on-disk caches (cache=True, jax_kernel handlers): one new directory
# per run, never the user's, so that each run compiles what it tests.
if "NUMBA_CACHE_DIR" not in os.environ:
    import atexit
    import shutil
    import tempfile

    os.environ["NUMBA_CACHE_DIR"] = tempfile.mkdtemp(prefix="ncl-tests-cache-")
    atexit.register(shutil.rmtree, os.environ["NUMBA_CACHE_DIR"], True)
# JAX shares the GPU with numba-cuda in the tests: allocate on demand.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import sys  # noqa: E402

# NCL_TEST_PATCHED=1: test numba-cuda built from patches/ (numba.cuda.cpu_launch),
# =mlir numba-cuda-mlir built from patches/numba-cuda-mlir/ (numba_cuda_mlir.cpu_launch),
# instead of this package, through a test-only alias (tests/_patched).
PATCHED = os.environ.get("NCL_TEST_PATCHED") in ("1", "mlir")
if PATCHED:
    alias = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_patched")
    sys.path.insert(0, alias)
    os.environ["PYTHONPATH"] = alias + os.pathsep + os.environ.get("PYTHONPATH", "")

from support import HAVE_GPU, SIMULATED  # noqa: E402

# tests/sim runs only under the simulator (tests/test_simulator.py starts it),
# and the rest only without it.
collect_ignore = ["_patched"] + ([] if SIMULATED else ["sim"])

import numba_cuda_launch  # noqa: E402

if not HAVE_GPU and not SIMULATED and numba_cuda_launch.get_compute_capability() is None:
    numba_cuda_launch.set_compute_capability((9, 0))


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU (skipped without one)")
    config.addinivalue_line("markers", "slow: starts child Python processes "
                            "(-m 'not slow' for the quick tier)")


def pytest_collection_modifyitems(config, items):
    if HAVE_GPU:
        return
    skip = pytest.mark.skip(reason="no CUDA GPU on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def fake_driver():
    from numba_cuda_launch.testing import RecordingDriver

    with RecordingDriver() as fake:
        yield fake
