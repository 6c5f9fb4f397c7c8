"""Imported by the examples before numba: with no usable GPU here, they run
under numba-cuda's CUDA simulator (NUMBA_ENABLE_CUDASIM=1), and say so."""

import os

from _gpu import have_gpu


if not have_gpu():
    print("no usable GPU here: running under numba-cuda's CUDA simulator")
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
