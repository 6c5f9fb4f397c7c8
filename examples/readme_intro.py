"""The README's opening example, as a program.

    .venv/bin/python examples/readme_intro.py

On a GPU; without one, under numba-cuda's CUDA simulator.
"""

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


if not have_gpu():  # run under numba-cuda's CUDA simulator instead
    print("no usable GPU here: running under numba-cuda's CUDA simulator")
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import numpy as np
from numba import cuda, njit
import numba_cuda_launch  # enables kernel[...] in CPU nopython code

@cuda.jit
def double(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = 2 * x[i]

@njit
def step(x, out, stream):  # device arrays of numba-cuda, CuPy, PyTorch or JAX
    double[(out.size + 255) // 256, 256, stream](x, out)

x = cuda.to_device(np.arange(1000, dtype=np.float32))
out = cuda.device_array_like(x)
stream = cuda.stream()
step(x, out, stream)
stream.synchronize()
assert (out.copy_to_host() == 2 * np.arange(1000)).all()
print("readme_intro: ok")
