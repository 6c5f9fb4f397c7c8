"""A loop of small kernels recorded once as a CUDA graph from compiled code,
replayed with new arguments each step.

    python examples/graph_loop.py      (needs a GPU)
"""

import numpy as np
from numba import cuda, njit

import numba_cuda_launch  # noqa: F401  (enables kernel[...] in CPU code)
from numba_cuda_launch import graphs


@cuda.jit
def axpb(x, a, b):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = a * x[i] + b


@njit
def run(x, a, b, steps, stream):
    g = (x.size + 127) // 128
    graphs.begin_capture(stream)              # launches on stream are recorded, not run
    axpb[g, 128, stream](x, a[0], b[0])
    first = graphs.last_launch(stream)        # the node that launch recorded
    for k in range(1, a.size):
        axpb[g, 128, stream](x, a[k], b[k])
    graph = graphs.end_capture(stream)
    exe = graph.instantiate()
    for s in range(steps):
        exe.update_launch(first, axpb[g, 128], x, a[0] * s, b[0])  # new arguments
        exe.launch(stream)                    # every recorded launch, one driver call
    exe.destroy()
    graph.destroy()


if __name__ == "__main__":
    rng = np.random.default_rng()
    n, steps = 1000, 5
    a = rng.uniform(0.5, 1.0, 4).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    x0 = rng.standard_normal(n).astype(np.float32)
    x = cuda.to_device(x0)
    stream = cuda.stream()
    run(x, a, b, steps, stream)
    stream.synchronize()
    want = x0.astype(np.float64)
    for s in range(steps):
        want = (a[0] * s) * want + b[0]
        for k in range(1, 4):
            want = a[k] * want + b[k]
    print("graph replay with updated arguments: correct",
          np.allclose(x.copy_to_host(), want, rtol=1e-4, atol=1e-4))
