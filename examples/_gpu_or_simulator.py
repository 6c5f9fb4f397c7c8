"""Imported by the examples before numba: with no usable GPU here, they run
under numba-cuda's CUDA simulator (NUMBA_ENABLE_CUDASIM=1), and say so."""

import ctypes
import os


def have_gpu():
    """A CUDA driver that sees a device (asked before numba.cuda is imported)."""
    try:
        cu = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    count = ctypes.c_int(0)
    return cu.cuInit(0) == 0 and cu.cuDeviceGetCount(ctypes.byref(count)) == 0 and count.value > 0


if not have_gpu():
    print("no usable GPU here: running under numba-cuda's CUDA simulator")
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
