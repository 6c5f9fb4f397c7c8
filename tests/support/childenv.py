"""Environment for the test suite's child Python processes: they must import
the same numba_cuda_launch as the suite (this checkout's package, or under
NCL_TEST_PATCHED=1 the alias for a patched numba-cuda)."""

import os

from support import ROOT
PREAMBLE = ("import numpy as np\n"
            "if not hasattr(np, 'row_stack'):  # numba-cuda 0.30.4 with numpy 2.5\n"
            "    np.row_stack = np.vstack\n")


def child_env(**extra):
    """``os.environ`` with PYTHONPATH leading to the package under test."""
    first = os.path.join(ROOT, "tests", "_patched") \
        if os.environ.get("NCL_TEST_PATCHED") in ("1", "mlir") else ROOT
    path = os.environ.get("PYTHONPATH", "")
    return dict(os.environ, PYTHONPATH=first + (os.pathsep + path if path else ""), **extra)


# A module for a child process to import: a cache=True @njit launcher of a
# numba-cuda kernel over a carray of the address given, returning the status.
CACHED_LAUNCHER = """
import numba, numpy as np
from numba import cuda, njit
import numba_cuda_launch as ncl

@cuda.jit
def add_one(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] += 1

@njit(cache=True)
def run(p, n):
    x = numba.carray(ncl.as_voidptr(p), (n,), np.float32)
    return add_one[1, 32].launch_status(x)
"""
