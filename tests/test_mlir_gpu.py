"""numba-cuda-mlir kernels launched from compiled code on a GPU, checked
against NumPy on fresh random inputs, and against the same kernel launched
from Python through numba-cuda-mlir's own launcher (which packs the
parameters its own way: the results must agree). Outputs are poisoned (NaN)
before each launch. Device memory comes from numba-cuda (raw pointers and
DeviceNDArrays), CuPy and PyTorch; thread-block clusters, CUDA graphs and
occupancy queries are checked against the driver's own answers. Both
compilers run in this one process."""

import ctypes

import numba
import numpy as np
import pytest
from support import needs_numba_cuda  # noqa: E402

needs_numba_cuda()

from numba import cuda, njit
from numba.core import types as nt

numba_cuda_mlir = pytest.importorskip("numba_cuda_mlir")

import numba_cuda_launch as ncl  # noqa: E402
from numba_cuda_launch import graphs  # noqa: E402
from numba_cuda_mlir import cuda as mcuda  # noqa: E402
from numba_cuda_mlir import types as mt  # noqa: E402
from support.driver_queries import cufunction, max_active_clusters  # noqa: E402

pytestmark = pytest.mark.gpu
# Eager kernels compile at decoration, inside numba-cuda-mlir: with no GPU
# (the tests are skipped, the module is still collected) the architecture
# must be set once numba_cuda_mlir is imported.
if not cuda.is_available():
    ncl.set_compute_capability(ncl.get_compute_capability() or (9, 0))
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


# -- device arrays and stream objects ------------------------------------------

class Producer:
    """A library's device arrays and streams: ``put`` (host to device),
    ``get`` (device to host), ``stream()``."""

    def __init__(self, lib):
        self.lib = lib
        if lib == "numba-cuda":
            self.put, self.get, self.stream = cuda.to_device, lambda d: d.copy_to_host(), \
                cuda.stream
        elif lib == "cupy":
            cp = pytest.importorskip("cupy")
            self.put, self.get = cp.asarray, cp.asnumpy
            self.stream = lambda: cp.cuda.Stream(non_blocking=True)
        else:
            torch = pytest.importorskip("torch")
            self.put = lambda h: torch.from_numpy(np.ascontiguousarray(h)).cuda()
            self.get, self.stream = lambda d: d.cpu().numpy(), torch.cuda.Stream

    def poisoned(self, shape, dtype=np.float32):
        return self.put(np.full(shape, np.nan, dtype=dtype))


LIBRARIES = ["numba-cuda", "cupy", "torch"]


@njit
def launch_axpy_arrays(out, a, x, y, stream):
    axpy[(out.shape[0] + 255) // 256, 256, stream](out, a, x, y)


@pytest.mark.parametrize("lib", LIBRARIES)
def test_device_arrays_and_streams_of_each_library(lib):
    p = Producer(lib)
    n = int(rng.integers(1000, 100000))
    a = np.float32(rng.standard_normal())
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    dx, dy, dout = p.put(x), p.put(y), p.poisoned(n)
    cuda.synchronize()  # the inputs are written (producer streams: test_devicearray_gpu.py)
    stream = p.stream()
    launch_axpy_arrays(dout, a, dx, dy, stream)
    stream.synchronize()
    np.testing.assert_allclose(p.get(dout), a * x + y, rtol=1e-5, atol=1e-6)


@njit
def launch_transpose_arrays(out, big, s):
    rows, cols = out.shape
    transpose_scaled[((rows + 15) // 16, (cols + 15) // 16), (16, 16)](out, big[:, ::2], s)


@pytest.mark.parametrize("lib", ["numba-cuda", "cupy"])
def test_fortran_and_strided_device_arrays(lib):
    p = Producer(lib)
    rows, cols = int(rng.integers(17, 200)), int(rng.integers(17, 200))
    s = float(rng.standard_normal())
    big = rng.standard_normal((cols, 2 * rows))
    dbig = p.put(big)
    dout = p.put(np.asfortranarray(np.full((rows, cols), np.nan)))
    cuda.synchronize()
    launch_transpose_arrays(dout, dbig, s)
    cuda.synchronize()
    np.testing.assert_allclose(p.get(dout), s * big[:, ::2].T, rtol=1e-12)


def test_device_arrays_agree_with_numba_cuda_mlirs_own_launch():
    cp = pytest.importorskip("cupy")
    n = int(rng.integers(1000, 100000))
    a = np.float32(rng.standard_normal())
    dx, dy = (cp.asarray(rng.standard_normal(n).astype(np.float32)) for _ in range(2))
    d1, d2 = (cp.full(n, np.nan, np.float32) for _ in range(2))
    launch_axpy_arrays(d1, a, dx, dy, 0)
    axpy[(n + 255) // 256, 256](d2, a, dx, dy)
    cp.cuda.runtime.deviceSynchronize()
    np.testing.assert_array_equal(cp.asnumpy(d1), cp.asnumpy(d2))
    assert not np.isnan(cp.asnumpy(d1)).any()


# -- thread-block clusters -------------------------------------------------------

def _cc():
    if not cuda.is_available():
        return (0, 0)
    return tuple(cuda.get_current_device().compute_capability)


needs_hopper = pytest.mark.skipif("not _cc() >= (9, 0)", reason="clusters need sm_90")


@mcuda.jit
def cluster_ids(out):
    if mcuda.threadIdx.x == 0:
        # numba-cuda-mlir 0.6.0's block_idx_in_cluster reads %clusterid.x
        # (the cluster's index in the grid); its cluster_ctarank does not
        # compile there.
        out[mcuda.blockIdx.x] = mcuda.intrin.block_idx_in_cluster()


@njit
def launch_cluster_ids(out, clustered, c, stream):
    if clustered:
        cluster_ids[out.shape[0], 32, stream, 0, c](out)
    else:
        cluster_ids[out.shape[0], 32, stream](out)


@needs_hopper
@pytest.mark.parametrize("c", [1, 2, 4, 8])
def test_cluster_item_groups_blocks_into_clusters(c):
    blocks = c * int(rng.integers(1, 16))
    dout, plain = cuda.to_device(np.full(blocks, -1, np.int32)), \
        cuda.to_device(np.full(blocks, -1, np.int32))
    stream = cuda.stream()
    launch_cluster_ids(dout, True, c, stream)
    launch_cluster_ids(plain, False, c, stream)
    stream.synchronize()
    np.testing.assert_array_equal(dout.copy_to_host(), np.arange(blocks) // c)
    np.testing.assert_array_equal(plain.copy_to_host(), np.arange(blocks))
    cp = pytest.importorskip("cupy")
    theirs = cp.full(blocks, -1, np.int32)
    cluster_ids.configure(blocks, 32, cluster=c)(theirs)  # numba-cuda-mlir's own launch
    cp.cuda.runtime.deviceSynchronize()
    np.testing.assert_array_equal(cp.asnumpy(theirs), dout.copy_to_host())


@needs_hopper
def test_cluster_not_dividing_the_grid_is_refused_at_run_time():
    dout = cuda.to_device(np.full(6, -1, np.int32))
    with pytest.raises(ncl.CudaLaunchError, match="CUDA_ERROR_INVALID_VALUE"):
        launch_cluster_ids(dout, True, 4, 0)
    np.testing.assert_array_equal(dout.copy_to_host(), np.full(6, -1))


# -- graphs ----------------------------------------------------------------------

@njit
def capture_axpy(out, a, x, y, stream):
    graphs.begin_capture(stream)
    axpy[(out.shape[0] + 255) // 256, 256, stream](out, a, x, y)
    node = graphs.last_launch(stream)
    return graphs.end_capture(stream), node


@njit
def update_axpy(exe, node, out, a, x, y, stream):
    exe.update_launch(node, axpy[(out.shape[0] + 255) // 256, 256, stream], out, a, x, y)
    exe.launch(stream)


def test_graph_capture_replay_and_update_of_an_mlir_kernel():
    n = int(rng.integers(1000, 50000))
    a, a2 = (np.float32(v) for v in rng.standard_normal(2))
    x, y, x2 = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
    dx, dy, dx2 = cuda.to_device(x), cuda.to_device(y), cuda.to_device(x2)
    dout, dout2 = poisoned(n), poisoned(n)
    stream = cuda.stream()
    graph, node = capture_axpy(dout, a, dx, dy, stream)
    stream.synchronize()
    assert np.isnan(dout.copy_to_host()).all()  # recorded, not run
    exe = graph.instantiate()
    exe.launch(stream)
    stream.synchronize()
    np.testing.assert_allclose(dout.copy_to_host(), a * x + y, rtol=1e-5, atol=1e-6)
    update_axpy(exe, node, dout2, a2, dx2, dy, stream)  # other arrays, another scalar
    stream.synchronize()
    np.testing.assert_allclose(dout2.copy_to_host(), a2 * x2 + y, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(dout.copy_to_host(), a * x + y, rtol=1e-5, atol=1e-6)
    assert exe.destroy() == 0 and graph.destroy() == 0


# -- occupancy -------------------------------------------------------------------

AXPY_TYPES = (nt.float32[::1], nt.float32, nt.float32[::1], nt.float32[::1])


@njit
def axpy_occupancy(out, x, block, smem):
    cfg = axpy[64, block, 0, smem]
    grid, best = cfg.max_potential_block_size(out, np.float32(1), x, x)
    return cfg.max_active_blocks(out, np.float32(1), x, x), grid, best


def test_occupancy_of_an_mlir_kernel_equals_the_drivers():
    from cuda.bindings import driver as drv

    dx = cuda.device_array(4096, np.float32)
    func = cufunction(axpy, AXPY_TYPES)
    libcuda = ctypes.CDLL("libcuda.so.1")
    for block in (32, 128, 256, 1024):
        for smem in (0, 4096, 40_000):
            blocks, grid, best = axpy_occupancy(dx, dx, block, smem)
            err, theirs = drv.cuOccupancyMaxActiveBlocksPerMultiprocessor(func, block, smem)
            assert err == drv.CUresult.CUDA_SUCCESS and blocks == theirs > 0, (block, smem)
            min_grid, block_size = ctypes.c_int(), ctypes.c_int()
            assert libcuda.cuOccupancyMaxPotentialBlockSize(
                ctypes.byref(min_grid), ctypes.byref(block_size), ctypes.c_void_p(int(func)),
                None, ctypes.c_size_t(smem), 0) == 0
            assert (grid, best) == (min_grid.value, block_size.value), (block, smem)
            assert 0 < best <= 1024 and best % 32 == 0 and grid > 0
    # More shared memory per block, no more resident blocks.
    assert axpy_occupancy(dx, dx, 256, 0)[0] >= axpy_occupancy(dx, dx, 256, 40_000)[0]


@njit
def axpy_clusters(out, x, c):
    return axpy[64, 128, 0, 1024, c].max_active_clusters(out, np.float32(1), x, x)


@needs_hopper
def test_max_active_clusters_of_an_mlir_kernel_equals_the_drivers():
    dx = cuda.device_array(4096, np.float32)
    func = cufunction(axpy, AXPY_TYPES)
    for c in (1, 2, 4, 8):
        assert axpy_clusters(dx, dx, c) == max_active_clusters(func, 64, 128, 1024, c) > 0, c
