"""The README's events example, as a program.

    .venv/bin/python examples/events_timing.py

On a GPU; without one, under numba-cuda's CUDA simulator.
"""

import _gpu_or_simulator  # noqa: F401  (before numba: the simulator without a GPU)

import numpy as np
from numba import cuda, njit
import numba_cuda_launch as ncl

@cuda.jit
def double(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] *= 2

@njit
def timed(x, stream):
    start, end = ncl.event(), ncl.event()
    start.record(stream)
    double[(x.size + 255) // 256, 256, stream](x)
    end.record(stream)
    end.synchronize()
    return start.elapsed_time(end)          # float32 milliseconds

ms = timed(cuda.to_device(np.ones(4096, np.float32)), cuda.stream())
clock = "host clock: the simulator's kernel runs in Python" if cuda.config.ENABLE_CUDASIM \
    else "GPU events"
print("doubled 4096 floats in %.3f ms (%s)" % (ms, clock))
