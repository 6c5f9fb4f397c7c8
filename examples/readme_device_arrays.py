"""The example of the README's device-array section, as a program.

    .venv/bin/python examples/readme_device_arrays.py

On a GPU; without one, under numba-cuda's CUDA simulator.
"""

import _gpu_or_simulator  # noqa: F401  (before numba: the simulator without a GPU)

import numpy as np
from numba import cuda, njit
import numba_cuda_launch

@cuda.jit
def axpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]

@njit
def step(a, x, y, out, stream):
    axpy[(out.size + 255) // 256, 256, stream](a, x, y, out)

x = cuda.to_device(np.ones(1000, np.float32))
out = cuda.device_array(1000, np.float32)
stream = cuda.stream()
step(np.float32(2), x, x, out, stream)      # or CuPy arrays and a cupy.cuda.Stream,
stream.synchronize()                        # torch tensors and a torch.cuda.Stream
assert (out.copy_to_host() == 3).all()
print("readme_device_arrays: ok")
