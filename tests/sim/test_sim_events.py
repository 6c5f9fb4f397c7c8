"""Synchronisation and events from @njit/@cfunc under numba-cuda's CUDA
simulator (NUMBA_ENABLE_CUDASIM=1): the programs written for a GPU run,
synchronising does nothing (simulated launches complete when they return)
and events time on the host clock. Started by tests/test_simulator.py."""

import ctypes
import gc
import time

import numba
import numba.types as nt
import numpy as np
import pytest
from support import needs_numba_cuda  # noqa: E402

needs_numba_cuda()

from numba import cuda, njit

import numba_cuda_launch as ncl
from support.kernels import add_one

assert cuda.config.ENABLE_CUDASIM, "run with NUMBA_ENABLE_CUDASIM=1"
rng = np.random.default_rng()
INVALID_HANDLE = 400


@cuda.jit
def axpy_slowly(a, x, y, out, repeat):
    i = cuda.grid(1)
    if i < out.size:
        acc = 0.0
        for _ in range(repeat):
            acc = a * x[i] + y[i]
        out[i] = acc


@njit
def timed_axpy(a, xp, yp, op, n, repeat, stream):
    x = numba.carray(ncl.as_voidptr(xp), (n,), np.float64)
    y = numba.carray(ncl.as_voidptr(yp), (n,), np.float64)
    out = numba.carray(ncl.as_voidptr(op), (n,), np.float64)
    start = ncl.event()
    end = ncl.event()
    start.record(stream)
    axpy_slowly[(n + 31) // 32, 32, stream](a, x, y, out, repeat)
    end.record(stream)
    end.synchronize()
    stream.synchronize()
    return start.elapsed_time(end), end.query(), stream.query()


def test_events_time_a_simulated_launch():
    n = 64
    x, y = rng.standard_normal(n), rng.standard_normal(n)
    out = np.full(n, np.nan)
    a = rng.standard_normal()
    stream = cuda.stream()
    timed_axpy(a, x.ctypes.data, y.ctypes.data, out.ctypes.data, n, 1, stream)  # compile
    out[:] = np.nan
    t0 = time.perf_counter()
    ms, done, idle = timed_axpy(a, x.ctypes.data, y.ctypes.data, out.ctypes.data, n, 200, stream)
    host_ms = (time.perf_counter() - t0) * 1e3
    np.testing.assert_allclose(out, a * x + y)
    assert done is True and idle is True
    assert 0 < ms <= host_ms


@njit
def sync_forms(s):
    ncl.synchronize()
    ncl.stream_synchronize(s)
    ncl.stream_synchronize()
    return (ncl.synchronize_status(), ncl.stream_synchronize_status(s),
            ncl.stream_query(s), ncl.stream_query_status(s))


def test_synchronize_and_query_are_immediate():
    assert sync_forms(0) == (0, 0, True, 0)
    assert sync_forms(12345) == (0, 0, True, 0)  # any stream handle: none is real here
    ncl.synchronize()
    assert ncl.stream_query(0) is True


@njit
def elapsed_errors():
    a = ncl.event()
    b = ncl.event()
    c = ncl.event(timing=False)
    d = ncl.event()
    a.record()
    s_unrecorded = a.elapsed_time_status(b)[0]
    b.record()
    c.record()
    d.record()
    s_no_timing = a.elapsed_time_status(c)[0]
    d.destroy()
    s_destroyed = a.elapsed_time_status(d)[0]
    s_ok, ms = a.elapsed_time_status(b)
    return s_unrecorded, s_no_timing, s_destroyed, d.query_status(), s_ok, ms


def test_elapsed_time_errors_as_on_a_gpu():
    s1, s2, s3, q, ok, ms = elapsed_errors()
    assert (s1, s2, s3, q, ok) == (INVALID_HANDLE,) * 4 + (0,)
    assert ms >= 0


@njit
def never_recorded():
    a = ncl.event()
    b = ncl.event()
    return a.elapsed_time(b)


def test_raising_form_names_the_error():
    with pytest.raises(ncl.CudaError) as info:
        never_recorded()
    assert info.value.name == "CUDA_ERROR_INVALID_HANDLE"
    assert info.value.operation == "cuEventElapsedTime"


def test_events_from_python_and_back():
    @njit
    def make_recorded():
        e = ncl.event()
        e.record()
        return e

    a = make_recorded()
    time.sleep(0.02)
    b = ncl.event()
    b.record(cuda.stream())
    ms = a.elapsed_time(b)
    assert 15 <= ms < 5000
    assert a.query() and b.query()
    assert a.handle == 0  # no CUevent behind a simulated event
    a.destroy()
    with pytest.raises(ncl.CudaError, match="CUDA_ERROR_INVALID_HANDLE"):
        a.record()
    del a, b
    gc.collect()


def test_events_in_a_cfunc():
    @numba.cfunc(nt.float32(nt.voidptr, nt.voidptr, nt.int64))
    def run(xp, stream, n):
        x = numba.carray(xp, (n,), np.float32)
        start = ncl.event()
        end = ncl.event(blocking=True)
        start.record(stream)
        add_one[1, n, stream](x)
        end.record(stream)
        ncl.stream_synchronize(stream)
        status, ms = start.elapsed_time_status(end)
        if status != 0:
            return -1.0
        return ms

    x = rng.standard_normal(16).astype(np.float32)
    want = x + 1
    fn = ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_void_p, ctypes.c_void_p,
                          ctypes.c_int64)(run.address)
    assert fn(x.ctypes.data, 0, 16) >= 0
    np.testing.assert_array_equal(x, want)


def test_many_cycles_release_everything():
    @njit
    def cycles(n):
        total = 0.0
        for _ in range(n):
            a = ncl.event()
            a.record()
            total += a.elapsed_time(a)
        return total

    assert cycles(1000) == 0.0
