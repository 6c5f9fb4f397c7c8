"""numba-cuda-mlir kernels and launchers shared by the CPU and GPU tests of
numba-cuda-mlir without numba-cuda: a converging loop recorded as one CUDA
graph (two Jacobi sweeps and a check in a WHILE node, the kernels setting
its condition) and a dependent producer/consumer pair calling the
``griddepcontrol_*`` functions. Import after numba_cuda_mlir is known to be
installed."""

import numba
import numpy as np
from numba_cuda_mlir import cuda as mcuda

import numba_cuda_launch as ncl
from numba_cuda_launch import graphs


@mcuda.jit
def sweep(dst, src, done, first):
    i = mcuda.grid(1)
    if first and i == 0:
        graphs.set_conditional(done, 0)        # stop, unless the check says otherwise
    if 0 < i < dst.shape[0] - 1:
        dst[i] = np.float32(0.5) * (src[i - 1] + src[i + 1])


@mcuda.jit
def check(u, v, tol, done):
    i = mcuda.grid(1)
    if i < u.shape[0] and abs(u[i] - v[i]) > tol:
        graphs.set_conditional(done, 1)        # a point moved: go round again


@numba.njit
def record_solver(u, v, tol, stream, body):
    """The executable graph of the loop over device arrays *u* and *v*."""
    blocks = (u.shape[0] + 127) // 128
    graphs.begin_capture(stream)
    done = graphs.conditional_handle(stream, 1)
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
    """The loop in NumPy: *u* when no point moves more than *tol*."""
    v = u.copy()
    while True:
        v[1:-1] = np.float32(0.5) * (u[:-2] + u[2:])
        u[1:-1] = np.float32(0.5) * (v[:-2] + v[2:])
        if not (np.abs(u - v) > tol).any():
            return u


@mcuda.jit
def producer(out, x):
    i = mcuda.grid(1)
    if i < out.shape[0]:
        out[i] = 2 * x[i]
    ncl.griddepcontrol_launch_dependents()


@mcuda.jit
def consumer(out, y):
    ncl.griddepcontrol_wait()
    i = mcuda.grid(1)
    if i < out.shape[0]:
        out[i] += y[i]


@numba.njit
def chain(out, x, y, stream, links):
    """*links* producer/consumer pairs, each consumer a dependent launch."""
    blocks = (out.shape[0] + 127) // 128
    for _ in range(links):
        producer[blocks, 128, stream](out, x)
        consumer[blocks, 128, stream].dependent()(out, y)


@mcuda.jit
def scale_add(x, y, out, a):
    """``out = a * x + y`` over rows and columns (a TVM-FFI function's kernel)."""
    i, j = mcuda.grid(2)
    if i < out.shape[0] and j < out.shape[1]:
        out[i, j] = a * x[i, j] + y[i, j]


@numba.njit
def scale_add_blocks(x_shape, y_shape, out_shape, a):
    """scale_add's launch rule: 16 x 16 blocks covering *out*."""
    return ((out_shape[0] + 15) // 16, (out_shape[1] + 15) // 16), (16, 16)
