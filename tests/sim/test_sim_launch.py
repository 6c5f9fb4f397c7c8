"""Launches from @cfunc/@njit under numba-cuda's CUDA simulator
(NUMBA_ENABLE_CUDASIM=1): real kernels computing on host memory, checked
against NumPy with outputs poisoned first. Started by tests/test_simulator.py."""

import ctypes
import re
import threading

import numba
import numba.types as nt
import numpy as np
import pytest
from support import needs_numba_cuda  # noqa: E402

needs_numba_cuda()

from numba import cuda, njit
from numba.core.errors import TypingError

import numba_cuda_launch as ncl
from support.kernels import (add_one, axpy2d, kernel_gpu, kernel_launcher, launch_block_reverse,
                     launch_index3d)

assert cuda.config.ENABLE_CUDASIM, "run with NUMBA_ENABLE_CUDASIM=1"
rng = np.random.default_rng()


def ptr(a):
    return a.ctypes.data


def test_seed_cfunc():
    n = 96
    x = rng.standard_normal(n).astype(np.float32)
    out = np.full(n, np.nan, np.float32)
    buffers = (ctypes.c_void_p * 2)(ptr(x), ptr(out))
    fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p,
                          ctypes.c_ulong)(kernel_launcher.address)
    fn(0, ctypes.addressof(buffers), n.to_bytes(8, "little"), 8)
    np.testing.assert_array_equal(out, x + 1)


@njit
def launch_2d(a, xp, yp, op, m, n, layout):
    g, b = ((m + 3) // 4, (n + 3) // 4), (4, 4)
    if layout == 0:
        x = numba.carray(ncl.as_voidptr(xp), (m, n), np.float64)
        y = numba.carray(ncl.as_voidptr(yp), (m, n), np.float64)
        out = numba.carray(ncl.as_voidptr(op), (m, n), np.float64)
        axpy2d[g, b](a, x, y, out)
    elif layout == 1:
        x = numba.farray(ncl.as_voidptr(xp), (m, n), np.float64)
        y = numba.farray(ncl.as_voidptr(yp), (m, n), np.float64)
        out = numba.farray(ncl.as_voidptr(op), (m, n), np.float64)
        axpy2d[g, b, 0](a, x, y, out)
    else:  # non-contiguous views: every other row
        x = numba.carray(ncl.as_voidptr(xp), (m, n), np.float64)[::2]
        y = numba.carray(ncl.as_voidptr(yp), (m, n), np.float64)[::2]
        out = numba.carray(ncl.as_voidptr(op), (m, n), np.float64)[::2]
        axpy2d[g, b, 0, 0](a, x, y, out)


@pytest.mark.parametrize("layout", [0, 1, 2])
def test_arrays_2d(layout):
    m, n = 9, 7
    order = "F" if layout == 1 else "C"
    x = np.asarray(rng.standard_normal((m, n)), order=order)
    y = np.asarray(rng.standard_normal((m, n)), order=order)
    out = np.full((m, n), np.nan, order=order)
    a = rng.standard_normal()
    launch_2d(a, ptr(x), ptr(y), ptr(out), m, n, layout)
    if layout == 2:
        np.testing.assert_allclose(out[::2], (a * x + y)[::2])
        assert np.isnan(out[1::2]).all()
    else:
        np.testing.assert_allclose(out, a * x + y)


@cuda.jit
def scalars(out, i8, u32, i64, f32, f64, b, c):
    out[0] = i8
    out[1] = u32
    out[2] = i64
    out[3] = f32
    out[4] = f64
    out[5] = 1.0 if b else -1.0
    out[6] = c.real
    out[7] = c.imag


@njit
def launch_scalars(op, i8, u32, i64, f32, f64, b, c):
    out = numba.carray(ncl.as_voidptr(op), (8,), np.float64)
    scalars[1, 1](out, i8, u32, i64, f32, f64, b, c)


def test_scalars():
    vals = [np.int8(-5), np.uint32(4000000000), np.int64(-(2 ** 40)), np.float32(1.5),
            rng.standard_normal(), True, complex(rng.standard_normal(), 2.0)]
    out = np.full(8, np.nan)
    launch_scalars(ptr(out), *vals)
    expect = [float(v) for v in vals[:5]] + [1.0, vals[6].real, vals[6].imag]
    np.testing.assert_array_equal(out, expect)


def test_dynamic_shared_memory_and_config_variable():
    blocks, threads = 3, 16
    x = rng.standard_normal(blocks * threads).astype(np.float32)
    out = np.full(blocks * threads, np.nan, np.float32)
    launch_block_reverse(ptr(x), ptr(out), blocks, threads, 0)
    np.testing.assert_array_equal(out, x.reshape(blocks, threads)[:, ::-1].ravel())


def test_3d_grid():
    shape = (3, 5, 2)
    out = np.full(shape, np.nan, np.float32)
    launch_index3d(ptr(out), *shape, 2, 2, 1)
    np.testing.assert_array_equal(out, np.arange(30).reshape(shape))


@njit(nogil=True)
def add_repeatedly(xp, n, times):
    x = numba.carray(ncl.as_voidptr(xp), (n,), np.float64)
    status = 0
    for _ in range(times):
        status |= add_one[(n + 7) // 8, 8].launch_status(x)
    return status


def test_threads_are_serialised_and_correct():
    arrays = [np.zeros(16) for _ in range(6)]
    results = []

    def work(a):
        results.append(add_repeatedly(ptr(a), 16, 5))

    threads = [threading.Thread(target=work, args=(a,)) for a in arrays]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [0] * 6
    for a in arrays:
        np.testing.assert_array_equal(a, np.full(16, 5.0))


@cuda.jit
def failing(x):
    if cuda.grid(1) == 3:
        raise ValueError("kernel refused")


@njit
def launch_failing(xp):
    x = numba.carray(ncl.as_voidptr(xp), (4,), np.float32)
    failing[1, 4](x)


@njit
def launch_failing_status(xp):
    x = numba.carray(ncl.as_voidptr(xp), (4,), np.float32)
    return failing[1, 4].launch_status(x)


def test_kernel_exception_propagates():
    x = np.zeros(4, np.float32)
    with pytest.raises(ValueError, match="kernel refused"):
        launch_failing(ptr(x))
    assert launch_failing_status(ptr(x)) == 719  # CUDA_ERROR_LAUNCH_FAILED


def test_typing_errors_are_the_same():
    def wrong_count(p):
        x = numba.carray(ncl.as_voidptr(p), (4,), np.float32)
        kernel_gpu[1, 1](x)

    with pytest.raises(TypingError, match="kernel 'kernel_gpu' takes 2 argument"):
        njit((nt.intp,))(wrong_count)

    def voidptr_to_lazy(p):
        add_one[1, 1](ncl.as_voidptr(p))

    with pytest.raises(TypingError, match="voidptr"):
        njit((nt.intp,))(voidptr_to_lazy)

    def bad_grid(p):
        x = numba.carray(ncl.as_voidptr(p), (4,), np.float32)
        add_one[1.5, 1](x)

    with pytest.raises(TypingError, match="griddim"):
        njit((nt.intp,))(bad_grid)


# -- the simulator agrees with the GPU on refusals and argument kinds -----------------

@njit
def grid_status(xp, g):
    x = numba.carray(ncl.as_voidptr(xp), (4,), np.float32)
    return add_one[g, 4].launch_status(x)


def test_out_of_range_grid_refused_as_on_a_gpu():
    x = np.zeros(4, np.float32)
    for g in (0, -1, 2 ** 32):
        assert grid_status(ptr(x), g) == 1  # CUDA_ERROR_INVALID_VALUE, nothing run
    np.testing.assert_array_equal(x, np.zeros(4))
    assert grid_status(ptr(x), 1) == 0
    np.testing.assert_array_equal(x, np.ones(4))


@njit
def dims_status(xp, g, b):
    x = numba.carray(ncl.as_voidptr(xp), (4,), np.float32)
    return add_one[g, b].launch_status(x)


@njit
def dims_raising(xp, g, b):
    add_one[g, b](numba.carray(ncl.as_voidptr(xp), (4,), np.float32))


@pytest.mark.parametrize("grid, block, reason", [
    (2 ** 31, 4, "griddim is more than CUDA launches (1..2**31-1 in x and 1..65535 in y and z)"),
    ((1, 65536), 4, "griddim is more than CUDA launches"),
    ((1, 1, 65536), 4, "griddim is more than CUDA launches"),
    (1, 1025, "blockdim is more than CUDA launches (1..1024 in x and y and 1..64 in z)"),
    (1, (1, 1, 65), "blockdim is more than CUDA launches"),
    (1, (32, 32, 2), "blockdim has more than 1024 threads in all"),
    (1, (2 ** 16, 2 ** 16, 1), "blockdim is more than CUDA launches"),
])
def test_run_time_dimensions_beyond_cuda_limits_refused_as_on_a_gpu(grid, block, reason):
    # within the driver's 32-bit range, so compiled code passes them on: a
    # GPU's driver refuses them (CUDA_ERROR_INVALID_VALUE) and nothing runs;
    # the simulator would run them (or run out of memory trying)
    x = np.zeros(4, np.float32)
    assert dims_status(ptr(x), grid, block) == 1
    with pytest.raises(ncl.CudaLaunchError) as info:
        dims_raising(ptr(x), grid, block)
    first = str(info.value).splitlines()[0]
    assert "kernel 'add_one'" in first and "CUDA_ERROR_INVALID_VALUE" in first
    assert reason in first
    np.testing.assert_array_equal(x, np.zeros(4))
    assert dims_status(ptr(x), 1, 4) == 0
    np.testing.assert_array_equal(x, np.ones(4))


@njit
def shared_status(p, shm):
    return add_one[1, 4, 0, shm].launch_status(numba.carray(ncl.as_voidptr(p), (4,), np.float32))


@njit
def shared_raising(p, shm):
    add_one[1, 4, 0, shm](numba.carray(ncl.as_voidptr(p), (4,), np.float32))


def test_more_shared_memory_than_the_simulated_device_gives_is_refused_as_on_a_gpu():
    # the simulator's device is of compute capability 5.2: 48 KiB a block
    x = np.zeros(4, np.float32)
    assert shared_status(ptr(x), 48 * 1024) == 0
    np.testing.assert_array_equal(x, np.ones(4))
    for shm in (48 * 1024 + 1, 300 * 1024):
        assert shared_status(ptr(x), shm) == 1  # CUDA_ERROR_INVALID_VALUE, nothing run
        with pytest.raises(ncl.CudaLaunchError) as info:
            shared_raising(ptr(x), shm)
        # the sentence a GPU's refusal gives
        assert ("sharedmem is more dynamic shared memory than the device gives a block of this "
                "kernel (CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN") in str(info.value)
        assert "CUDA_ERROR_INVALID_VALUE" in str(info.value)
    np.testing.assert_array_equal(x, np.ones(4))


@njit
def launch_numpy(a):
    return add_one[1, 4].launch_status(a)


def test_numpy_array_refused_as_on_a_gpu():
    a = np.zeros(4, np.float32)
    assert launch_numpy(a) == 1
    np.testing.assert_array_equal(a, np.zeros(4))


@cuda.jit("void(float32[::1], float16)")
def store_half(out, h):
    out[0] = h


@cuda.jit
def copy_half(out, src):
    out[0] = src[0]


@njit
def launch_half(op, v, hp):
    out = numba.carray(ncl.as_voidptr(op), (1,), np.float32)
    store_half[1, 1](out, v)
    halves = numba.carray(ncl.as_voidptr(hp), (1,), np.float16)
    out2 = numba.carray(ncl.as_voidptr(op + 4), (1,), np.float32)
    copy_half[1, 1](out2, halves)


def test_float16_scalars():
    v = rng.standard_normal()
    h = np.array([rng.standard_normal()], np.float16)
    out = np.full(2, np.nan, np.float32)
    launch_half(ptr(out), v, ptr(h))
    assert out[0] == np.float32(np.float16(v))
    assert out[1] == np.float32(h[0])


@njit
def on_stream(xp, n, stream):
    x = numba.carray(ncl.as_voidptr(xp), (n,), np.float32)
    add_one[1, n, stream](x)


def test_stream_object_argument():
    x = np.zeros(8, np.float32)
    on_stream(ptr(x), 8, cuda.stream())
    np.testing.assert_array_equal(x, np.ones(8))


# -- device arrays of the simulator --------------------------------------------------

@cuda.jit
def axpy_dev(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


@njit
def launch_axpy_dev(a, x, y, out, stream):
    axpy_dev[(out.size + 31) // 32, 32, stream](a, x, y, out)
    return out.size, x[::2].shape[0]


def test_simulated_device_arrays():
    x = rng.standard_normal(50).astype(np.float32)
    y = rng.standard_normal(50).astype(np.float32)
    dx, dy = cuda.to_device(x), cuda.to_device(y)
    dout = cuda.to_device(np.full(50, np.nan, np.float32))
    assert launch_axpy_dev(np.float32(3), dx, dy, dout, cuda.stream()) == (50, 25)
    np.testing.assert_allclose(dout.copy_to_host(), 3 * x + y, rtol=1e-6)


def test_simulated_device_arrays_after_host_arrays_and_back():
    # Numba's C dispatch types simulated arrays as host arrays (their
    # _numba_type_); the package routes them to their own overload.
    @njit
    def maybe_launch(a, x, y, out):
        if out.size > 10:
            axpy_dev[(out.size + 31) // 32, 32](a, x, y, out)
        return out.size

    small = np.zeros(4, np.float32)
    assert maybe_launch(np.float32(1), small, small, small) == 4
    x = rng.standard_normal(40).astype(np.float32)
    y = rng.standard_normal(40).astype(np.float32)
    for _ in range(2):
        dout = cuda.to_device(np.full(40, np.nan, np.float32))
        assert maybe_launch(np.float32(2), cuda.to_device(x), cuda.to_device(y), dout) == 40
        np.testing.assert_allclose(dout.copy_to_host(), 2 * x + y, rtol=1e-6)
        assert maybe_launch(np.float32(1), small, small, small) == 4


def test_simulated_device_array_element_access_refused():
    @njit
    def peek(x):
        return x[0]

    with pytest.raises(TypingError, match="would dereference device memory"):
        peek(cuda.to_device(np.zeros(4)))


def test_clusters_refused_with_a_sentence():
    def cluster(p):
        add_one[2, 32, 0, 0, 2](numba.carray(ncl.as_voidptr(p), (64,), np.float32))

    with pytest.raises(TypingError) as info:
        njit(cluster)(0)
    first = str(info.value).splitlines()[0]
    assert "thread-block clusters" in first and "simulator" in first


# -- occupancy: the simulator's model, the same from every form -----------------------

@njit
def occupancy_answers(xp, block):
    x = numba.carray(ncl.as_voidptr(xp), (64,), np.float32)
    cfg = add_one[1, block]
    return (cfg.max_active_blocks(x), cfg.max_active_blocks_status(x),
            cfg.max_potential_block_size(x), cfg.max_potential_block_size_status(x))


@pytest.mark.parametrize("block", [1, 32, 1024])
def test_occupancy_model_one_block_at_a_time(block):
    x = np.zeros(64, np.float32)
    assert occupancy_answers(ptr(x), block) == (1, (0, 1), (1, 1024), (0, 1, 1024))


def test_occupancy_model_block_over_1024_threads():
    x = np.zeros(64, np.float32)
    assert occupancy_answers(ptr(x), (32, 33))[:2] == (0, (0, 0))


def test_occupancy_sized_launch_runs():
    @njit
    def sized(x, y):
        _, block = add_dev[1, 1].max_potential_block_size(x, y)
        add_dev[(x.size + block - 1) // block, block](x, y)

    x = rng.standard_normal(40).astype(np.float32)
    y = rng.standard_normal(40).astype(np.float32)
    dx = cuda.to_device(x)
    sized(dx, cuda.to_device(y))
    np.testing.assert_allclose(dx.copy_to_host(), x + y, rtol=1e-6)


@pytest.mark.parametrize("status", ["", "_status"])
def test_max_active_clusters_refused(status):
    src = ("def q(p):\n    return add_one[1, 32].max_active_clusters%s("
           "numba.carray(ncl.as_voidptr(p), (64,), np.float32))\n" % status)
    ns = dict(globals())
    exec(src, ns)
    with pytest.raises(TypingError) as info:
        njit(ns["q"])(0)
    first = str(info.value).splitlines()[0]
    assert "max_active_clusters" + status in first and "clusters are not simulated" in first


# -- kernels as arguments, on_stream, kernels made by an early-bound jit --------------

@cuda.jit
def add_dev(x, y):
    i = cuda.grid(1)
    if i < x.size:
        x[i] += y[i]


@cuda.jit
def sub_dev(x, y):
    i = cuda.grid(1)
    if i < x.size:
        x[i] -= y[i]


@njit
def launch_given(kernel, x, y):
    kernel[(x.size + 31) // 32, 32](x, y)


def test_kernel_as_njit_argument():
    x = rng.standard_normal(50).astype(np.float32)
    y = rng.standard_normal(50).astype(np.float32)
    dx, dy = cuda.to_device(x), cuda.to_device(y)
    launch_given(add_dev, dx, dy)
    np.testing.assert_allclose(dx.copy_to_host(), x + y, rtol=1e-6)
    launch_given(sub_dev, dx, dy)  # another kernel: its own specialisation
    np.testing.assert_allclose(dx.copy_to_host(), x, rtol=1e-5, atol=1e-6)


def test_on_stream_wrapper():
    x = rng.standard_normal(50).astype(np.float32)
    y = rng.standard_normal(50).astype(np.float32)
    dx = cuda.to_device(x)
    stream = cuda.stream()
    launch_given(add_dev, ncl.on_stream(dx, stream), ncl.on_stream(cuda.to_device(y), stream))
    np.testing.assert_allclose(dx.copy_to_host(), x + y, rtol=1e-6)


def test_early_bound_jit_kernel_explained():
    # cuda.jit as bound before the package was imported (its wrapper's target).
    early_jit = cuda.jit.__wrapped__

    @early_jit(nt.void(nt.CPointer(nt.float32)))
    def eager(x):
        x[0] = 1

    def launch(p):
        eager[1, 1](ncl.as_voidptr(p))

    with pytest.raises(TypingError) as info:
        njit((nt.intp,))(launch)
    first = str(info.value).splitlines()[0]
    # (the package as its messages name it: numba.cuda.cpu_launch when patched)
    assert "kernel 'eager'" in first and re.search(r"bound before numba[._a-z]+ was imported", first)


def test_kernel_of_the_package_jit_is_not_called_early_bound():
    def launch(p):
        add_one[1, 1](ncl.as_voidptr(p))

    with pytest.raises(TypingError) as info:
        njit((nt.intp,))(launch)
    assert "bound before" not in str(info.value) and "voidptr" in str(info.value)
