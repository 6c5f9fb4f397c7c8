"""Whether the examples have a GPU, asked of the CUDA driver before any kernel
compiler is imported."""

import ctypes


def have_gpu():
    """A CUDA driver that sees a device (asked before numba.cuda is imported)."""
    try:
        cu = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    count = ctypes.c_int(0)
    return cu.cuInit(0) == 0 and cu.cuDeviceGetCount(ctypes.byref(count)) == 0 and count.value > 0
