"""Launchers built into C libraries by tests/test_aot_cpu.py and
tests/test_aot_gpu.py (and by the command line in one test): status-only
@cfuncs over C scalars and pointers."""

import numba
import numba.types as nt
from numba import cuda

import numba_cuda_launch as ncl  # noqa: F401  (kernel[...] in nopython code)

f32p, i16p = nt.CPointer(nt.float32), nt.CPointer(nt.int16)


@cuda.jit(nt.void(f32p, f32p, nt.float32, nt.int64))
def saxpy(x, y, a, n):
    i = cuda.grid(1)
    if i < n:
        y[i] = a * x[i] + y[i]


@numba.cfunc(nt.int32(nt.voidptr, f32p, f32p, nt.float32, nt.int64))
def saxpy_launch(stream, x, y, a, n):
    return saxpy[(n + 255) // 256, 256, stream].launch_status(x, y, a, n)


@cuda.jit(nt.void(i16p, nt.float64, nt.int8, nt.boolean))
def tile(data, scale, small, flag):
    i = cuda.grid(1)
    if flag and i == 0:
        data[0] = nt.int16(scale * small)


@numba.cfunc(nt.int32(nt.voidptr, nt.uint32, nt.int32, nt.boolean, nt.float64, nt.int8, i16p,
                      nt.int64))
def tile_launch(stream, gx, gy, flag, scale, small, data, shmem):
    return tile[(gx, gy), (16, 8, 2), stream, shmem].launch_status(data, scale, small, flag)


@cuda.jit
def jsaxpy(x, y, out, a):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


def jax_saxpy():
    """``out = a * x + y`` as a ``jax_kernel`` (JAX imported here: it is optional)."""
    import numpy as np
    from numba_cuda_launch.jax import jax_kernel

    return jax_kernel(jsaxpy, out_shapes=lambda x, y, a: x, scalars={"a": np.float32},
                      launch=lambda x, y, a: ((x.shape[0] + 255) // 256, 256))
