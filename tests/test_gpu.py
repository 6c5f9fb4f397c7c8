"""Real launches on a GPU, checked against NumPy on fresh random inputs.

Outputs are poisoned (NaN, or a sentinel for integers) before each launch so
that elements a kernel failed to write show up."""

import ctypes
import threading

import numba
import numpy as np
import pytest
from support import needs_numba_cuda  # noqa: E402

needs_numba_cuda()

from numba import cuda, njit
from numba.core import types as nt

import numba_cuda_launch as ncl
from support.kernels import (add_one, axpy2d, kernel_gpu, kernel_launcher, launch_block_reverse,
                     launch_index3d)

pytestmark = pytest.mark.gpu
rng = np.random.default_rng()


def ptr(devarray):
    return devarray.__cuda_array_interface__["data"][0]


def poisoned(shape, dtype=np.float32, order="C"):
    host = np.full(shape, np.nan, dtype=dtype, order=order)
    return cuda.to_device(host)


# -- the README's first example (examples/seed_cfunc.py), verbatim -----------

def test_seed_cfunc_through_ctypes():
    n = 128 * 37
    x = rng.standard_normal(n).astype(np.float32)
    d_in, d_out = cuda.to_device(x), poisoned(n)
    stream = cuda.stream()
    buffers = (ctypes.c_void_p * 2)(ptr(d_in), ptr(d_out))
    opaque = n.to_bytes(8, "little")
    fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p,
                          ctypes.c_ulong)(kernel_launcher.address)
    fn(int(stream.handle), ctypes.addressof(buffers), opaque, len(opaque))
    stream.synchronize()
    np.testing.assert_array_equal(d_out.copy_to_host(), x + 1)


# -- lazy kernels over carray views ---------------------------------------------

@cuda.jit
def axpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


@njit
def launch_axpy_1d(a, xp, yp, op, n):
    x = numba.carray(ncl.as_voidptr(xp), (n,), np.float32)
    y = numba.carray(ncl.as_voidptr(yp), (n,), np.float32)
    out = numba.carray(ncl.as_voidptr(op), (n,), np.float32)
    axpy[(n + 255) // 256, 256](a, x, y, out)


@njit
def launch_axpy_2d(a, xp, yp, op, m, n, fortran):
    if fortran:
        x = numba.farray(ncl.as_voidptr(xp), (m, n), np.float64)
        y = numba.farray(ncl.as_voidptr(yp), (m, n), np.float64)
        out = numba.farray(ncl.as_voidptr(op), (m, n), np.float64)
        axpy2d[((m + 15) // 16, (n + 15) // 16), (16, 16)](a, x, y, out)
    else:
        x = numba.carray(ncl.as_voidptr(xp), (m, n), np.float64)
        y = numba.carray(ncl.as_voidptr(yp), (m, n), np.float64)
        out = numba.carray(ncl.as_voidptr(op), (m, n), np.float64)
        axpy2d[((m + 15) // 16, (n + 15) // 16), (16, 16)](a, x, y, out)


@njit
def launch_axpy_strided(a, xp, op, m, n):
    # Non-contiguous views: every other row, columns reversed.
    x = numba.carray(ncl.as_voidptr(xp), (m, n), np.float64)[::2, ::-1]
    out = numba.carray(ncl.as_voidptr(op), (m, n), np.float64)[::2, ::-1]
    axpy2d[((x.shape[0] + 15) // 16, (n + 15) // 16), (16, 16)](a, x, x, out)


def test_lazy_kernel_1d():
    n = 10_007
    x, y = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    a = np.float32(rng.standard_normal())
    dx, dy, do = cuda.to_device(x), cuda.to_device(y), poisoned(n)
    launch_axpy_1d(a, ptr(dx), ptr(dy), ptr(do), n)
    cuda.synchronize()
    # The GPU fuses a * x + y into one FMA: compare with the exact result.
    expect = (np.float64(a) * x + y).astype(np.float32)
    np.testing.assert_allclose(do.copy_to_host(), expect, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("fortran", [False, True])
def test_lazy_kernel_2d(fortran):
    m, n = 123, 77
    order = "F" if fortran else "C"
    x = np.asarray(rng.standard_normal((m, n)), order=order)
    y = np.asarray(rng.standard_normal((m, n)), order=order)
    a = rng.standard_normal()
    dx, dy = cuda.to_device(x), cuda.to_device(y)
    do = poisoned((m, n), np.float64, order)
    launch_axpy_2d(a, ptr(dx), ptr(dy), ptr(do), m, n, fortran)
    cuda.synchronize()
    np.testing.assert_allclose(do.copy_to_host(), a * x + y)


def test_lazy_kernel_strided_views():
    m, n = 64, 40
    x = rng.standard_normal((m, n))
    a = rng.standard_normal()
    dx, do = cuda.to_device(x), poisoned((m, n), np.float64)
    launch_axpy_strided(a, ptr(dx), ptr(do), m, n)
    cuda.synchronize()
    got = do.copy_to_host()
    np.testing.assert_allclose(got[::2], (a * x + x)[::2])
    assert np.isnan(got[1::2]).all()  # rows the view skips stay unwritten


def test_python_launch_shares_compilation():
    n = 1000
    x = rng.standard_normal(n).astype(np.float32)
    dx, do = cuda.to_device(x), poisoned(n)
    launch_axpy_1d(np.float32(2), ptr(dx), ptr(dx), ptr(do), n)
    overloads = dict(axpy.overloads)
    axpy[(n + 255) // 256, 256](np.float32(2), dx, dx, do)
    cuda.synchronize()
    assert dict(axpy.overloads) == overloads  # no second compilation
    np.testing.assert_allclose(do.copy_to_host(), 3 * x, rtol=1e-6)


# -- every scalar kind ---------------------------------------------------------

@cuda.jit
def scalars_to_f64(out, i8, i16, i32, i64, u8, u16, u32, u64, f32, f64, b):
    out[0] = i8
    out[1] = i16
    out[2] = i32
    out[3] = i64
    out[4] = u8
    out[5] = u16
    out[6] = u32
    out[7] = u64
    out[8] = f32
    out[9] = f64
    out[10] = 1.0 if b else -1.0


@cuda.jit("void(float32[::1], float16, complex64, complex128)")
def half_complex(out, h, c64, c128):
    out[0] = h
    out[1] = c64.real
    out[2] = c64.imag
    out[3] = c128.real
    out[4] = c128.imag


@njit
def launch_scalars(op, i8, i16, i32, i64, u8, u16, u32, u64, f32, f64, b):
    out = numba.carray(ncl.as_voidptr(op), (11,), np.float64)
    scalars_to_f64[1, 1](out, i8, i16, i32, i64, u8, u16, u32, u64, f32, f64, b)


@njit
def launch_half_complex(op, h, c64, c128):
    out = numba.carray(ncl.as_voidptr(op), (5,), np.float32)
    half_complex[1, 1](out, h, c64, c128)


def test_every_scalar_kind():
    vals = [np.int8(rng.integers(-128, 127)), np.int16(rng.integers(-2**15, 2**15)),
            np.int32(rng.integers(-2**31, 2**31)), np.int64(rng.integers(-2**40, 2**40)),
            np.uint8(rng.integers(0, 255)), np.uint16(rng.integers(0, 2**16)),
            np.uint32(rng.integers(0, 2**32)), np.uint64(rng.integers(0, 2**50)),
            np.float32(rng.standard_normal()), np.float64(rng.standard_normal()),
            bool(rng.integers(0, 2))]
    do = poisoned(11, np.float64)
    launch_scalars(ptr(do), *vals)
    cuda.synchronize()
    expect = [float(v) for v in vals[:10]] + [1.0 if vals[10] else -1.0]
    np.testing.assert_array_equal(do.copy_to_host(), np.array(expect))

    h = rng.standard_normal()
    c64 = np.complex64(rng.standard_normal() + 1j * rng.standard_normal())
    c128 = complex(rng.standard_normal(), rng.standard_normal())
    do = poisoned(5)
    launch_half_complex(ptr(do), h, c64, c128)
    cuda.synchronize()
    expect = np.array([np.float16(h), c64.real, c64.imag, c128.real, c128.imag], np.float32)
    np.testing.assert_array_equal(do.copy_to_host(), expect)


# -- 3-D grids, shared memory, streams, reuse ------------------------------------

def test_3d_grid():
    shape = (19, 23, 11)
    do = poisoned(shape)
    launch_index3d(ptr(do), *shape, 8, 8, 4)
    cuda.synchronize()
    np.testing.assert_array_equal(do.copy_to_host(), np.arange(np.prod(shape)).reshape(shape))


def test_dynamic_shared_memory():
    blocks, threads = 13, 512
    x = rng.standard_normal(blocks * threads).astype(np.float32)
    dx, do = cuda.to_device(x), poisoned(blocks * threads)
    launch_block_reverse(ptr(dx), ptr(do), blocks, threads, 0)
    cuda.synchronize()
    np.testing.assert_array_equal(do.copy_to_host(), x.reshape(blocks, threads)[:, ::-1].ravel())


@njit
def stream_forms(xp, n, raw, stream_obj):
    x = numba.carray(ncl.as_voidptr(xp), (n,), np.float32)
    g = (n + 127) // 128
    add_one[g, 128](x)                          # default stream
    add_one[g, 128, 0](x)                       # integer 0
    add_one[g, 128, raw](x)                     # raw CUstream as int
    add_one[g, 128, ncl.as_voidptr(raw)](x)     # raw CUstream as voidptr
    add_one[g, 128, stream_obj](x)              # numba-cuda Stream object


def test_each_stream_form():
    n = 4096
    x = rng.standard_normal(n).astype(np.float32)
    dx = cuda.to_device(x)
    s = cuda.stream()
    stream_forms(ptr(dx), n, int(s.handle), s)
    s.synchronize()
    cuda.synchronize()
    np.testing.assert_allclose(dx.copy_to_host(), x + 5, rtol=1e-6)


@njit
def reuse_config(xp, n, repeats, stream):
    x = numba.carray(ncl.as_voidptr(xp), (n,), np.float32)
    cfg = add_one[(n + 255) // 256, 256, stream]
    for _ in range(repeats):
        cfg(x)


def test_configured_kernel_reused_in_loop():
    n, repeats = 3000, 25
    x = rng.standard_normal(n).astype(np.float32)
    dx = cuda.to_device(x)
    s = cuda.stream()
    reuse_config(ptr(dx), n, repeats, s)
    s.synchronize()
    np.testing.assert_allclose(dx.copy_to_host(), x + repeats, rtol=1e-5)


@cuda.jit
def count_up(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] += 1.0


@njit(nogil=True)
def hammer(xp, n, repeats, stream):
    x = numba.carray(ncl.as_voidptr(xp), (n,), np.float64)
    failures = 0
    for _ in range(repeats):
        failures += count_up[(n + 127) // 128, 128, stream].launch_status(x) != 0
    return failures


@pytest.mark.parametrize("one_stream", [False, True])
def test_eight_threads_launching(one_stream):
    n, repeats, nthreads = 1000, 2000, 8
    # Integer-valued data, so repeated += 1 is exact.
    arrays = [cuda.to_device(rng.integers(-1000, 1000, n).astype(np.float64))
              for _ in range(nthreads)]
    starts = [a.copy_to_host() for a in arrays]
    shared = cuda.stream()
    streams = [shared if one_stream else cuda.stream() for _ in range(nthreads)]
    hammer(ptr(arrays[0]), n, 1, 0)  # compile first; the kernel image loads lazily
    cuda.synchronize()
    starts[0] += 1
    barrier = threading.Barrier(nthreads)
    failures = [None] * nthreads

    def work(k):
        barrier.wait()
        failures[k] = hammer(ptr(arrays[k]), n, repeats, int(streams[k].handle))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(nthreads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    cuda.synchronize()
    assert failures == [0] * nthreads
    for a, start in zip(arrays, starts):
        np.testing.assert_array_equal(a.copy_to_host(), start + repeats)


def test_first_launch_from_many_threads():
    @cuda.jit
    def fresh(x):
        i = cuda.grid(1)
        if i < x.size:
            x[i] += 1.0

    @njit(nogil=True)
    def go(xp, n):
        x = numba.carray(ncl.as_voidptr(xp), (n,), np.float64)
        return fresh[(n + 127) // 128, 128, 0].launch_status(x)

    n, nthreads = 512, 16
    go.compile((nt.int64, nt.int64))
    arrays = [cuda.to_device(np.zeros(n)) for _ in range(nthreads)]
    barrier = threading.Barrier(nthreads)
    status = [None] * nthreads

    def work(k):
        barrier.wait()
        status[k] = go(ptr(arrays[k]), n)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(nthreads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    cuda.synchronize()
    assert status == [0] * nthreads
    for a in arrays:
        np.testing.assert_array_equal(a.copy_to_host(), np.ones(n))


# -- failures, cooperative launch, the handle API ----------------------------------

@njit
def oversized_block(xp, n, threads):
    x = numba.carray(ncl.as_voidptr(xp), (n,), np.float32)
    add_one[1, threads](x)


@njit
def oversized_block_status(xp, n, threads):
    x = numba.carray(ncl.as_voidptr(xp), (n,), np.float32)
    return add_one[1, threads].launch_status(x)


def test_failed_launch_reports_driver_error_and_context_survives():
    # 2048 threads fit the configuration's 32-bit items, so only the driver
    # refuses them (a constant 2048 is refused at typing).
    x = rng.standard_normal(64).astype(np.float32)
    dx = cuda.to_device(x)
    with pytest.raises(ncl.CudaLaunchError) as info:
        oversized_block(ptr(dx), 64, 2048)
    assert info.value.name == "CUDA_ERROR_INVALID_VALUE" and info.value.code == 1
    assert oversized_block_status(ptr(dx), 64, 2048) == 1
    cuda.synchronize()
    np.testing.assert_array_equal(dx.copy_to_host(), x)  # nothing was written
    reuse_config(ptr(dx), 64, 1, 0)  # the next launch works
    cuda.synchronize()
    np.testing.assert_allclose(dx.copy_to_host(), x + 1, rtol=1e-6)


def test_cooperative_kernel():
    @cuda.jit
    def two_phase(x, out):
        g = cuda.cg.this_grid()
        i = cuda.grid(1)
        if i < x.size:
            x[i] *= 2
        g.sync()
        if i < x.size:
            out[i] = x[x.size - 1 - i]

    @njit
    def go(xp, op, n):
        x = numba.carray(ncl.as_voidptr(xp), (n,), np.float32)
        out = numba.carray(ncl.as_voidptr(op), (n,), np.float32)
        two_phase[4, 128](x, out)

    n = 512
    x = rng.standard_normal(n).astype(np.float32)
    dx, do = cuda.to_device(x), poisoned(n)
    go(ptr(dx), ptr(do), n)
    cuda.synchronize()
    np.testing.assert_array_equal(do.copy_to_host(), (2 * x)[::-1])


def test_kernel_handle_launch_from_c_abi():
    from cuda.bindings import driver as drv

    h = ncl.kernel_handle(kernel_gpu, (nt.CPointer(nt.float32),) * 2)
    n = 256
    x = rng.standard_normal(n).astype(np.float32)
    d_in, d_out = cuda.to_device(x), poisoned(n)
    cuda.current_context()  # make numba-cuda's primary context current
    lib = ctypes.CDLL("libcuda.so.1")
    lib.cuLaunchKernel.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [
        ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p]
    args = [ctypes.c_void_p(ptr(d_in)), ctypes.c_void_p(ptr(d_out))]
    params = (ctypes.c_void_p * 2)(*[ctypes.addressof(a) for a in args])
    assert [p.size for p in h.params] == [8, 8]
    assert lib.cuLaunchKernel(h.handle, 2, 1, 1, 128, 1, 1, 0, None, params, None) == 0
    cuda.synchronize()
    np.testing.assert_array_equal(d_out.copy_to_host(), x + 1)
    del drv


@pytest.mark.skipif(not cuda.is_available() or len(cuda.gpus) < 2, reason="needs 2 GPUs")
def test_second_device_context():
    # One compiled function; each launch runs in the context current on the
    # calling thread, so the same image serves both devices.
    n = 2048
    results = []
    for dev in (0, 1):
        with cuda.gpus[dev]:
            x = rng.standard_normal(n).astype(np.float32)
            dx, do = cuda.to_device(x), poisoned(n)
            launch_axpy_1d(np.float32(3), ptr(dx), ptr(dx), ptr(do), n)
            cuda.synchronize()
            results.append((do.copy_to_host(), (np.float64(3) * x + x).astype(np.float32)))
    for got, expect in results:
        np.testing.assert_allclose(got, expect, rtol=1e-6, atol=1e-7)
