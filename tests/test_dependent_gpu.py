"""Programmatic dependent launches on a GPU (compute capability 9.0+):
chains of kernels that let the next one start early and wait for the one
before, launched with ``kernel[...].dependent()`` from ``@njit``, recorded
into a graph (whose edges are programmatic), through ``jax_kernel(...,
dependent=True)`` and from a C library; every result exact against NumPy
on fresh inputs."""

import ctypes
import ctypes.util

import numba
import numba.types as nt
import numpy as np
import pytest
from support import needs_numba_cuda  # noqa: E402

needs_numba_cuda()

from numba import cuda, njit

import numba_cuda_launch as ncl
from numba_cuda_launch import graphs
from support import recordings
from support.kernels import dependent_step as step, dependent_steps as expected

pytestmark = pytest.mark.gpu
#: what a test leaves recording is ended, failing it (autouse)
no_recording_left = recordings.no_recording_left
rng = np.random.default_rng()
f32p = nt.CPointer(nt.float32)
BLOCK = 256


def _needs_hopper():
    if cuda.get_current_device().compute_capability < (9, 0):
        pytest.fail("dependent launches need compute capability 9.0; the GPU tests run on one")


@njit
def chain(a, b, times, stream, dependent):
    status = 0
    grid = (a.size + BLOCK - 1) // BLOCK
    for k in range(times):
        src, dst = (a, b) if k % 2 == 0 else (b, a)
        if dependent:
            status |= step[grid, BLOCK, stream].dependent().launch_status(src, dst)
        else:
            status |= step[grid, BLOCK, stream].launch_status(src, dst)
    return status


@njit
def record(a, b, times, stream, dependent):
    graphs.begin_capture(stream)
    status = chain(a, b, times, stream, dependent)
    return status, graphs.end_capture(stream)


@pytest.mark.parametrize("dependent", [True, False])
def test_dependent_chain_is_exact(dependent):
    _needs_hopper()
    n = int(rng.integers(100_000, 300_000))
    x = rng.standard_normal(n).astype(np.float32)
    a, b = cuda.to_device(x), cuda.to_device(np.full(n, np.nan, np.float32))
    stream = cuda.stream()
    assert chain(a, b, 200, stream, dependent) == 0
    stream.synchronize()
    np.testing.assert_array_equal(a.copy_to_host(), expected(x, 200))


@pytest.mark.parametrize("stream", [0, 1, 2], ids=["null", "legacy", "per-thread"])
def test_dependent_chain_on_a_default_stream(stream):
    # The default streams (0, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD) take
    # the attribute too: the driver runs the chain in order (what the
    # attribute allows is only an earlier start), exact against NumPy.
    _needs_hopper()
    n = int(rng.integers(10_000, 90_000))
    x = rng.standard_normal(n).astype(np.float32)
    a, b = cuda.to_device(x), cuda.to_device(np.full(n, np.nan, np.float32))
    assert chain(a, b, 50, stream, True) == 0
    cuda.synchronize()
    np.testing.assert_array_equal(a.copy_to_host(), expected(x, 50))


def _edge_types(graph_handle):
    """The dependency type of each edge of the graph (0 default, 1
    programmatic), read with cuGraphGetEdges_v2 (CUDA 12.3+)."""
    lib = ctypes.CDLL(ctypes.util.find_library("cuda") or "libcuda.so.1")
    get = lib.cuGraphGetEdges_v2
    get.argtypes = [ctypes.c_void_p] + [ctypes.c_void_p] * 3 + [ctypes.POINTER(ctypes.c_size_t)]
    count = ctypes.c_size_t(0)
    assert get(graph_handle, None, None, None, ctypes.byref(count)) == 0
    frm, to = (ctypes.c_void_p * count.value)(), (ctypes.c_void_p * count.value)()
    data = (ctypes.c_uint8 * (8 * count.value))()  # CUgraphEdgeData: from_port, to_port, type
    assert get(graph_handle, frm, to, data, ctypes.byref(count)) == 0
    return [data[8 * k + 2] for k in range(count.value)]


@pytest.mark.parametrize("dependent", [True, False])
def test_recorded_dependent_chain_has_programmatic_edges(dependent):
    _needs_hopper()
    n = int(rng.integers(10_000, 50_000))
    x = rng.standard_normal(n).astype(np.float32)
    a, b = cuda.to_device(x), cuda.to_device(np.full(n, np.nan, np.float32))
    stream = cuda.stream()
    status, graph = record(a, b, 20, stream, dependent)
    assert status == 0
    assert _edge_types(graph.handle) == [1 if dependent else 0] * 19
    exe = graph.instantiate()
    for _ in range(3):
        exe.launch(stream)
    stream.synchronize()
    np.testing.assert_array_equal(a.copy_to_host(), expected(x, 60))
    exe.destroy(), graph.destroy()


def test_jax_kernel_dependent_chain():
    _needs_hopper()
    jax = pytest.importorskip("jax")
    from numba_cuda_launch.jax import jax_kernel

    k = jax_kernel(step, lambda x: x, lambda x: ((x.shape[0] + BLOCK - 1) // BLOCK, BLOCK),
                   dependent=True)

    @jax.jit
    def f(x):
        for _ in range(10):
            x = k(x)
        return x

    x = rng.standard_normal(77_777).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(f(jax.device_put(x, jax.devices("gpu")[0]))),
                                  expected(x, 10))


@cuda.jit(nt.void(f32p, f32p, nt.int64))
def step_ptr(src, dst, n):
    ncl.griddepcontrol_launch_dependents()
    i = cuda.grid(1)
    ncl.griddepcontrol_wait()
    if i < n:
        dst[i] = src[i] * np.float32(0.5) + np.float32(1)


@numba.cfunc(nt.int32(nt.voidptr, f32p, f32p, nt.int64, nt.int32))
def chain_launch(stream, a, b, n, times):
    status = 0
    for k in range(times):
        if k % 2 == 0:
            status |= step_ptr[(n + 255) // 256, 256, stream].dependent().launch_status(a, b, n)
        else:
            status |= step_ptr[(n + 255) // 256, 256, stream].dependent().launch_status(b, a, n)
    return status


def test_c_library_dependent_chain(tmp_path):
    _needs_hopper()
    from numba_cuda_launch import aot

    path = str(tmp_path / "libdepchain.so")
    aot.build(path, {"dep_chain": chain_launch})
    lib = ctypes.CDLL(path)
    lib.dep_chain.restype = ctypes.c_int32
    lib.dep_chain.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64, ctypes.c_int32]
    n = int(rng.integers(10_000, 90_000))
    x = rng.standard_normal(n).astype(np.float32)
    a, b = cuda.to_device(x), cuda.to_device(np.full(n, np.nan, np.float32))
    stream = cuda.stream()
    assert lib.dep_chain(int(stream.handle), a.device_ctypes_pointer.value,
                         b.device_ctypes_pointer.value, n, 30) == 0
    stream.synchronize()
    np.testing.assert_array_equal(a.copy_to_host(), expected(x, 30))
