"""Helpers of the test suite (one package, imported as ``support``: tests/
is on the path of every test run, through its conftest.py).

``HAVE_GPU`` and ``SIMULATED`` say what the run targets; the modules hold
kernels (:mod:`.kernels`, :mod:`.cluster_kernels`,
:mod:`.jax_export_kernels`), child-process environments (:mod:`.childenv`),
fake XLA call frames (:mod:`.ffi_frames`), leak measurements
(:mod:`.leaks`) and message helpers (:mod:`.messages`).
"""

import os

from numba import cuda

SIMULATED = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"
HAVE_GPU = cuda.is_available() and not SIMULATED
