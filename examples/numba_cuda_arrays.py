"""numba-cuda device arrays straight into a compiled launcher.

    .venv/bin/python examples/numba_cuda_arrays.py

On a GPU; without one, under numba-cuda's CUDA simulator.
"""

import _gpu_or_simulator  # noqa: F401  (before numba: the simulator without a GPU)

import numpy as np
from numba import cuda, njit

import numba_cuda_launch  # noqa: F401  (enables kernel[...] in CPU code)


@cuda.jit
def axpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


@njit
def step(a, x, y, out, stream):
    # x, y, out are device arrays: shape, size and slicing work on the host;
    # the launch passes them exactly as numba-cuda's own launch would.
    axpy[(out.size + 255) // 256, 256, stream](a, x, y, out)
    axpy[(out.size // 2 + 255) // 256, 256, stream](a, x[::2], y[::2], out[::2])


if __name__ == "__main__":
    n = 1000
    x = np.random.default_rng().standard_normal(n).astype(np.float32)
    y = np.ones(n, np.float32)
    stream = cuda.stream()
    dx, dy, dout = cuda.to_device(x), cuda.to_device(y), cuda.device_array(n, np.float32)
    step(np.float32(2.0), dx, dy, dout, stream)
    stream.synchronize()
    want = 2 * x + 1
    want[::2] = 2 * x[::2] + 1
    ok = np.allclose(dout.copy_to_host(), want)
    print("numba-cuda device arrays: correct", ok)
    raise SystemExit(0 if ok else 1)
