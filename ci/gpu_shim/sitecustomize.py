"""GPU-machine runs only (ci/gpu_run.sh puts this folder on PYTHONPATH):
numba-cuda 0.30.4 calls np.row_stack, which numpy 2.5 (installed there)
removed. Not part of the package."""

import numpy as np

if not hasattr(np, "row_stack"):
    np.row_stack = np.vstack
