"""A loop of small kernels recorded once as a CUDA graph from compiled code,
replayed with new arguments each step.

    .venv/bin/python examples/graph_loop.py [--record]

With a GPU: runs and checks the result against NumPy. Without one: runs the
same code under numba-cuda's CUDA simulator (the capture records the
simulated launches, each replay runs them) and checks it the same way. With
``--record`` and no GPU: compiles the kernel for compute capability 9.0 and
runs the same code against numba_cuda_launch's recording driver, checking
the launches the driver would be asked for.
"""

import sys

RECORD = "--record" in sys.argv
if not RECORD:
    import _gpu_or_simulator  # noqa: F401  (before numba: the simulator without a GPU)

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
        exe.update_launch(first, axpb[g, 128], x, a[0] * np.float32(s), b[0])  # new arguments
        exe.launch(stream)                    # every recorded launch, one driver call
    exe.destroy()
    graph.destroy()


class FakeDeviceArray:
    """float32 device memory the recording driver pretends to hold."""

    def __init__(self, n, address=0x7F0000000000):
        self.__cuda_array_interface__ = {"shape": (n,), "typestr": "<f4", "strides": None,
                                         "data": (address, False), "version": 3}


def record(a, b, n, steps):
    """No GPU: run() against the recording driver; check what it recorded."""
    from numba_cuda_launch.testing import RecordingDriver

    numba_cuda_launch.set_compute_capability((9, 0))
    with RecordingDriver() as rec:
        run(FakeDeviceArray(n), a, b, steps, 0x1234)  # any non-default stream handle
    (graph,) = rec.graphs.values()
    scalars = [np.frombuffer(b"".join(u.params[-2:]), np.float32)
               for _, _, u in rec.node_updates]
    ok = (len(graph.launches) == a.size and len(rec.graph_launches) == steps
          and all(np.array_equal(v, [a[0] * s, b[0]]) for s, v in enumerate(scalars)))
    print("no GPU here: ran against numba_cuda_launch's recording driver (kernel built for "
          "sm_90): %d launches captured, %d replays, %d node updates: %s"
          % (len(graph.launches), len(rec.graph_launches), len(scalars),
             "as expected" if ok else "WRONG"))
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    rng = np.random.default_rng()
    n, steps = 1000, 5
    a = rng.uniform(0.5, 1.0, 4).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    if RECORD and not cuda.is_available():
        record(a, b, n, steps)
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
    ok = np.allclose(x.copy_to_host(), want, rtol=1e-4, atol=1e-4)
    print("graph replay with updated arguments: correct", ok)
    raise SystemExit(0 if ok else 1)
