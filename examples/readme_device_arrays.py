"""The example of the README's device-array section, as a program.

    python examples/readme_device_arrays.py      (needs a GPU, or NUMBA_ENABLE_CUDASIM=1)
"""

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
print("out[:4] =", out.copy_to_host()[:4])
