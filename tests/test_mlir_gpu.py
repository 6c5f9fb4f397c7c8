"""numba-cuda-mlir kernels launched from compiled code on a GPU, checked
against NumPy on fresh random inputs, and against the same kernel launched
from Python through numba-cuda-mlir's own launcher (which packs the
parameters its own way: the results must agree). Outputs are poisoned (NaN)
before each launch. Device memory comes from numba-cuda; both compilers run
in this one process."""

import numba
import numpy as np
import pytest
from numba import cuda, njit

numba_cuda_mlir = pytest.importorskip("numba_cuda_mlir")

import numba_cuda_launch as ncl  # noqa: E402
from numba_cuda_mlir import cuda as mcuda  # noqa: E402
from numba_cuda_mlir import types as mt  # noqa: E402

pytestmark = pytest.mark.gpu
rng = np.random.default_rng()


def ptr(devarray):
    return devarray.__cuda_array_interface__["data"][0]


def poisoned(shape, dtype=np.float32, order="C"):
    return cuda.to_device(np.full(shape, np.nan, dtype=dtype, order=order))


@mcuda.jit
def axpy(out, a, x, y):
    i = mcuda.grid(1)
    if i < out.shape[0]:
        out[i] = a * x[i] + y[i]


@njit
def launch_axpy(o, a, x, y, n, stream):
    out = numba.carray(ncl.as_voidptr(o), (n,), np.float32)
    xs = numba.carray(ncl.as_voidptr(x), (n,), np.float32)
    ys = numba.carray(ncl.as_voidptr(y), (n,), np.float32)
    axpy[(n + 255) // 256, 256, stream](out, a, xs, ys)


def test_lazy_kernel_matches_numpy_and_python_launch():
    n = int(rng.integers(1000, 100000))
    a = np.float32(rng.standard_normal())
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    dx, dy, d1, d2 = cuda.to_device(x), cuda.to_device(y), poisoned(n), poisoned(n)
    stream = cuda.stream()
    launch_axpy(ptr(d1), a, ptr(dx), ptr(dy), n, int(stream.handle))
    stream.synchronize()
    cp = pytest.importorskip("cupy")
    # numba-cuda-mlir's own launcher, on CuPy views of the same memory (it
    # types numba-cuda's DeviceNDArray by numba-cuda's own _numba_type_)
    axpy[(n + 255) // 256, 256](cp.asarray(d2), a, cp.asarray(dx), cp.asarray(dy))
    cuda.synchronize()
    np.testing.assert_allclose(d1.copy_to_host(), a * x + y, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(d1.copy_to_host(), d2.copy_to_host())


@mcuda.jit
def transpose_scaled(out, x, s):
    i, j = mcuda.grid(2)
    if i < out.shape[0] and j < out.shape[1]:
        out[i, j] = s * x[j, i]


@njit
def launch_transpose_view(o, x, rows, cols, s):
    # out: Fortran order (rows, cols); x: every other column of a C (cols, 2*rows).
    out = numba.farray(ncl.as_voidptr(o), (rows, cols), np.float64)
    big = numba.carray(ncl.as_voidptr(x), (cols, 2 * rows), np.float64)
    transpose_scaled[((rows + 15) // 16, (cols + 15) // 16), (16, 16)](out, big[:, ::2], s)


def test_strided_and_fortran_views():
    rows, cols = int(rng.integers(17, 200)), int(rng.integers(17, 200))
    s = float(rng.standard_normal())
    big = rng.standard_normal((cols, 2 * rows))
    dbig, dout = cuda.to_device(big), poisoned((rows, cols), np.float64, order="F")
    launch_transpose_view(ptr(dout), ptr(dbig), rows, cols, s)
    cuda.synchronize()
    np.testing.assert_allclose(dout.copy_to_host(), s * big[:, ::2].T, rtol=1e-12)


@mcuda.jit(mt.void(mt.float64[::1], mt.int8, mt.uint16, mt.int32, mt.int64, mt.float32,
                   mt.boolean, mt.complex64, mt.complex128, mt.float16))
def scalars(out, a, b, c, d, e, g, h, k, m):
    out[0] = a
    out[1] = b
    out[2] = c
    out[3] = d
    out[4] = e
    out[5] = 1.0 if g else -1.0
    out[6] = h.real
    out[7] = h.imag
    out[8] = k.real
    out[9] = k.imag
    out[10] = m


@njit
def launch_scalars(o, a, b, c, d, e, g, h, k, m):
    out = numba.carray(ncl.as_voidptr(o), (11,), np.float64)
    scalars[1, 1](out, a, b, c, d, e, g, h, k, m)


def test_scalar_parameters():
    a, b = np.int8(rng.integers(-128, 128)), np.uint16(rng.integers(0, 65536))
    c, d = np.int32(rng.integers(-2**31, 2**31)), np.int64(rng.integers(-2**50, 2**50))
    e = np.float32(rng.standard_normal())
    g = bool(rng.integers(0, 2))
    h = np.complex64(complex(rng.standard_normal(), rng.standard_normal()))
    k = complex(rng.standard_normal(), rng.standard_normal())
    m = float(np.float16(rng.standard_normal()))
    dout = poisoned(11, np.float64)
    launch_scalars(ptr(dout), a, b, c, d, e, g, h, k, m)
    cuda.synchronize()
    want = [a, b, c, d, e, 1.0 if g else -1.0, h.real, h.imag, k.real, k.imag, m]
    np.testing.assert_array_equal(dout.copy_to_host(), np.array(want, dtype=np.float64))


@mcuda.jit
def tuple_sum(out, coef, arrs):
    i = mcuda.grid(1)
    if i < out.shape[0]:
        out[i] = coef[0] * arrs[0][i] + coef[1] * arrs[1][i]


@njit
def launch_tuple_sum(o, x, y, n, c0, c1):
    out = numba.carray(ncl.as_voidptr(o), (n,), np.float32)
    xs = numba.carray(ncl.as_voidptr(x), (n,), np.float32)
    ys = numba.carray(ncl.as_voidptr(y), (n,), np.float32)
    tuple_sum[(n + 127) // 128, 128](out, (c0, c1), (xs, ys))


def test_tuple_arguments():
    n = int(rng.integers(100, 10000))
    c0, c1 = (np.float32(v) for v in rng.standard_normal(2))
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    dx, dy, dout = cuda.to_device(x), cuda.to_device(y), poisoned(n)
    launch_tuple_sum(ptr(dout), ptr(dx), ptr(dy), n, c0, c1)
    cuda.synchronize()
    np.testing.assert_allclose(dout.copy_to_host(), c0 * x + c1 * y, rtol=1e-5, atol=1e-6)


@mcuda.jit([mt.void(mt.CPointer(mt.float32), mt.float32, mt.int64)])
def fill(p, v, n):
    i = mcuda.grid(1)
    if i < n:
        p[i] = v


@cuda.jit
def nc_add_one(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] += 1


@njit
def launch_both(p, n, v, stream):
    # numba-cuda-mlir fills, numba-cuda adds one, on one stream.
    fill[(n + 127) // 128, 128, stream](ncl.as_voidptr(p), v, n)
    nc_add_one[(n + 127) // 128, 128, stream](
        numba.carray(ncl.as_voidptr(p), (n,), np.float32))


def test_both_compilers_in_one_function_on_one_stream():
    n = int(rng.integers(100, 10000))
    v = np.float32(rng.standard_normal())
    dout = poisoned(n)
    stream = cuda.stream()
    launch_both(ptr(dout), n, v, int(stream.handle))
    stream.synchronize()
    np.testing.assert_array_equal(dout.copy_to_host(), np.full(n, v + np.float32(1)))


def test_dynamic_shared_memory_and_status():
    @mcuda.jit
    def reverse_block(out, x):
        buf = mcuda.shared.array(0, dtype=numba_cuda_mlir.types.float32)
        t = mcuda.threadIdx.x
        base = mcuda.blockIdx.x * mcuda.blockDim.x
        buf[t] = x[base + t]
        mcuda.syncthreads()
        out[base + t] = buf[mcuda.blockDim.x - 1 - t]

    @njit
    def launch(o, x, blocks, threads):
        out = numba.carray(ncl.as_voidptr(o), (blocks * threads,), np.float32)
        xs = numba.carray(ncl.as_voidptr(x), (blocks * threads,), np.float32)
        return reverse_block[blocks, threads, 0, threads * 4].launch_status(out, xs)

    blocks, threads = int(rng.integers(2, 50)), 128
    x = rng.standard_normal(blocks * threads).astype(np.float32)
    dx, dout = cuda.to_device(x), poisoned(blocks * threads)
    assert launch(ptr(dout), ptr(dx), blocks, threads) == 0
    cuda.synchronize()
    np.testing.assert_array_equal(dout.copy_to_host(), x.reshape(blocks, threads)[:, ::-1].ravel())
