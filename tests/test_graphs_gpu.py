"""CUDA graphs, thread-block clusters and occupancy queries on a GPU.

Replays and updates are checked against NumPy on fresh random inputs, with
outputs poisoned (NaN) first; occupancy answers against the driver's own,
asked from Python (cuda.bindings, ctypes) and through numba-cuda; failures
against the driver's error names."""

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
from support.cluster_kernels import cluster_info
from support.driver_queries import cufunction, max_active_clusters
from support.leaks import least_growth
from numba_cuda_launch import graphs

pytestmark = pytest.mark.gpu
rng = np.random.default_rng()


def ptr(devarray):
    return devarray.__cuda_array_interface__["data"][0]


def poisoned(shape, dtype=np.float32):
    return cuda.to_device(np.full(shape, np.nan, dtype=dtype))


@cuda.jit
def axpb(x, a, b):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = a * x[i] + b


@cuda.jit
def copy(x, y):
    i = cuda.grid(1)
    if i < x.size:
        y[i] = x[i]


@njit
def view(p, n):
    return numba.carray(ncl.as_voidptr(p), (n,), np.float32)


def reference(x, a, b):
    """x = a[k] * x + b[k] in order, rounded to float32 after each step as
    the kernel stores it."""
    x = x.astype(np.float32)
    for ak, bk in zip(np.atleast_1d(a), np.atleast_1d(b)):
        x = (ak * x.astype(np.float64) + bk).astype(np.float32)
    return x


@njit(nogil=True)
def record_chain(xp, yp, n, stream, a, b):
    """Record x = a[k] * x + b[k] for each k, then y = x; return the graph
    and the node of the first launch."""
    x, y = view(xp, n), view(yp, n)
    g = (n + 127) // 128
    graphs.begin_capture(stream)
    axpb[g, 128, stream](x, a[0], b[0])
    node = graphs.last_launch(stream)
    for k in range(1, a.size):
        axpb[g, 128, stream](x, a[k], b[k])
    copy[g, 128, stream](x, y)
    return graphs.end_capture(stream), node


def test_capture_records_without_running_and_replays():
    n = 10_007
    x0 = rng.standard_normal(n).astype(np.float32)
    a, b = rng.uniform(0.5, 1.5, 6), rng.standard_normal(6)
    dx, dy = cuda.to_device(x0), poisoned(n)
    stream = cuda.stream()
    graph, node = record_chain(ptr(dx), ptr(dy), n, stream, a, b)
    stream.synchronize()
    np.testing.assert_array_equal(dx.copy_to_host(), x0)  # recorded, not run
    assert np.isnan(dy.copy_to_host()).all()
    exe = graph.instantiate()
    expect = x0
    other = cuda.stream()
    for rep in range(3):
        exe.launch(stream if rep % 2 == 0 else other)  # any stream
        (stream if rep % 2 == 0 else other).synchronize()
        expect = reference(expect, a, b)
        np.testing.assert_allclose(dy.copy_to_host(), expect, rtol=2e-6, atol=1e-6)
    assert exe.destroy() == 0 and graph.destroy() == 0


@njit(nogil=True)
def update_and_replay(exe, node, xp, n, stream, a, b):
    exe.update_launch(node, axpb[(n + 127) // 128, 128], view(xp, n), a, b)
    exe.launch(stream)


def test_update_one_launch_pointer_and_scalars():
    n = 5_000
    x0 = rng.standard_normal(n).astype(np.float32)
    x2_0 = rng.standard_normal(n).astype(np.float32)
    dx, dx2, dy = cuda.to_device(x0), cuda.to_device(x2_0), poisoned(n)
    stream = cuda.stream()
    a, b = np.array([2.0]), np.array([0.5])
    graph, node = record_chain(ptr(dx), ptr(dy), n, stream, a, b)
    exe = graph.instantiate()
    # The first launch now works on x2 with new scalars; the copy still
    # copies x (untouched) into y.
    a2, b2 = rng.uniform(0.5, 1.5), rng.standard_normal()
    update_and_replay(exe, node, ptr(dx2), n, stream, a2, b2)
    stream.synchronize()
    np.testing.assert_allclose(dx2.copy_to_host(), reference(x2_0, a2, b2), rtol=2e-6, atol=1e-6)
    np.testing.assert_array_equal(dx.copy_to_host(), x0)
    np.testing.assert_array_equal(dy.copy_to_host(), x0)
    # Back on x, other scalars, many times: every replay uses the latest.
    expect = x0
    for _ in range(5):
        a3, b3 = rng.uniform(0.5, 1.5), rng.standard_normal()
        update_and_replay(exe, node, ptr(dx), n, stream, a3, b3)
        expect = reference(expect, a3, b3)
    stream.synchronize()
    np.testing.assert_allclose(dy.copy_to_host(), expect, rtol=1e-5, atol=1e-5)
    exe.destroy()
    graph.destroy()


def test_update_from_recaptured_graph():
    n = 4_096
    x0 = rng.standard_normal(n).astype(np.float32)
    dx, dy = cuda.to_device(x0), poisoned(n)
    stream = cuda.stream()
    a1, b1 = rng.uniform(0.5, 1.5, 4), rng.standard_normal(4)
    a2, b2 = rng.uniform(0.5, 1.5, 4), rng.standard_normal(4)
    g1, _ = record_chain(ptr(dx), ptr(dy), n, stream, a1, b1)
    exe = g1.instantiate()
    g2, _ = record_chain(ptr(dx), ptr(dy), n, stream, a2, b2)
    exe.update(g2)
    exe.launch(stream)
    stream.synchronize()
    np.testing.assert_allclose(dy.copy_to_host(), reference(x0, a2, b2), rtol=2e-6, atol=1e-6)
    # Another topology (one step more) cannot update it: said so.
    g3, _ = record_chain(ptr(dx), ptr(dy), n, stream, np.ones(5), np.zeros(5))
    with pytest.raises(ncl.CudaGraphError) as info:
        exe.update(g3)
    assert info.value.name == "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE"
    for h in (exe, g1, g2, g3):
        assert h.destroy() == 0


def test_captures_from_several_threads_on_their_own_streams():
    n, count = 3_000, 6
    inputs = [rng.standard_normal(n).astype(np.float32) for _ in range(count)]
    params = [(rng.uniform(0.5, 1.5, 3), rng.standard_normal(3)) for _ in range(count)]
    outputs, errors, keep = [None] * count, [], []
    record_chain(ptr(cuda.to_device(inputs[0])), ptr(poisoned(n)), n, cuda.stream(),
                 *params[0])  # compile first
    barrier = threading.Barrier(count)

    def work(k):
        try:
            stream = cuda.stream()
            dx, dy = cuda.to_device(inputs[k], stream=stream), poisoned(n)
            keep.append((stream, dx, dy))  # freed after every capture has ended
            stream.synchronize()
            # From here on only this thread's own stream is used: work on the
            # legacy stream (0) would wait for the others' captures.
            barrier.wait()
            graph, _ = record_chain(ptr(dx), ptr(dy), n, stream, *params[k])
            exe = graph.instantiate()
            for _ in range(2):
                exe.launch(stream)
            outputs[k] = dy.copy_to_host(stream=stream)
            stream.synchronize()
            exe.destroy()
            graph.destroy()
        except Exception as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    for k in range(count):
        a, b = params[k]
        expect = reference(reference(inputs[k], a, b), a, b)
        np.testing.assert_allclose(outputs[k], expect, rtol=2e-6, atol=1e-6)


def test_python_only_use():
    # Everything but the launches from Python: the functions and methods
    # are the same compiled code.
    n = 1_000
    x0 = rng.standard_normal(n).astype(np.float32)
    dx, dy = cuda.to_device(x0), poisoned(n)
    stream = cuda.stream()
    launch_copy = njit(lambda xp, yp, n, s: copy[(n + 127) // 128, 128, s](view(xp, n),
                                                                          view(yp, n)))
    launch_copy(ptr(dx), ptr(dy), n, stream)  # compiled and loaded before
    stream.synchronize()
    dy.copy_to_device(np.full(n, np.nan, np.float32))
    graphs.begin_capture(stream)
    launch_copy(ptr(dx), ptr(dy), n, stream)
    graph = graphs.end_capture(stream)
    exe = graph.instantiate()
    exe.launch(stream)
    stream.synchronize()
    np.testing.assert_array_equal(dy.copy_to_host(), x0)
    exe.destroy()
    graph.destroy()


# -- what cannot be captured is reported --------------------------------------------

def test_legacy_default_stream_capture_refused():
    with pytest.raises(ncl.CudaGraphError) as info:
        graphs.begin_capture(0)
    assert info.value.name == "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"
    assert "legacy default stream" in str(info.value)
    assert graphs.begin_capture_status(0) == 900


@njit
def capture_with_legacy_launch(xp, n, stream):
    x = view(xp, n)
    graphs.begin_capture(stream)
    axpb[1, 128, stream](x, 1.0, 0.0)
    legacy = axpb[1, 128, 0].launch_status(x, 1.0, 0.0)
    ended, graph = graphs.end_capture_status(stream)
    return legacy, ended, graph


def test_legacy_stream_launch_during_capture_reported():
    dx = cuda.to_device(rng.standard_normal(128).astype(np.float32))
    stream = cuda.stream()  # a blocking stream: the legacy stream waits for it
    legacy, ended, graph = capture_with_legacy_launch(ptr(dx), 128, stream)
    assert ncl.error_name(legacy) == "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT"
    assert ncl.error_name(ended) == "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED"
    assert graph.handle == 0
    assert graphs.abort_capture(stream) == 0
    # The stream works normally afterwards.
    x = np.full(128, 3.0, np.float32)
    dx.copy_to_device(x)
    njit(lambda p, s: axpb[1, 128, s](view(p, 128), 2.0, 1.0))(ptr(dx), stream)
    stream.synchronize()
    np.testing.assert_array_equal(dx.copy_to_host(), 2 * x + 1)


@njit
def raising_legacy_launch(xp, stream):
    x = view(xp, 128)
    graphs.begin_capture(stream)
    axpb[1, 128, 0](x, 1.0, 0.0)
    return graphs.end_capture(stream)


def test_raising_launch_in_capture_then_abort():
    dx = cuda.to_device(np.zeros(128, np.float32))
    stream = cuda.stream()
    with pytest.raises(ncl.CudaLaunchError) as info:
        raising_legacy_launch(ptr(dx), stream)
    assert "legacy default stream" in str(info.value)
    assert graphs.abort_capture(stream) == 0  # ends the capture the exception left
    assert graphs.begin_capture_status(stream) == 0
    assert graphs.end_capture(stream).destroy() == 0


def test_first_load_of_an_image_during_capture():
    # A fresh compiled function loads the kernel image on its first launch,
    # here inside the capture. Drivers of CUDA 12.3 and later allow it;
    # older ones refuse it, and the error says to preload.
    @cuda.jit
    def fresh(x, a):
        i = cuda.grid(1)
        if i < x.size:
            x[i] = x[i] * a

    @njit
    def record(xp, n, stream, a):
        graphs.begin_capture(stream)
        fresh[(n + 127) // 128, 128, stream](view(xp, n), a)
        return graphs.end_capture(stream)

    n = 1_000
    x0 = rng.standard_normal(n).astype(np.float32)
    dx, stream = cuda.to_device(x0), cuda.stream()
    version = cuda.cudadrv.driver.driver.get_version()
    if tuple(version) < (12, 3):
        with pytest.raises(ncl.CudaLaunchError, match="preload"):
            record(ptr(dx), n, stream, 3.0)
        graphs.abort_capture(stream)
        return
    graph = record(ptr(dx), n, stream, 3.0)
    exe = graph.instantiate()
    exe.launch(stream)
    stream.synchronize()
    np.testing.assert_allclose(dx.copy_to_host(), reference(x0, 3.0, 0.0))
    exe.destroy()
    graph.destroy()


@cuda.jit
def grid_sum_in_place(x, out):
    # Grid-wide sync: a cooperative kernel.
    i = cuda.grid(1)
    if i < x.size:
        cuda.atomic.add(out, 0, x[i])
    cuda.cg.this_grid().sync()
    if i < x.size:
        x[i] = out[0]


@njit
def capture_cooperative(xp, op, n, stream):
    graphs.begin_capture(stream)
    status = grid_sum_in_place[(n + 127) // 128, 128, stream].launch_status(view(xp, n),
                                                                           view(op, 1))
    ended, graph = graphs.end_capture_status(stream)
    return status, ended, graph


def test_cooperative_launch_in_capture():
    n = 1_024
    x0 = rng.integers(-8, 8, n).astype(np.float32)  # exact sums
    dx, dout = cuda.to_device(x0), cuda.to_device(np.zeros(1, np.float32))
    stream = cuda.stream()
    status, ended, graph = capture_cooperative(ptr(dx), ptr(dout), n, stream)
    if status == 0 and ended == 0:
        exe = graph.instantiate()
        exe.launch(stream)
        stream.synchronize()
        np.testing.assert_array_equal(dx.copy_to_host(), np.full(n, x0.sum(), np.float32))
        exe.destroy()
        graph.destroy()
    else:
        # Refused by this driver: reported with the driver's error name, and
        # the stream left usable.
        assert ncl.error_name(status or ended).startswith("CUDA_ERROR_")
        assert graphs.abort_capture(stream) == 0
    print("cooperative launch in capture:", ncl.error_name(status), ncl.error_name(ended))


# -- release ------------------------------------------------------------------------

@njit
def capture_cycles(xp, stream, cycles):
    x = view(xp, 128)
    for _ in range(cycles):
        graphs.begin_capture(stream)
        axpb[1, 128, stream](x, 1.0, 0.0)
        axpb[1, 128, stream](x, 1.0, 0.0)
        graph = graphs.end_capture(stream)
        exe = graph.instantiate()
        exe.launch(stream)
        graph.destroy()
        exe.destroy()


def test_no_leak_over_ten_thousand_cycles():
    dx = cuda.to_device(np.zeros(128, np.float32))
    stream = cuda.stream()
    capture_cycles(ptr(dx), stream, 1_000)  # warm-up: driver pools reach their size
    stream.synchronize()

    def run():
        capture_cycles(ptr(dx), stream, 10_000)
        stream.synchronize()

    grown, dropped = least_growth(run)
    print("10^4 cycles: host RSS %+d bytes, device free %+d bytes" % (grown, -dropped))
    # One leaked graph and executable graph per cycle would be megabytes.
    assert grown < 8 * 2**20
    assert dropped < 8 * 2**20


# -- thread-block clusters ----------------------------------------------------------

def _cc():
    if not cuda.is_available():
        return (0, 0)
    return tuple(cuda.get_current_device().compute_capability)


needs_hopper = pytest.mark.skipif("not _cc() >= (9, 0)", reason="clusters need sm_90")


@njit
def launch_cluster_info(op, blocks, gx, gy, stream, cx, cy, clustered):
    out = numba.carray(ncl.as_voidptr(op), (blocks, 3), np.uint32)
    from_cluster = cluster_info[(gx, gy), 32, stream, 0, (cx, cy)] if clustered \
        else cluster_info[(gx, gy), 32, stream]
    from_cluster(out)


@needs_hopper
@pytest.mark.parametrize("grid, cluster", [((8, 2), (2, 1)), ((8, 4), (2, 2)), ((6, 1), (3, 1)),
                                           ((8, 2), None)])
def test_cluster_rank(grid, cluster):
    gx, gy = grid
    blocks = gx * gy
    dout = cuda.to_device(np.full((blocks, 3), 0xFFFFFFFF, np.uint32))
    stream = cuda.stream()
    cx, cy = cluster or (1, 1)
    launch_cluster_info(ptr(dout), blocks, gx, gy, stream, cx, cy, cluster is not None)
    stream.synchronize()
    got = dout.copy_to_host()
    bx, by = np.meshgrid(np.arange(gx), np.arange(gy), indexing="xy")
    bx, by = bx.ravel(), by.ravel()  # block b = bx + gx * by
    np.testing.assert_array_equal(got[:, 0], (bx % cx) + cx * (by % cy))
    np.testing.assert_array_equal(got[:, 1], np.full(blocks, cx * cy))
    np.testing.assert_array_equal(got[:, 2], bx // cx)


@needs_hopper
def test_cluster_launch_recorded_in_a_graph():
    gx, gy, cx = 8, 2, 4
    dout = cuda.to_device(np.full((gx * gy, 3), 0xFFFFFFFF, np.uint32))
    stream = cuda.stream()
    launch_cluster_info(ptr(dout), gx * gy, gx, gy, stream, cx, 1, True)  # load first
    stream.synchronize()
    dout.copy_to_device(np.full((gx * gy, 3), 0xFFFFFFFF, np.uint32))
    graphs.begin_capture(stream)
    launch_cluster_info(ptr(dout), gx * gy, gx, gy, stream, cx, 1, True)
    graph = graphs.end_capture(stream)
    exe = graph.instantiate()
    exe.launch(stream)
    stream.synchronize()
    got = dout.copy_to_host()
    bx = np.tile(np.arange(gx), gy)
    np.testing.assert_array_equal(got[:, 0], bx % cx)
    np.testing.assert_array_equal(got[:, 1], np.full(gx * gy, cx))
    exe.destroy()
    graph.destroy()


@njit
def cluster_status(op, blocks, g, c):
    out = numba.carray(ncl.as_voidptr(op), (blocks, 3), np.uint32)
    return cluster_info[g, 32, 0, 0, c].launch_status(out)


@needs_hopper
def test_cluster_errors():
    dout = cuda.to_device(np.zeros((64, 3), np.uint32))
    assert cluster_status(ptr(dout), 64, 6, 4) == 1  # not whole clusters: refused here
    status = cluster_status(ptr(dout), 64, 64, 32)  # beyond what the device allows (8, 16)
    print("cluster of 32 blocks:", ncl.error_name(status))
    assert status != 0 and ncl.error_name(status).startswith("CUDA_ERROR_")
    cuda.synchronize()


@njit
def launch_coop_cluster(xp, op, n, stream):
    return grid_sum_in_place[(n + 127) // 128, 128, stream, 0, 2].launch_status(
        view(xp, n), view(op, 1))


@needs_hopper
def test_cooperative_cluster_launch():
    n = 1_024
    x0 = rng.integers(-8, 8, n).astype(np.float32)
    dx, dout = cuda.to_device(x0), cuda.to_device(np.zeros(1, np.float32))
    stream = cuda.stream()
    status = launch_coop_cluster(ptr(dx), ptr(dout), n, stream)
    stream.synchronize()
    print("cooperative + cluster launch:", ncl.error_name(status))
    if status == 0:
        np.testing.assert_array_equal(dx.copy_to_host(), np.full(n, x0.sum(), np.float32))
    else:
        assert ncl.error_name(status).startswith("CUDA_ERROR_")


# -- occupancy ----------------------------------------------------------------------

@cuda.jit
def shared_reverse(x, out):
    buf = cuda.shared.array(0, numba.float32)
    fixed = cuda.shared.array(256, numba.float64)  # static shared memory too
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    if i < x.size:
        buf[t] = x[i]
    fixed[t % 256] = t
    cuda.syncthreads()
    if i < x.size:
        out[i] = buf[cuda.blockDim.x - 1 - t] + fixed[0]


ARGTYPES = (nt.float32[::1], nt.float32[::1])


@njit
def occupancy_of(xp, n, block, smem):
    x = view(xp, n)
    cfg = shared_reverse[1, block, 0, smem]
    grid, best = cfg.max_potential_block_size(x, x)
    return cfg.max_active_blocks(x, x), grid, best


def test_occupancy_equals_the_driver():
    from cuda.bindings import driver as drv
    dx = cuda.device_array(4096, np.float32)
    func = cufunction(shared_reverse, ARGTYPES)
    libcuda = ctypes.CDLL("libcuda.so.1")
    numba_func = shared_reverse.overloads[ARGTYPES]._codelibrary.get_cufunc()
    ctx = cuda.current_context()
    for block in (32, 96, 256, 1024):
        for smem in (0, 4096, 40_000):
            ours, grid, best = occupancy_of(ptr(dx), 4096, block, smem)
            err, theirs = drv.cuOccupancyMaxActiveBlocksPerMultiprocessor(func, block, smem)
            assert err == drv.CUresult.CUDA_SUCCESS
            assert ours == theirs, (block, smem)
            try:  # numba-cuda's own query, where its binding takes its handle
                via_numba = ctx.get_active_blocks_per_multiprocessor(numba_func, block, smem)
            except Exception:
                via_numba = None
            assert via_numba in (None, ours), (block, smem)
            min_grid, block_size = ctypes.c_int(), ctypes.c_int()
            status = libcuda.cuOccupancyMaxPotentialBlockSize(
                ctypes.byref(min_grid), ctypes.byref(block_size), ctypes.c_void_p(int(func)),
                None, ctypes.c_size_t(smem), 0)
            assert status == 0
            assert (grid, best) == (min_grid.value, block_size.value), (block, smem)
    # Values a device of this kind gives: positive, and fewer with more memory.
    assert occupancy_of(ptr(dx), 4096, 256, 0)[0] >= occupancy_of(ptr(dx), 4096, 256, 40_000)[0]


@njit
def clusters_of(xp, n, grid, block, cx):
    x = view(xp, n)
    return shared_reverse[grid, block, 0, 1024, cx].max_active_clusters(x, x)


@needs_hopper
def test_max_active_clusters_equals_the_driver():
    dx = cuda.device_array(4096, np.float32)
    func = cufunction(shared_reverse, ARGTYPES)
    for cx in (1, 2, 4, 8):
        ours = clusters_of(ptr(dx), 4096, 64, 128, cx)
        assert ours == max_active_clusters(func, 64, 128, 1024, cx) > 0, cx


# -- the shared-memory opt-in asked while a stream records ---------------------------

@cuda.jit
def reverse_in_shared(x, out):
    # a block's elements reversed through dynamic shared memory (above 48 KiB)
    s = cuda.shared.array(0, numba.float32)
    t = cuda.threadIdx.x
    i = cuda.blockIdx.x * cuda.blockDim.x + t
    if i < x.size:
        s[t] = x[i]
    cuda.syncthreads()
    if i < x.size:
        out[i] = s[cuda.blockDim.x - 1 - t]


@njit
def record_reverse(x, out, stream, shared):
    # the kernel's first launch in the process is recorded: its limit is
    # raised (the launch's device asked of the recording stream) mid-capture
    graphs.begin_capture(stream)
    reverse_in_shared[(x.size + 255) // 256, 256, stream, shared](x, out)
    graph = graphs.end_capture(stream)
    exe = graph.instantiate()
    graph.destroy()
    return exe


def test_first_launch_above_48_kib_recorded_in_a_graph():
    # The opt-in above 48 KiB asks which device the launch runs on; asked of
    # a stream being recorded it must leave the recording valid.
    n = 256 * int(rng.integers(4, 40))
    x = rng.standard_normal(n).astype(np.float32)
    dx, out = cuda.to_device(x), poisoned(n)
    stream = cuda.stream()
    exe = record_reverse(dx, out, stream, 100 * 1024)
    exe.launch(stream)
    stream.synchronize()
    want = x.reshape(-1, 256)[:, ::-1].reshape(-1)
    np.testing.assert_array_equal(out.copy_to_host(), want)
    exe.destroy()
