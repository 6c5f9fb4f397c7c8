"""The README's opening example, as a program.

    .venv/bin/python examples/readme_intro.py

On a GPU; without one, under numba-cuda's CUDA simulator.
"""

import _gpu_or_simulator  # noqa: F401  (before numba: the simulator without a GPU)

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
