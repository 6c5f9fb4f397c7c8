"""Kernels and launchers shared by the GPU tests (tests/test_gpu.py) and the
simulator tests (tests/sim, run in a NUMBA_ENABLE_CUDASIM=1 process): one
definition, checked on real hardware and in the simulator."""

import numba
import numba.types as nt
import numpy as np
from numba import cuda, njit

import numba_cuda_launch as ncl

# -- the README's first example: its kernel and launcher ----------------------

THREADS_PER_BLOCK = 32


@cuda.jit(nt.void(nt.CPointer(nt.float32), nt.CPointer(nt.float32)))
def kernel_gpu(input, output):
    i = numba.cuda.grid(1)
    output[i] = input[i] + 1


@njit
def some_calculation(opaque, opaque_len):
    n = 0
    for k in range(opaque_len):  # little-endian element count
        n |= (opaque[k] & 0xFF) << (8 * k)
    return n // THREADS_PER_BLOCK, THREADS_PER_BLOCK


@numba.cfunc(nt.void(nt.voidptr, nt.CPointer(nt.voidptr), nt.CPointer(nt.char), nt.ulong))
def kernel_launcher(stream, buffers, opaque, opaque_len):
    blockspergrid, threadsperblock = some_calculation(opaque, opaque_len)
    kernel_gpu[blockspergrid, threadsperblock, stream](buffers[0], buffers[1])


# -- lazy kernels --------------------------------------------------------------

@cuda.jit
def axpy2d(a, x, y, out):
    i, j = cuda.grid(2)
    if i < out.shape[0] and j < out.shape[1]:
        out[i, j] = a * x[i, j] + y[i, j]


@cuda.jit
def index3d(out):
    i, j, k = cuda.grid(3)
    if i < out.shape[0] and j < out.shape[1] and k < out.shape[2]:
        out[i, j, k] = (i * out.shape[1] + j) * out.shape[2] + k


@njit
def launch_index3d(op, a, b, c, bx, by, bz):
    out = numba.carray(ncl.as_voidptr(op), (a, b, c), np.float32)
    index3d[((a + bx - 1) // bx, (b + by - 1) // by, (c + bz - 1) // bz), (bx, by, bz)](out)


@cuda.jit
def block_reverse(x, out):
    buf = cuda.shared.array(0, numba.float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    buf[t] = x[i]
    cuda.syncthreads()
    out[i] = buf[cuda.blockDim.x - 1 - t]


@njit
def launch_block_reverse(xp, op, blocks, threads, stream):
    x = numba.carray(ncl.as_voidptr(xp), (blocks * threads,), np.float32)
    out = numba.carray(ncl.as_voidptr(op), (blocks * threads,), np.float32)
    cfg = block_reverse[blocks, threads, stream, threads * 4]  # a configuration kept
    cfg(x, out)


@cuda.jit
def add_one(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] += 1


@cuda.jit
def dependent_step(src, dst):
    """One link of a chain of dependent launches: lets the next grid start,
    waits for the one before (its output is *src*), then writes
    ``src * 0.5 + 1`` (see :func:`dependent_steps`)."""
    ncl.griddepcontrol_launch_dependents()
    i = cuda.grid(1)
    ncl.griddepcontrol_wait()
    if i < dst.size:
        dst[i] = src[i] * np.float32(0.5) + np.float32(1)


def dependent_steps(x, times):
    """What *times* launches of :func:`dependent_step` make of *x* (NumPy)."""
    for _ in range(times):
        x = x * np.float32(0.5) + np.float32(1)
    return x


# -- a kernel as a TVM-FFI function (tests/test_tvm_ffi_*.py, tests/sim) -------

@cuda.jit
def axpy(x, y, out, a):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = a * x[i] + y[i]


@njit
def axpy_blocks(x_shape, y_shape, out_shape, a):
    """axpy's launch rule: 256-thread blocks covering x."""
    return (x_shape[0] + 255) // 256, 256
