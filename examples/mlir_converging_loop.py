"""numba-cuda-mlir kernels launched from @njit, with no numba-cuda installed:
a CUDA graph whose WHILE node repeats two Jacobi sweeps and a check until
no point moves (the kernels set the loop's condition with
graphs.set_conditional), then replayed. With a GPU the result is compared
with NumPy; without one the graph is recorded by the recording driver and
its structure printed (numba-cuda-mlir has no simulator).

    python examples/mlir_converging_loop.py
"""

import numba
import numpy as np

from _gpu import have_gpu

try:
    from numba_cuda_mlir import cuda
except ImportError:
    print("this example needs numba-cuda-mlir: pip install \"numba-cuda-launch[mlir]\"")
    raise SystemExit(0)

import numba_cuda_launch as ncl
from numba_cuda_launch import graphs

GPU = have_gpu()
if not GPU:
    ncl.set_compute_capability((9, 0))


@cuda.jit
def sweep(dst, src, done, first):
    i = cuda.grid(1)
    if first and i == 0:
        graphs.set_conditional(done, 0)       # stop, unless the check says otherwise
    if 0 < i < dst.shape[0] - 1:
        dst[i] = np.float32(0.5) * (src[i - 1] + src[i + 1])


@cuda.jit
def check(u, v, tol, done):
    i = cuda.grid(1)
    if i < u.shape[0] and abs(u[i] - v[i]) > tol:
        graphs.set_conditional(done, 1)       # a point moved: go round again


@numba.njit
def record_solver(u_address, v_address, n, tol, stream, body):
    u = numba.carray(ncl.as_voidptr(u_address), (n,), np.float32)
    v = numba.carray(ncl.as_voidptr(v_address), (n,), np.float32)
    blocks = (n + 127) // 128
    graphs.begin_capture(stream)
    done = graphs.conditional_handle(stream, 1)   # 1 at the start of each launch
    loop = graphs.add_while(stream, done)
    graphs.begin_body(body, loop)
    sweep[blocks, 128, body](u, v, done, True)
    sweep[blocks, 128, body](v, u, done, False)
    check[blocks, 128, body](u, v, tol, done)
    graphs.end_body(body)
    graph = graphs.end_capture(stream)
    exe = graph.instantiate()
    graph.destroy()
    return exe


def numpy_solve(u, tol):
    v = u.copy()
    while True:
        v[1:-1] = np.float32(0.5) * (u[:-2] + u[2:])
        u[1:-1] = np.float32(0.5) * (v[:-2] + v[2:])
        if not (np.abs(u - v) > tol).any():
            return u


n, tol = 64, np.float32(1e-3)
start = np.zeros(n, np.float32)
start[0], start[-1] = 1, -1
if GPU:
    from cuda.core import Device

    dev = Device()
    dev.set_current()
    stream, body = dev.create_stream(), dev.create_stream()
    buf = dev.allocate(2 * n * 4, stream=stream)
    u_host = start.copy()
    from cuda.bindings import driver
    driver.cuMemcpyHtoDAsync(int(buf.handle), u_host.ctypes.data, n * 4, int(stream.handle))
    driver.cuMemcpyHtoDAsync(int(buf.handle) + n * 4, u_host.ctypes.data, n * 4,
                             int(stream.handle))
    exe = record_solver(int(buf.handle), int(buf.handle) + n * 4, n, tol,
                        int(stream.handle), int(body.handle))
    exe.launch(int(stream.handle))
    driver.cuMemcpyDtoHAsync(u_host.ctypes.data, int(buf.handle), n * 4, int(stream.handle))
    stream.sync()
    exe.destroy()
    expected = numpy_solve(start.copy(), tol)
    assert np.allclose(u_host, expected, atol=1e-2), (u_host, expected)
    print("converged on the GPU; matches NumPy within 1e-2")
else:
    from numba_cuda_launch.testing import RecordingDriver

    with RecordingDriver() as rec:
        exe = record_solver(0x10000, 0x20000, n, tol, 0x11, 0x22)
        (graph,) = [g for g in rec.graphs.values() if not g.body_of]
        (node,) = graph.launches
        body = rec.graphs[node.bodies[0]].launches
        exe.destroy()
    print("no GPU: recorded a graph of one WHILE node whose body launches %d "
          "numba-cuda-mlir kernels" % len(body))
