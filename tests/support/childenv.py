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


# A fragment of a child script (after numpy as np, cuda, jax_kernel, and SIGN
# = 1 or -1): a batch-aware saxpy kernel (1-D, or 2-D with a leading batch),
# out = a * x + SIGN * y, and its jax_kernel for a variant: "plain" (grid and
# block from the Python *launch*), "batch-aware" (the @njit *rule*, vmap
# expand_dims) or "dependent" (a dependent launch).
SAXPY_VARIANTS = """
@cuda.jit
def saxpy(x, y, out, a):
    if x.ndim == 1:
        i = cuda.grid(1)
        if i < out.size:
            out[i] = a * x[i] + SIGN * y[i]
    else:
        b, i = cuda.grid(2)
        if b < x.shape[0] and i < x.shape[1]:
            out[b, i] = a * x[b, i] + SIGN * y[b, i]


def saxpy_variant(variant, rule, launch):
    options = dict(scalars={"a": np.float32})
    if variant == "batch-aware":
        options.update(vmap_method="expand_dims")
    elif variant == "dependent":
        options.update(dependent=True)
    return jax_kernel(saxpy, lambda x, y, a: x, rule if variant == "batch-aware" else launch,
                      **options)
"""
